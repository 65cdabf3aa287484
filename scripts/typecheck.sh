#!/usr/bin/env bash
# mypy over gpuplan as it installs: providers/ and jobs/ are the packages gpuplan.providers and gpuplan.jobs
# (pyproject's package-dir), which mypy cannot see through an editable install. So it checks a tree of symlinks
# laid out as the wheel is, with a cache in .mypy_cache (a warm run takes a few seconds).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
mypy=${MYPY:-$repo/.venv/bin/mypy}
tree=$repo/.mypy_cache/tree
rm -rf "$tree"
mkdir -p "$tree/gpuplan"
for entry in "$repo"/gpuplan/*; do
  ln -s "$entry" "$tree/gpuplan/"
done
ln -s "$repo/providers" "$tree/gpuplan/providers"
ln -s "$repo/jobs" "$tree/gpuplan/jobs"
cd "$tree"
exec "$mypy" --config-file "$repo/pyproject.toml" --cache-dir "$repo/.mypy_cache/cache" -p gpuplan "$@"
