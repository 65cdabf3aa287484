"""`python -m gpuplan` runs the same CLI as the `gpuplan` console script."""

from gpuplan.cli import main

if __name__ == "__main__":
    main()
