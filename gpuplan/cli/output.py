"""Output helpers: machine-readable JSON on stdout, human tables with rich, messages on stderr.

With --json nothing but the JSON document goes to stdout; progress and warnings go to stderr.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import json
import sys
from collections.abc import Iterable, Sequence
from typing import Any

import click


def to_jsonable(value: Any) -> Any:
    """Convert dataclasses, Decimals, datetimes and paths to JSON types with stable, explicit rules.

    Money stays exact through Decimal until here and becomes a float rounded to 6 places; times become
    ISO 8601 strings in UTC with a `Z`.
    """
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, decimal.Decimal):
        return round(float(value), 6)
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc).isoformat().replace("+00:00", "Z")
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if hasattr(value, "__fspath__"):
        return str(value)
    return value


def emit_json(value: Any) -> None:
    """Write one JSON document to stdout (sorted keys are not used: key order is part of the contract)."""
    click.echo(json.dumps(to_jsonable(value), indent=2))


def say(message: str) -> None:
    """A human line on stdout with its control characters shown, not obeyed (names come from the books)."""
    from gpuplan.cli.inert import inert_lines

    click.echo(inert_lines(message))


def note(message: str) -> None:
    """A human message on stderr (never pollutes --json output); control characters shown, not obeyed."""
    from gpuplan.cli.inert import inert_lines

    click.echo(inert_lines(message), err=True)


def warn(message: str) -> None:
    from gpuplan.cli.inert import inert_lines

    click.echo(f"warning: {inert_lines(message)}", err=True)


def print_table(
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    title: str | None = None,
    justify_right: Sequence[str] = (),
) -> None:
    """Print a rich table to stdout; rich is imported here so only commands that draw tables pay for it."""
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from gpuplan.cli.inert import inert

    table = Table(title=title, show_edge=False, header_style="bold")
    for name in columns:
        table.add_column(name, justify="right" if name in justify_right else "left")
    for row in rows:
        # Text, not str: a cell is shown as written (no rich markup), its control characters as escapes.
        table.add_row(*(Text("" if cell is None else inert(cell)) for cell in row))
    console = Console(file=sys.stdout, soft_wrap=False, width=max(_terminal_width(), 80))
    # rich answers a closed pipe with SystemExit(1); let it be the BrokenPipeError every other write raises, so
    # the entry point ends the process the Unix way (gpuplan.cli.brokenpipe).
    console.on_broken_pipe = _raise_broken_pipe  # type: ignore[method-assign]  # rich: a method, no hook to pass
    console.print(table)


def _raise_broken_pipe() -> None:
    raise BrokenPipeError("stdout is closed")


def _terminal_width() -> int:
    """The terminal's width; when stdout is a pipe or a file, wide enough that no cell is cut short."""
    import shutil

    if not sys.stdout.isatty():
        return 200
    return shutil.get_terminal_size((120, 24)).columns
