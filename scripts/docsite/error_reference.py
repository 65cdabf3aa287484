"""The error reference: every exception class gpuplan raises on purpose, found in the source (not imported:
the cloud SDKs stay unloaded), with its exit status and docstring. tests/docs checks that the troubleshooting
page says what to do about each one, so a new error class cannot go undocumented.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE_FOLDERS = ("gpuplan", "providers", "jobs")
ROOTS = {"GpuplanError": 1, "ProviderError": 1}


@dataclass(frozen=True)
class ErrorClass:
    """One error class: its name, where it is defined, its base, exit status and docstring."""

    name: str
    module: str
    base: str
    exit_code: int
    doc: str


def _classes() -> dict[str, tuple[ast.ClassDef, str]]:
    found: dict[str, tuple[ast.ClassDef, str]] = {}
    for folder in SOURCE_FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            text = path.read_text()
            if "Error" not in text:  # every error class's name, or its base's, says Error: skip the parse
                continue
            tree = ast.parse(text, filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ClassDef):
                    found.setdefault(node.name, (node, str(path.relative_to(REPO))))
    return found


def _base_names(node: ast.ClassDef) -> list[str]:
    return [b.id if isinstance(b, ast.Name) else b.attr for b in node.bases if isinstance(b, (ast.Name, ast.Attribute))]


def _own_exit_code(node: ast.ClassDef) -> int | None:
    for stmt in node.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(
            stmt, ast.AnnAssign) else []
        for target in targets:
            if isinstance(target, ast.Name) and target.id == "exit_code" and isinstance(
                    getattr(stmt, "value", None), ast.Constant):
                return int(stmt.value.value)  # type: ignore[union-attr]
    return None


def error_classes() -> list[ErrorClass]:
    """Every class deriving (in any number of steps) from GpuplanError or ProviderError, roots included."""
    classes = _classes()
    codes: dict[str, int] = {}

    def exit_code(name: str) -> int | None:
        if name in codes:
            return codes[name]
        if name not in classes:
            return None
        node, _ = classes[name]
        own = _own_exit_code(node)
        if own is None:
            for base in _base_names(node):
                own = exit_code(base)
                if own is not None:
                    break
        if own is not None:
            codes[name] = own
        return own

    def is_error(name: str, seen: frozenset[str] = frozenset()) -> bool:
        if name in ROOTS:
            return True
        if name not in classes or name in seen:
            return False
        return any(is_error(b, seen | {name}) for b in _base_names(classes[name][0]))

    out = []
    for name, (node, module) in classes.items():
        if is_error(name):
            bases = _base_names(node)
            out.append(ErrorClass(name, module, bases[0] if bases else "Exception",
                                  exit_code(name) or 1, ast.get_docstring(node) or ""))
    return sorted(out, key=lambda e: (e.module, e.name))


def render_error_reference() -> str:
    lines = [
        "# Error reference",
        "",
        "Every error class gpuplan raises on purpose, found in the source at build time",
        "(`scripts/docsite/error_reference.py`). Each is printed as one line `error: ...` on stderr (a failover",
        "table or other detail may come first), with the exit status below; `-v` adds the traceback. What to do",
        "about each: [Troubleshooting](../troubleshooting.md).",
        "",
        "| error | exit | defined in | derives from | what it means |",
        "| --- | ---: | --- | --- | --- |",
    ]
    for err in error_classes():
        doc = " ".join(err.doc.split("\n\n")[0].split()).replace("|", "\\|")
        lines.append(f"| `{err.name}` | {err.exit_code} | `{err.module}` | `{err.base}` | {doc} |")
    lines += ["", "Exit statuses: 0 success; 1 a failure or an unexpected error; 2 bad input or a refusal",
              "(nothing was started); 130 interrupted by Ctrl-C; 141 the reader of the output went away (SIGPIPE).",
              ""]
    return "\n".join(lines)
