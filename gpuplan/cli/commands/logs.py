"""`gpuplan logs RUN [-f]`: a run's job log, from the run folder (works whether or not anyone follows it).

A cloud run's log is the one its machines shipped (S3, GCS), which the watch step copies into the run folder:
stderr says which object, when the copy was fetched and when the next lands (gpuplan.cli.log_source); `-f` keeps
fetching and prints what each new copy added.
"""

from __future__ import annotations

import sys
import time

import click

from gpuplan.cli import complete
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.errors import UserError


@click.command("logs")
@click.argument("run_ref", metavar="RUN", shell_complete=complete.run_refs)
@click.option("-f", "--follow", "keep_following", is_flag=True, help="Keep printing until the run ends.")
@click.option("--node", type=click.IntRange(min=0), default=0, show_default=True, help="Which node's log.")
@pass_app
def logs(app: AppContext, run_ref: str, keep_following: bool, node: int) -> None:
    """Print the job log of RUN (rank 0 unless --node)."""
    from gpuplan.cli.follow import LogTail, log_path
    from gpuplan.cli.log_source import log_source
    from gpuplan.cli.output import note
    from gpuplan.runs.records import get_run
    from gpuplan.store.models import RunState
    from gpuplan.supervise.watch import watch_run

    with app.store.session() as session:
        run = get_run(session, run_ref)
        run_id, run_dir, nodes, live = run.id, run.run_dir, run.nodes, run.state in RunState.LIVE
        provider_name = run.provider
        storage = _spec_storage(run.spec_text, run_id)
    if node >= nodes:
        raise UserError(f"run {run_id} has {nodes} node(s); --node must be below {nodes}")
    if live and not keep_following:
        # One watch step first: a cloud run's log is whatever its machines shipped, fetched by that step.
        live = watch_run(app.store, run_id).state not in RunState.FINAL
    source = log_source(provider_name, run_id, node, storage)
    said = source.describe(log_path(run_dir, node), live=live)
    if said:
        note(said)
    tail = LogTail(log_path(run_dir, node))
    out = sys.stdout
    tail.drain(out)  # streamed a chunk at a time (a log of any size)
    out.flush()
    if not keep_following:
        tail.drain(out, partial=True)
        return
    try:
        while True:
            state = watch_run(app.store, run_id).state
            tail.drain(out)
            out.flush()
            if state in RunState.FINAL:
                break
            # A shipped copy changes at most every SHIP_INTERVAL_SECONDS: fetching it every second is waste.
            time.sleep(3.0 if source.is_copy else 1.0)
    except KeyboardInterrupt:
        tail.drain(out, partial=True)
        out.flush()
        from gpuplan.cli.interrupt import EXIT_INTERRUPTED

        sys.exit(EXIT_INTERRUPTED)  # Ctrl-C: 130, as a shell reports it (the run keeps going)
    tail.drain(out, partial=True)
    out.flush()


def _spec_storage(spec_text: str | None, run_id: str) -> str | None:
    """The run's `storage:` (or the config's default) from its recorded spec; None when it cannot be read."""
    from gpuplan.jobs.spec import parse_spec
    from gpuplan.jobs.storage import run_storage

    if not spec_text:
        return None
    try:
        return run_storage(parse_spec(spec_text, source=f"run {run_id}"))
    except (UserError, ValueError):
        return None
