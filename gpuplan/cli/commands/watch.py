"""`gpuplan watch [--once]`: look after every live run — settle ended ones, enforce max_hours/budget/deadline."""

from __future__ import annotations

import sys
import time

import click

from gpuplan.cli.commands.params import bounded
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note
from gpuplan.errors import UserError


@click.command("watch")
@click.option("--once", is_flag=True, help="One pass, then exit (for cron or a systemd timer).")
@click.option("--interval", type=bounded("interval_s", low=0.5), default=30.0, show_default=True,
              help="Seconds between passes.")
@click.option("--json", "as_json", is_flag=True,
              help="With --once (required): the runs looked at, as one JSON list. The loop has no end to print "
                   "one document at, so --json without --once is refused (exit 2).")
@pass_app
def watch(app: AppContext, once: bool, interval: float, as_json: bool) -> None:
    """Watch detached runs: stop (state `capped`) any that reach a cap, and record how runs end."""
    from gpuplan.supervise.watch import watch_all

    if as_json and not once:
        # Every --json in gpuplan prints one document when the command ends; the loop never ends, so it would
        # print nothing at all (the old behaviour) while the caller waits for JSON.
        raise UserError("--json needs --once (the loop never ends to print one JSON document; run "
                        "`gpuplan watch --once --json` from cron or a timer)")
    if not once:
        note(f"watching live runs every {interval:g} s (Ctrl-C stops watching; the runs keep going)")
    try:
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
            time.sleep(interval)
    except KeyboardInterrupt:
        # Ctrl-C is how the loop is meant to end, so one plain line rather than "error: interrupted"; the exit
        # status is 130 wherever it lands (a pass's own database work rolls back), as for every command.
        note("\nstopped watching; the runs keep going")
        sys.exit(130)
