"""`gpuplan runs`: the recorded runs, newest first (live ones refreshed from their provider)."""

from __future__ import annotations

import click

from gpuplan.cli.commands.params import bounded_int
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table
from gpuplan.errors import UserError


@click.command("runs")
@click.option("--limit", type=bounded_int("rows", low=1), default=50, show_default=True,
              help="Show at most this many runs, newest first.")
@click.option("--state", help="Only runs in this state (running, succeeded, failed, stopped, capped, ...).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def runs(app: AppContext, limit: int, state: str | None, as_json: bool) -> None:
    """List runs with their state, duration, cost and measured throughput."""
    from gpuplan.cli.display import duration, money, rate
    from gpuplan.runs.records import list_runs
    from gpuplan.store.models import RunState
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.summary import summary
    from gpuplan.supervise.watch import watch_run

    known = sorted(RunState.LIVE | RunState.FINAL)
    if state is not None and state not in known:
        # A typo ('sucess') would otherwise list nothing and look like an empty history.
        raise UserError(f"unknown run state {state!r}; known: {', '.join(known)}")
    with app.store.session() as session:
        live = [r.id for r in list_runs(session, limit, state) if r.state in RunState.LIVE]
    for run_id in live:
        watch_run(app.store, run_id)
    now = utcnow()
    with app.store.session() as session:
        rows = [summary(r, now) for r in list_runs(session, limit, state)]
    if as_json:
        emit_json(rows)
        return
    print_table(
        ["RUN", "NAME", "PROVIDER", "STATE", "STARTED", "DURATION", "COST", "THROUGHPUT", "EST"],
        [[s["run_id"], s["name"], s["provider"], s["state"],
          s["started_at"].strftime("%Y-%m-%d %H:%M") if s["started_at"] else "-",
          duration(s["elapsed_hours"]), money(s["cost_usd"]), rate(s["tokens_per_s"]),
          _est_cell(s)] for s in rows],
        justify_right=["DURATION", "COST", "THROUGHPUT", "EST"],
    )


def _est_cell(s: dict) -> str:
    """The EST column: the estimated duration, `<= H:MM:SS` for a bench job's cap (not a prediction), or -."""
    from gpuplan.cli.display import duration

    if s["est_hours"] is None:
        return "-"
    return f"<= {duration(s['est_hours'])}" if s.get("estimate_is_cap") else duration(s["est_hours"])
