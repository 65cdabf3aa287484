"""`gpuplan watch [--once]`: look after every live run — settle ended ones, enforce max_hours/budget/deadline."""

from __future__ import annotations

import time

import click

from gpuplan.commands.params import FiniteFloat
from gpuplan.context import AppContext, pass_app
from gpuplan.output import emit_json, note


@click.command("watch")
@click.option("--once", is_flag=True, help="One pass, then exit (for cron or a systemd timer).")
@click.option("--interval", type=FiniteFloat(min=0.5), default=30.0, show_default=True,
              help="Seconds between passes.")
@click.option("--json", "as_json", is_flag=True, help="With --once: the runs looked at, as JSON.")
@pass_app
def watch(app: AppContext, once: bool, interval: float, as_json: bool) -> None:
    """Watch detached runs: stop (state `capped`) any that reach a cap, and record how runs end."""
    from gpuplan.watch import watch_all

    while True:
        results = watch_all(app.store)
        for r in results:
            if r.changed:
                reason = r.summary.get("state_reason")
                note(f"{r.run_id} {r.summary['name']}: {r.state}" + (f" ({reason})" if reason else ""))
        if once:
            if as_json:
                emit_json([r.summary for r in results])
            elif not results:
                note("no live runs")
            return
        try:
            time.sleep(interval)
        except KeyboardInterrupt:
            return
