"""Template filters: the CLI's own renderings (gpuplan.cli.display) of money, durations and rates, so a page
and a terminal write the same figure the same way."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from gpuplan.cli import display


def when(value: dt.datetime | None) -> str:
    """A time in UTC to the second, `-` when there is none."""
    return "-" if value is None else value.strftime("%Y-%m-%d %H:%M:%S")


def pct(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value:+.1%}" if signed else f"{value:.1%}"


def usd(value: Decimal | float | None) -> str:
    """Dollars to the cent, as `budget status` and `report` print them (negative with a leading minus)."""
    if value is None:
        return "-"
    return ("-" if value < 0 else "") + f"${abs(value):,.2f}"


def eta(seconds: float | None) -> str:
    return "-" if seconds is None else display.duration(seconds / 3600)


FILTERS: dict[str, Callable[..., Any]] = {
    "money": display.money, "dollars": display.dollars, "duration": display.duration, "hours": display.hours_text,
    "rate": display.rate, "when": when, "pct": pct, "usd": usd, "eta": eta,
    "versus": display.estimate_vs_actual,
}
