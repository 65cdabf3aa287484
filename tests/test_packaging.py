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
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True, text=True)
    # `make demo` used to open with ~120 lines of setuptools deprecation warnings (a TOML-table license, data
    # folders missing from `packages`): the packaging config builds without a single one.
    assert "Warning" not in built.stderr, built.stderr
    wheel = next(tmp_path.glob("gpuplan-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    top_levels = {n.split("/")[0] for n in names if not n.startswith("gpuplan-")}
    assert top_levels == {"gpuplan"}, top_levels
    for required in ("gpuplan/providers/base.py", "gpuplan/jobs/__init__.py", "gpuplan/migrations/env.py",
                     "gpuplan/migrations/script.py.mako", "gpuplan/migrations/versions/0001_initial.py",
                     "gpuplan/data/gpus.csv", "gpuplan/data/README.md", "gpuplan/data/prices/README.md",
                     "gpuplan/data/prices/aws_gpu_instances.csv"):
        assert required in names, required


def test_demo_ends_by_saying_where_its_books_are(tmp_path: Path) -> None:
    """The demo's database is in .demo/, not the user's: its last lines say so and how to look at it. The demo
    runs here with a gpuplan that does nothing (the whole demo trains a model: minutes), to read its ending."""
    fake = tmp_path / "gpuplan"
    fake.write_text('#!/bin/sh\nif [ "$1" = runs ]; then echo \'[{"run_id": "r1"}]\'; fi\n')
    fake.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "GPUPLAN_DB": f"sqlite:///{tmp_path}/demo db/gpuplan.db",
           "GPUPLAN_HOME": str(tmp_path / "demo")}
    out = subprocess.run(["bash", str(ROOT / "scripts/demo.sh"), str(fake)], capture_output=True, text=True,
                         env=env, check=True)
    tail = out.stdout.splitlines()[-5:]
    assert f"  database:    sqlite:///{tmp_path}/demo db/gpuplan.db" in tail
    assert any(line.startswith("  look at it:  GPUPLAN_DB=") and line.endswith(" gpuplan runs") for line in tail)
    assert "source .venv/bin/activate" in tail[-1]
