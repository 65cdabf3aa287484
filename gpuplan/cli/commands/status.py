"""`gpuplan status [RUN]`: the truth about one run, or the queue: every live run and the last few ended."""

from __future__ import annotations

from typing import Any

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded_int
from gpuplan.cli.context import AppContext, pass_app


@click.command("status")
@click.argument("run_ref", metavar="[RUN]", required=False, shell_complete=complete.run_refs)
@click.option("--ended", "ended_count", type=bounded_int("rows", low=0), default=5, show_default=True,
              help="Without RUN: also list this many of the most recently ended runs.")
@click.option("--events", "with_events", is_flag=True,
              help="With RUN: also print the run's history (launch, fail-safe, budget overrides, CPU fallback, "
                   "relaunches, caps, stops), oldest first. --json always includes it as `events`.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def status(app: AppContext, run_ref: str | None, ended_count: int, with_events: bool, as_json: bool) -> None:
    """Show a run's state, progress, ETA, cost so far and estimate vs actual (caps are enforced, too).

    Without RUN: one line per live run (machines, GPU, cost so far, progress, ETA), then the last few that
    ended, each asked of its provider now as `gpuplan watch` would.
    """
    from gpuplan.cli.display import show_summary
    from gpuplan.runs.records import get_run
    from gpuplan.supervise.watch import watch_run

    if run_ref is None:
        _queue(app, ended_count, as_json)
        return
    with app.store.session() as session:
        run_id = get_run(session, run_ref).id
    result = watch_run(app.store, run_id)
    history = _history(app, run_id)
    show_summary({**result.summary, "events": history} if as_json else result.summary, as_json)
    if with_events and not as_json:
        _print_history(history)


def _history(app: AppContext, run_id: str) -> list[dict[str, Any]]:
    from gpuplan.runs.events import history

    with app.store.session() as session:
        return history(session, run_id)


def _print_history(history: list[dict[str, Any]]) -> None:
    from gpuplan.cli.inert import inert

    click.echo("  history:")
    for event in history:
        at = event["at"].strftime("%Y-%m-%d %H:%M:%S") if event["at"] is not None else "?"
        message = f": {inert(event['message'])}" if event["message"] else ""
        click.echo(f"    {at}  {event['kind']}{message}")


def _queue(app: AppContext, ended_count: int, as_json: bool) -> None:
    from gpuplan.cli.output import emit_json, note, warn
    from gpuplan.supervise.listing import queue

    found = queue(app.store, ended_count, warn)
    if as_json:
        emit_json(found)
        return
    if not found["live"]:
        note("no live runs")
    rows = [*found["live"], *found["ended"]]
    if rows:
        _print(rows)


def _print(rows: list[dict[str, Any]]) -> None:
    from gpuplan.cli.display import money
    from gpuplan.cli.output import print_table
    from gpuplan.cli.runlist import eta_cell, gpu_cell, machines_cell, reason_cell

    def progress(s: dict[str, Any]) -> str:
        return "-" if s.get("progress") is None else f"{s['progress'] * 100:.0f}%"

    def age(s: dict[str, Any]) -> str:
        from gpuplan.cli.display import hours_text

        return hours_text(s["elapsed_hours"]) if s.get("elapsed_hours") is not None else "-"

    print_table(
        ["RUN", "NAME", "STATE", "MACHINES", "GPU", "COST", "PROGRESS", "ETA", "RAN", "REASON"],
        [[s["run_id"], s["name"], s["state"], machines_cell(s), gpu_cell(s), money(s["cost_usd"]), progress(s),
          eta_cell(s), age(s), reason_cell(s, 40)] for s in rows],
        justify_right=["COST", "PROGRESS", "ETA", "RAN"],
    )
