"""A job spec's problems said the way a user can fix them: the YAML line, the field path, a close key name.

Kept apart from gpuplan.jobs.spec (which says what a valid spec is) because it walks PyYAML's node tree and
pydantic's error locations, neither of which the spec's fields need to know about.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel


def describe(err: Any, root: Any, source: str, spec_model: type[BaseModel]) -> str:
    """One pydantic error as `source:LINE: field.path: problem` (the line of the YAML node it points at)."""
    loc = tuple(err.get("loc", ()))
    line = _line_of(root, loc)
    # A key that is not a plain word (`'\n'`, `'a.b'`) is quoted, so the path stays on one line and unambiguous.
    path = ".".join(str(p) if re.fullmatch(r"[\w-]+", str(p)) else repr(p) for p in loc if _is_field(p)) or "spec"
    kind = err.get("type")
    if kind == "extra_forbidden":
        message = f"unknown key {loc[-1]!r}" + _suggest(loc, spec_model)
    elif kind == "missing":
        message = "required but missing"
    else:
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{source}:{line}: {path}: {message}"


def _is_field(part: Any) -> bool:
    """Pydantic puts union branch tags (`str`, `list[str]`, `function-after[...]`) in locations; skip them."""
    return isinstance(part, int) or (isinstance(part, str) and not re.search(r"[\[\]]", part)
                                     and part not in ("str", "int", "float", "bool", "datetime", "decimal"))


def _line_of(root: Any, loc: tuple[Any, ...]) -> int:
    """1-based line of the YAML node that `loc` points at (or the deepest node found on the way)."""
    import yaml

    node = root
    for index, part in enumerate(loc):
        if isinstance(node, yaml.MappingNode):
            match = next(((k, v) for k, v in node.value if isinstance(k, yaml.ScalarNode) and k.value == str(part)),
                         None)
            if match is None:
                continue  # a union tag or a missing key: stay at this mapping
            key_node, value_node = match
            if index == len(loc) - 1:
                return int(key_node.start_mark.line) + 1
            node = value_node
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
            node = node.value[part]
    return int(node.start_mark.line) + 1


def find_duplicate_key(node: Any) -> tuple[str, int] | None:
    """PyYAML keeps the last of two equal keys silently; a spec with `max_hours:` twice is a mistake."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    return key.value, key.start_mark.line + 1
                seen.add(key.value)
            found = find_duplicate_key(value)
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for item in node.value:
            found = find_duplicate_key(item)
            if found:
                return found
    return None


def _suggest(loc: tuple[Any, ...], spec_model: type[BaseModel]) -> str:
    """`max_hour` -> did you mean max_hours?"""
    import difflib

    model = spec_model
    for part in loc[:-1]:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None) if field else None
        candidates = [a for a in getattr(annotation, "__args__", (annotation,)) if isinstance(a, type)
                      and issubclass(a, BaseModel)]
        if not candidates:
            return ""
        model = candidates[0]
    names = [f.alias or name for name, f in model.model_fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
    return f" (did you mean {close[0]}?)" if close else f" (known: {', '.join(names)})"
