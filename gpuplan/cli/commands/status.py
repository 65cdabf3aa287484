"""`gpuplan status RUN`: the truth about one run, asked of its provider and its metrics right now."""

from __future__ import annotations

import click

from gpuplan.cli.context import AppContext, pass_app


@click.command("status")
@click.argument("run_ref", metavar="RUN")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def status(app: AppContext, run_ref: str, as_json: bool) -> None:
    """Show a run's state, progress, ETA, cost so far and estimate vs actual (caps are enforced, too)."""
    from gpuplan.cli.display import show_summary
    from gpuplan.runs.records import get_run
    from gpuplan.supervise.watch import watch_run

    with app.store.session() as session:
        run_id = get_run(session, run_ref).id
    result = watch_run(app.store, run_id)
    show_summary(result.summary, as_json)
