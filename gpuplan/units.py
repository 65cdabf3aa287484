"""Parse the sizes and durations users type: `7B`, `1.3e9`, `2T`, `125M`, `48h`, `30m`.

Shared by the CLI flags, the job spec and the planner so `7B` means the same everywhere.
"""

from __future__ import annotations

import math
import re

from gpuplan.limits import MONEY_LIMIT, check

__all__ = ["DURATION_FORMS", "MONEY_LIMIT", "finite", "format_size", "parse_duration_hours", "parse_size"]

_SIZE_SUFFIX = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([KMBGT]?)\s*$", re.IGNORECASE)
# The number may carry an exponent (`1e3`, `2.5E+2h`) as sizes do (`--tokens 1e12`): the error for a bare
# number said "a bare number is hours" and then refused `1e3`, and YAML keeps `1e3` a string.
_DURATION_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*$", re.IGNORECASE)
# Short and spelt-out units alike (`3d` and `3 days`), so any form a person writes either works or is refused.
_DURATION_UNITS = {
    1: ("s", "sec", "secs", "second", "seconds"),
    60: ("m", "min", "mins", "minute", "minutes"),
    3600: ("", "h", "hr", "hrs", "hour", "hours"),
    86400: ("d", "day", "days"),
    604800: ("w", "wk", "wks", "week", "weeks"),
}
_DURATION_SECONDS = {unit: seconds for seconds, units in _DURATION_UNITS.items() for unit in units}
DURATION_FORMS = "72h, 90m, 3d or 3 days (units s, m, h, d, w; a bare number is hours)"


def parse_size(text: str | int | float, *, what: str = "size", limit: str | None = None) -> int:
    """`7B` -> 7_000_000_000. Accepts K/M/B(G)/T suffixes and scientific notation; must be > 0, and inside
    gpuplan.limits' range `limit` when one is named (`params`, `tokens`, `samples`).

    Raises ValueError with a message fit to show the user.
    """
    if isinstance(text, bool):
        raise ValueError(f"{what} must be a number like 7B, 1.3e9 or 125M, not {text!r}")
    if isinstance(text, (int, float)):
        value = _as_float(text)
    else:
        match = _SIZE_RE.match(str(text).replace("_", "").replace(",", ""))
        if not match:
            raise ValueError(f"{what} must be a number like 7B, 1.3e9 or 125M, not {text!r}")
        value = float(match.group(1)) * _SIZE_SUFFIX[match.group(2).upper()]
    value = finite(value, what=what, text=text)
    if value <= 0:
        raise ValueError(f"{what} must be greater than zero, not {text!r}")
    if limit is not None:
        check(limit, value, what, text=repr(text) if isinstance(text, str) else None)
    return round(value)


def finite(value: float, *, what: str = "number", text: object = None) -> float:
    """`value` if it is a finite number; else a ValueError fit to show the user.

    The one rule for every number a user types (flags, job spec): nan, inf, -inf and literals that overflow a
    float (`1e999`) mean nothing as a size, price, rate or count, and would turn into nan hours or $inf budgets.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} must be a number, not {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, not {(value if text is None else text)!r}")
    return float(value)


def _as_float(number: int | float) -> float:
    """float(number), with an int too large for a float (a YAML `params: 999...9`) as infinity for finite()
    to refuse, rather than an OverflowError that escapes as a crash."""
    try:
        return float(number)
    except OverflowError:
        return math.inf


def format_size(value: float) -> str:
    """7_000_000_000 -> `7B`; 1_300_000_000 -> `1.3B` (3 significant digits)."""
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def parse_duration_hours(text: str | int | float, *, what: str = "duration", allow_zero: bool = False) -> float:
    """`48h` -> 48.0, `90m` -> 1.5, `2d` and `2 days` -> 48.0; a bare number is hours. Must be > 0 (>= 0 with
    allow_zero, for flags where zero means "off", such as `reconcile --grace 0`) and at most the `hours` limit
    (gpuplan.limits: 100 years), so every duration fits a datetime and a timedelta."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        hours = _as_float(text)
    else:
        match = _DURATION_RE.match(str(text))
        if not match or match.group(2).lower() not in _DURATION_SECONDS:
            raise ValueError(f"{what} must look like {DURATION_FORMS}, not {text!r}")
        hours = float(match.group(1)) * _DURATION_SECONDS[match.group(2).lower()] / 3600
    hours = finite(hours, what=what, text=text)
    if hours < 0 or (hours == 0 and not allow_zero):
        raise ValueError(f"{what} must be {'zero or more' if allow_zero else 'greater than zero'}, not {text!r}")
    check("hours", hours, what, text=repr(text) if isinstance(text, str) else None, low=0 if allow_zero else None)
    return hours


HOURS_PER_YEAR = 24 * 365


def format_hours(hours: float) -> str:
    """A duration people read at a glance: `40 s`, `12 min`, `5.5 h`, `300 h (12.5 days)`, `26,280 h (3.0 years)`.

    A figure under an hour printed in hours reads `0.00` or `0.0 h`, which says nothing; seconds and minutes do.
    """
    if hours < 1 / 60:
        seconds = hours * 3600
        return "<1 s" if 0 < seconds < 1 else f"{seconds:.0f} s"
    if hours < 1:
        return f"{hours * 60:.0f} min" if hours * 60 >= 10 else f"{hours * 60:.1f} min"
    if hours < 72:
        return f"{hours:.1f} h"
    if hours < HOURS_PER_YEAR:
        return f"{hours:,.0f} h ({hours / 24:.1f} days)"
    return f"{hours:,.0f} h ({hours / HOURS_PER_YEAR:,.1f} years)"
