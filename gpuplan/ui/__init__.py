"""`gpuplan ui`: a local, read-only-by-default dashboard over the same database and functions as the CLI.

The web stack (Starlette, uvicorn, Jinja2) is the `ui` extra and is imported only when the `ui` command runs;
the command itself is registered by name in gpuplan.cli's registry, so the CLI never imports this package to
start. Every number on a page comes from the function the matching CLI command calls (gpuplan.ui.views).
"""
