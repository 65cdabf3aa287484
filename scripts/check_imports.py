#!/usr/bin/env python3
"""Fail on any import cycle or any import against the layers, counting every import a module makes.

An import inside a function or under `if TYPE_CHECKING:` is as much a dependency as one at the top of the file:
it only defers the cycle to the moment the function runs (or hides it from the type checker's reader), so every
import statement anywhere in a file counts here. The layers are DESIGN.md's, lowest first; a part may import
its own modules, the loose base modules (errors, units, ...) and any part below it, never one above.

Usage: python scripts/check_imports.py [REPO]   (exit 1 with one line per cycle or violation; tests run it)
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable
from pathlib import Path

# Where each installed package lives in the repository (pyproject's package-dir mapping).
PACKAGE_DIRS = {"gpuplan": "gpuplan", "gpuplan.providers": "providers", "gpuplan.jobs": "jobs",
                "gpuplan.migrations": "migrations"}

# Lowest first. `migrations` sits on the store (its env.py reads the models; the store finds the scripts by
# path, not by import).
LAYERS = ("hardware", "store", "migrations", "catalog", "estimating", "jobs", "providers", "bench",
          "calibration", "runs", "books", "planning", "launching", "supervise", "scheduling", "cli", "ui")

# Loose modules of gpuplan/: the base every part may use. They import only one another.
BASE = ("__init__", "errors", "units", "limits", "paths", "config", "cronspec", "testpoint")
ENTRY = ("__main__",)  # `python -m gpuplan`: the CLI's caller, above everything


def modules(repo: Path) -> dict[str, Path]:
    """Every module's dotted name -> its file."""
    found: dict[str, Path] = {}
    for package, folder in PACKAGE_DIRS.items():
        for path in sorted((repo / folder).rglob("*.py")):
            parts = list(path.relative_to(repo / folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join([package, *parts])] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The gpuplan modules `name` imports, anywhere in its file."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod.
            targets.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                           for alias in node.names)
    return {_owner(t, known) for t in targets if t == "gpuplan" or t.startswith("gpuplan.")} - {name, ""}


def _owner(target: str, known: dict[str, Path]) -> str:
    while target and target not in known:
        target = target.rpartition(".")[0]
    return target


def part_of(module: str) -> str:
    """The part a module belongs to: `launching` for gpuplan.launching.start, `providers` for a provider."""
    rest = module.split(".")[1:]
    if not rest:
        return "__init__"
    return rest[0]


def rank(part: str) -> int:
    if part in BASE:
        return -1
    if part in ENTRY:
        return len(LAYERS)
    return LAYERS.index(part)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative: no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterable[str]]] = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(iter(children), None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def problems(repo: Path) -> list[str]:
    known = modules(repo)
    graph = {name: imported(name, path, known) for name, path in known.items()}
    out = [f"import cycle among modules: {' -> '.join(c)}" for c in cycles(graph)]
    parts: dict[str, set[str]] = {}
    for name, targets in graph.items():
        here = part_of(name)
        parts.setdefault(here, set()).update(part_of(t) for t in targets if part_of(t) != here)
    out += [f"import cycle among parts: {' -> '.join(c)}" for c in cycles(parts)]
    for name, targets in sorted(graph.items()):
        here = part_of(name)
        if here not in BASE and here not in ENTRY and here not in LAYERS:
            out.append(f"{name}: part {here!r} is in no layer (add it to LAYERS or BASE in {Path(__file__).name})")
            continue
        for target in sorted(targets):
            there = part_of(target)
            if there != here and there not in (*BASE, *ENTRY, *LAYERS):
                continue  # reported above for its own modules
            if there in BASE and here in BASE:
                continue  # the base modules use one another (a cycle among them is still reported)
            if there != here and rank(there) >= rank(here):
                out.append(f"{name} imports {target}: {there} is not below {here}")
    return out


def main(argv: list[str]) -> int:
    repo = Path(argv[1]) if len(argv) > 1 else Path(__file__).resolve().parents[1]
    found = problems(repo)
    for line in found:
        print(line)
    if found:
        print(f"{len(found)} import problem(s); the layers, lowest first: {' -> '.join(LAYERS)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
