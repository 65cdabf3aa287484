"""`gpuplan config set/unset`: change one key of the TOML file and keep everything else as the user wrote it.

The standard library reads TOML but does not write it, and rewriting the whole document would drop the user's
comments and order. So a change edits lines: the `key = value` line inside its `[table]` is replaced (or
added at the table's end, or the table appended), and the result is parsed again and must hold exactly the
asked-for value, else nothing is written (a value spread over several lines is then left to the editor).
"""

from __future__ import annotations

import json
import math
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from gpuplan.config import parse_toml
from gpuplan.errors import UserError

_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: object) -> str:
    """A TOML literal for a str, bool, int, finite float or a list of them (JSON's string escapes are TOML's)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise UserError(f"{value} is not a number a config file can hold")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise UserError(f"cannot write {value!r} to a config file")


def _header(line: str) -> str | None:
    """The dotted name of a `[table]` header line, None for any other line."""
    stripped = line.split("#", 1)[0].strip()
    if stripped.startswith("[") and stripped.endswith("]") and not stripped.startswith("[["):
        return ".".join(part.strip().strip('"') for part in stripped[1:-1].split("."))
    return None


def _key_of(line: str) -> str | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or "=" not in stripped:
        return None
    return stripped.split("=", 1)[0].strip().strip('"')


def edit_text(text: str, table: str, key: str, value: Any | None) -> str:
    """`text` with `key` of `[table]` set to `value` (None: removed)."""
    if not _BARE_KEY.match(key):
        raise UserError(f"{key!r} is not a plain setting name")
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _header(line) == table), None)
    new_line = None if value is None else f"{key} = {toml_value(value)}"
    if start is None:
        if new_line is None:
            return text
        body = "\n".join(lines).rstrip("\n")
        return (body + "\n\n" if body else "") + f"[{table}]\n{new_line}\n"
    end = next((i for i in range(start + 1, len(lines)) if _header(lines[i]) is not None), len(lines))
    at = next((i for i in range(start + 1, end) if _key_of(lines[i]) == key), None)
    if at is not None:
        if new_line is None:
            del lines[at]
        else:
            lines[at] = new_line
    elif new_line is not None:
        last = max((i for i in range(start, end) if lines[i].strip()), default=start)
        lines.insert(last + 1, new_line)
    return "\n".join(lines) + "\n"


def write_setting(path: Path, table: str, key: str, value: Any | None) -> dict[str, Any]:
    """Set (or with None remove) one key in the file at `path` and return the new parsed document.

    The file is replaced atomically (a crash leaves the old one), and only when the edit reads back exactly.
    """
    from gpuplan.config import MAX_CONFIG_BYTES
    from gpuplan.readfile import read_text

    # Read as every config read is: regular files only, bounded (a FIFO would hang, a folder crashed here).
    old = read_text(path, "the config file", MAX_CONFIG_BYTES) if os.path.lexists(path) else ""
    new = edit_text(old, table, key, value)
    data = parse_toml(new, path)
    node: Any = data
    for part in table.split("."):
        node = node.get(part, {}) if isinstance(node, dict) else {}
    if (node.get(key) if isinstance(node, dict) else None) != value:
        raise UserError(f"cannot change {table}.{key} in {path} line by line (a value over several lines?); "
                        "edit the file by hand")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".config.", suffix=".toml")
    except OSError as exc:  # a parent that is a file, a read-only folder: where the user pointed GPUPLAN_CONFIG
        raise UserError(f"cannot write the config file {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w") as out:
            out.write(new)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o777)
        else:
            os.chmod(tmp, 0o644 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return data


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
