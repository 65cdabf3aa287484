"""Human renderings of a run shared by launch, status, stop and runs (JSON comes from
gpuplan.supervise.summary.summary)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import click


def duration(hours: float | None) -> str:
    if hours is None:
        return "-"
    seconds = round(hours * 3600)
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}"


def hours_text(hours: float | None) -> str:
    """A duration people read at a glance (gpuplan.units.format_hours); `-` when there is none."""
    from gpuplan.units import format_hours

    return "-" if hours is None else format_hours(hours)


def dollars(value: Decimal | float) -> str:
    """Whole dollars for big sums, cents below $100 (a $0.03 job must not read `$0`), and below a cent the sub-cent
    amount itself (`$0.0042`: a minute-long job is not free, and two of them differ), rounded only here."""
    value = float(value)
    if 0 < value < 0.01:
        return f"${value:.2g}" if value < 0.0001 else f"${value:.4f}"
    return f"${value:,.2f}" if value < 100 else f"${value:,.0f}"


def money(value: Decimal | float | None) -> str:
    if value is None:
        return "-"
    value = float(value)
    return f"${value:,.4f}" if value < 100 else f"${value:,.2f}"


def rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f} tok/s"


def estimate_vs_actual(s: dict[str, Any]) -> str | None:
    """`estimate 0.010 h / $0.00 -> actual 0.012 h (+20%)`, or None without an estimate."""
    if s.get("est_hours") is None:
        return None
    if s.get("estimate_is_cap"):  # a bench job's max-hours: what it may cost, not a prediction
        return f"no estimate (capped at {duration(s['est_hours'])} / {money(s.get('est_cost_usd'))})"
    text = f"estimate {duration(s['est_hours'])} / {money(s.get('est_cost_usd'))}"
    actual = s.get("elapsed_hours")
    if actual is not None and s["state"] in ("succeeded", "failed", "stopped", "capped", "lost"):
        delta = (actual - s["est_hours"]) / s["est_hours"] * 100 if s["est_hours"] else 0.0
        text += f" -> actual {duration(actual)} / {money(s.get('cost_usd'))} ({delta:+.0f}% time)"
    return text


def show_summary(summary: dict[str, Any], as_json: bool) -> None:
    """A run's summary as `--json` asks (the JSON document alone on stdout) or as the human lines."""
    if as_json:
        from gpuplan.cli.output import emit_json

        emit_json(summary)
    else:
        print_summary(summary)


def print_summary(s: dict[str, Any]) -> None:
    """A few lines about one run, on stdout."""
    from gpuplan.cli.inert import inert

    code = f" (exit {s['exit_code']})" if s.get("exit_code") is not None else ""
    click.echo(f"run {s['run_id']}  {inert(s['name'])}  on {s['provider']}: {s['state']}{code}")
    if s.get("state_reason"):
        click.echo(f"  reason: {inert(s['state_reason'])}")
    if s.get("resumed"):
        click.echo(f"  {s['resumed']}")
    line = f"  duration {duration(s.get('elapsed_hours'))}   cost {money(s.get('cost_usd'))}"
    if s.get("tokens_per_s") is not None:
        line += f"   measured {rate(s['tokens_per_s'])}"
    click.echo(line)
    if s.get("progress") is not None and s["state"] in ("pending", "provisioning", "running"):
        eta = s.get("eta_seconds")
        proj = s.get("projected_cost_usd")
        click.echo(f"  progress {s['progress'] * 100:.0f}%   ETA {duration(eta / 3600) if eta is not None else '?'}"
                   f"   projected cost {money(proj)}")
    comparison = estimate_vs_actual(s)
    if comparison:
        click.echo(f"  {comparison}")
    fs = s.get("failsafe") or {}
    if s.get("max_hours") is not None or s.get("budget_usd") is not None or fs.get("hours") is not None:
        caps = []
        if s.get("max_hours") is not None:
            caps.append(f"max {duration(s['max_hours'])}")
        if s.get("budget_usd") is not None:
            caps.append(f"budget {money(s['budget_usd'])}")
        if fs.get("hours") is not None:
            caps.append(f"machine fail-safe {duration(fs['hours'])} ({fs.get('cap')})")
        click.echo(f"  caps: {inert(', '.join(caps))}")  # a budget's name is anyone's text
