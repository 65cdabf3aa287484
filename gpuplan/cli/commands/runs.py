"""`gpuplan runs`: the recorded runs, newest first (live ones refreshed from their provider)."""

from __future__ import annotations

import click

from gpuplan.cli.commands.params import bounded_int
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table


@click.command("runs")
@click.option("--limit", type=bounded_int("rows", low=1), default=50, show_default=True,
              help="Show at most this many runs, newest first.")
@click.option("--state", "state_text", metavar="STATE[,STATE]",
              help="Only runs in these states (running, succeeded, failed, stopped, capped, ...; `live` and "
                   "`ended` name the groups).")
@click.option("--since", "since_text", metavar="WHEN",
              help="Only runs created since a date/time (2026-11-01) or for an age back from now (12h, 3d).")
@click.option("--project", help="Only this project's runs.")
@click.option("--provider", help="Only runs started through this provider (local, aws, gcp, slurm, ...).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def runs(app: AppContext, limit: int, state_text: str | None, since_text: str | None, project: str | None,
         provider: str | None, as_json: bool) -> None:
    """List runs with their state, machines, GPU, duration, cost, throughput and why they ended."""
    from gpuplan.cli.display import duration, money, rate
    from gpuplan.cli.output import warn
    from gpuplan.cli.runlist import gpu_cell, machines_cell, parse_since, parse_states, reason_cell
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.listing import run_summaries

    rows = run_summaries(app.store, limit, states=parse_states(state_text), project=project, provider=provider,
                         since=parse_since(since_text, utcnow()) if since_text is not None else None, warn=warn)
    if as_json:
        emit_json(rows)
        return
    print_table(
        ["RUN", "NAME", "PROVIDER", "STATE", "MACHINES", "GPU", "STARTED", "DURATION", "COST", "THROUGHPUT", "EST",
         "REASON"],
        [[s["run_id"], s["name"], s["provider"], s["state"], machines_cell(s), gpu_cell(s),
          s["started_at"].strftime("%Y-%m-%d %H:%M") if s["started_at"] else "-",
          duration(s["elapsed_hours"]), money(s["cost_usd"]), rate(s["tokens_per_s"]),
          _est_cell(s), reason_cell(s, 40)] for s in rows],
        justify_right=["DURATION", "COST", "THROUGHPUT", "EST"],
    )


def _est_cell(s: dict) -> str:
    """The EST column: the estimated duration, `<= H:MM:SS` for a bench job's cap (not a prediction), or -."""
    from gpuplan.cli.display import duration

    if s["est_hours"] is None:
        return "-"
    return f"<= {duration(s['est_hours'])}" if s.get("estimate_is_cap") else duration(s["est_hours"])
