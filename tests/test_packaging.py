"""The wheel installs providers/, jobs/ and migrations/ under gpuplan.* and ships the data files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"gpuplan": "gpuplan", "gpuplan.providers": "providers", "gpuplan.jobs": "jobs",
           "gpuplan.migrations": "migrations"}


def _declared_packages() -> set[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return set(config["tool"]["setuptools"]["packages"])


def test_every_package_folder_is_declared() -> None:
    found = set()
    for dotted, folder in MAPPING.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder)
            found.add(".".join([dotted, *rel.parts]) if rel.parts else dotted)
    assert found <= _declared_packages(), f"add to pyproject [tool.setuptools] packages: {found - _declared_packages()}"


def test_wheel_contents(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    wheel = next(tmp_path.glob("gpuplan-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top_levels = {n.split("/")[0] for n in names if not n.startswith("gpuplan-")}
    assert top_levels == {"gpuplan"}, top_levels
    for required in ("gpuplan/providers/base.py", "gpuplan/jobs/__init__.py", "gpuplan/migrations/env.py",
                     "gpuplan/migrations/script.py.mako", "gpuplan/migrations/versions/0001_initial.py",
                     "gpuplan/data/gpus.csv", "gpuplan/data/README.md", "gpuplan/data/prices/README.md",
                     "gpuplan/data/prices/aws_gpu_instances.csv"):
        assert required in names, required
