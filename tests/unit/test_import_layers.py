"""The house stays one house: no import cycle (function-level and TYPE_CHECKING imports counted), no import
against the layers, and the design page's Layout (docs/design/index.md) names every package.
scripts/check_imports.py is the rule."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "scripts" / "check_imports.py"


def _check(repo: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECKER), str(repo)], capture_output=True, text=True, timeout=60)


def test_the_repository_has_no_cycle_and_no_import_against_the_layers() -> None:
    result = _check(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout == ""


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in {"gpuplan/__init__.py": "", "providers/__init__.py": "", "jobs/__init__.py": "",
                      "migrations/__init__.py": "", **files}.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def test_a_cycle_through_a_function_level_import_fails(tmp_path: Path) -> None:
    repo = _tree(tmp_path, {
        "gpuplan/runs/__init__.py": "",
        "gpuplan/runs/a.py": "from gpuplan.runs.b import f\n",
        "gpuplan/runs/b.py": "def f():\n    from gpuplan.runs import a\n    return a\n",
    })
    result = _check(repo)
    assert result.returncode == 1
    assert "import cycle among modules: gpuplan.runs.a -> gpuplan.runs.b" in result.stdout


def test_a_type_checking_import_counts(tmp_path: Path) -> None:
    repo = _tree(tmp_path, {
        "gpuplan/runs/__init__.py": "",
        "gpuplan/runs/a.py": "from gpuplan.runs.b import f\n",
        "gpuplan/runs/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from gpuplan.runs.a import x\n",
    })
    assert "import cycle among modules" in _check(repo).stdout


@pytest.mark.parametrize(("lower", "upper"), [("runs", "launching"), ("providers", "books"), ("store", "cli")])
def test_an_import_up_the_layers_fails_even_inside_a_function(tmp_path: Path, lower: str, upper: str) -> None:
    def module(part: str) -> str:
        return "providers/x.py" if part == "providers" else f"gpuplan/{part}/x.py"

    def dotted(part: str) -> str:
        return "gpuplan.providers.x" if part == "providers" else f"gpuplan.{part}.x"

    files = {module(upper): "", module(lower): f"def f():\n    import {dotted(upper)}\n"}
    for part in (lower, upper):
        if part != "providers":
            files[f"gpuplan/{part}/__init__.py"] = ""
    result = _check(_tree(tmp_path, files))
    assert result.returncode == 1
    assert f"{dotted(lower)} imports {dotted(upper)}: {upper} is not below {lower}" in result.stdout


def test_a_part_in_no_layer_is_reported(tmp_path: Path) -> None:
    result = _check(_tree(tmp_path, {"gpuplan/misc/__init__.py": "", "gpuplan/misc/x.py": ""}))
    assert result.returncode == 1 and "part 'misc' is in no layer" in result.stdout


def test_the_design_layout_names_every_package() -> None:
    page = (REPO / "docs" / "design" / "index.md").read_text()
    layout = page.split("## Layout", 1)[1].split("\n## ", 1)[0]
    packages = sorted({f"gpuplan/{p.parent.name}/" for p in (REPO / "gpuplan").glob("*/__init__.py")}
                      | {f"providers/{p.parent.name}/" for p in (REPO / "providers").glob("*/__init__.py")})
    missing = [p for p in packages if p.rstrip("/").split("/")[-1] + "/" not in layout and p not in layout]
    assert not missing, f"docs/design/index.md's Layout does not name {missing}"
