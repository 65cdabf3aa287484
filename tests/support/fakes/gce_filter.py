"""GCE's list filter, the subset gpuplan sends (`(labels.k = "v") (status != TERMINATED)`), for the fake Compute API.

Split from tests/support/fakes/gce_server.py so the fake stays one file about the API's resources.
"""

from __future__ import annotations

import re
from typing import Any

from support.fakes.gce_errors import ApiError

_TERM_RE = re.compile(r'\(?\s*([A-Za-z][\w.-]*)\s*(!=|=)\s*("([^"]*)"|[^\s()]+)\s*\)?')


def parse_filter(flt: str | None) -> Any:
    """A predicate for GCE's list filter, the subset gpuplan uses: `(a.b = "v") (c != V)` joined by AND."""
    terms: list[tuple[str, str, str]] = []
    if flt and flt.strip():
        rest = flt.strip()
        pos = 0
        while pos < len(rest):
            m = _TERM_RE.match(rest, pos)
            if not m:
                raise ApiError(400, f"Invalid value for field 'filter': '{flt}'.")
            value = m.group(4) if m.group(4) is not None else m.group(3)
            terms.append((m.group(1), m.group(2), value))
            pos = m.end()
            and_match = re.match(r"\s*(AND\s+)?", rest[pos:])
            pos += and_match.end() if and_match else 0

    def lookup(item: dict[str, Any], path: str) -> str | None:
        value: Any = item
        for part in path.split("."):
            if not isinstance(value, dict) or part not in value:
                return None
            value = value[part]
        return str(value)

    def match(item: dict[str, Any]) -> bool:
        for path, op, value in terms:
            actual = lookup(item, path)
            if op == "=" and actual != value:
                return False
            if op == "!=" and actual == value:
                return False
        return True

    return match
