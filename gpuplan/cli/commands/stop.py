"""`gpuplan stop RUN`: end a run's machines now; the run ends `stopped` with its cost up to this moment."""

from __future__ import annotations

import click

from gpuplan.cli import complete
from gpuplan.cli.context import AppContext, pass_app


@click.command("stop")
@click.argument("run_ref", metavar="RUN", shell_complete=complete.live_run_refs)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def stop(app: AppContext, run_ref: str, as_json: bool) -> None:
    """Stop RUN (its machines are terminated; stopping an ended run only reports it)."""
    from gpuplan.cli.display import show_summary
    from gpuplan.runs.records import get_run
    from gpuplan.supervise.watch import stop_run

    with app.store.session() as session:
        run_id = get_run(session, run_ref).id
    result = stop_run(app.store, run_id)
    show_summary(result.summary, as_json)
