"""The one-line-per-run view shared by `gpuplan runs` and `gpuplan status` (no argument): which machines, which
GPU, what it cost so far, when it ends, and why it ended, in cells a terminal shows at a glance."""

from __future__ import annotations

import datetime as dt
from typing import Any

from gpuplan.errors import UserError


def machines_cell(s: dict[str, Any]) -> str:
    """`2 x p5.48xlarge` (nodes x instance type), `1 x local` when the provider has no instance types."""
    nodes = s.get("nodes") or 1
    return f"{nodes} x {s.get('instance_type') or s.get('provider') or '?'}"


def gpu_cell(s: dict[str, Any]) -> str:
    """`8 x H100` per node, `-` for a CPU run."""
    if not s.get("gpu"):
        return "-"
    per_node = s.get("gpus_per_node")
    return f"{per_node:g} x {s['gpu']}" if per_node else str(s["gpu"])


def reason_cell(s: dict[str, Any], width: int = 60) -> str:
    """Why the run ended (or is waiting), on one line and cut to `width` characters; `-` when nothing was said."""
    reason = " ".join(str(s.get("state_reason") or "").split())
    if not reason:
        return "-"
    return reason if len(reason) <= width else reason[: width - 3] + "..."


def eta_cell(s: dict[str, Any]) -> str:
    """Time left for a live run with progress, `-` otherwise."""
    from gpuplan.cli.display import hours_text

    eta = s.get("eta_seconds")
    return "-" if eta is None else hours_text(eta / 3600)


def parse_since(text: str, now: dt.datetime) -> dt.datetime:
    """`--since`: a date or time (2026-11-01, 2026-11-01T12:00Z) or an age (12h, 3d, '2 weeks') back from now."""
    from gpuplan.books.periods import parse_when
    from gpuplan.units import parse_duration_hours

    stripped = text.strip()
    if stripped[:1].isdigit() and len(stripped) >= 10 and stripped[4:5] == "-":
        return parse_when(stripped, "--since")
    try:
        hours = parse_duration_hours(stripped, what="--since")
    except (ValueError, UserError):
        raise UserError(f"--since: not a date or an age: {text!r} (e.g. 2026-11-01, 12h or 3d)") from None
    return now - dt.timedelta(hours=hours)


def parse_states(text: str | None) -> frozenset[str] | None:
    """`--state running,failed` (or `live`, `ended`) -> the run states; an unknown one is a UserError."""
    from gpuplan.store.models import RunState

    if text is None:
        return None
    known = sorted(RunState.LIVE | RunState.FINAL)
    out: set[str] = set()
    for name in (part.strip().lower() for part in text.split(",") if part.strip()):
        if name == "live":
            out |= RunState.LIVE
        elif name == "ended":
            out |= RunState.FINAL
        elif name in known:
            out.add(name)
        else:
            # A typo ('sucess') would otherwise list nothing and look like an empty history.
            raise UserError(f"unknown run state {name!r}; known: {', '.join(known)} (or live, ended)")
    if not out:
        raise UserError("--state: give a state, e.g. running or live")
    return frozenset(out)
