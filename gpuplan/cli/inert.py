"""Text from the books made inert before it reaches a terminal.

Job names, labels, reasons and run references come from specs and, on a shared PostgreSQL database, from other
people: an ESC (or a C1 control such as CSI, U+009B) in a name printed raw can move the cursor, rewrite the
screen, set the window title or, on some terminals, answer back as typed input. Every control character is shown
as its escape (`\\x1b`) instead, and rich markup in such text (`[red]`) is shown as written, not applied.
JSON output needs none of this: json.dumps escapes control characters (and, ASCII-only, every C1 one).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_CONTROL_KEEP_LINES = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def inert(text: object) -> str:
    """`text` as one line with every control character (newlines too) written as its escape."""
    return _CONTROL.sub(_escape, str(text))


def inert_lines(text: object) -> str:
    """`text` with control characters escaped but its newlines and tabs kept (a message of several lines)."""
    return _CONTROL_KEEP_LINES.sub(_escape, str(text))


def inert_markup(text: object) -> str:
    """`inert(text)` for a rich string that is parsed as markup: brackets shown as written."""
    from rich.markup import escape

    return escape(inert(text))
