"""`gpuplan checkpoints RUN [--download DIR] [--json]`: the checkpoints a run kept in its durable storage."""

from __future__ import annotations

from pathlib import Path

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.errors import UserError


@click.command("checkpoints")
@click.argument("run_ref", metavar="RUN")
@click.option("--download", "download_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              metavar="DIR", help="Copy every checkpoint file into DIR (keeping their sub-folders).")
@click.option("--json", "as_json", is_flag=True, help="Print the listing as JSON on stdout.")
@pass_app
def checkpoints(app: AppContext, run_ref: str, download_dir: Path | None, as_json: bool) -> None:
    """List the checkpoint files of RUN: what a relaunch restores, kept after the run ends.

    They live in the run's storage (`storage:` in the spec, or [defaults] storage: s3://, gs:// or a shared
    folder), under RUN_ID/checkpoints; a run on this machine without storage keeps them in its run folder.
    """
    from gpuplan.cli.output import emit_json, print_table
    from gpuplan.providers.base import ProviderError
    from gpuplan.providers.stored_files import download, list_files
    from gpuplan.runs.checkpoints import checkpoint_location
    from gpuplan.runs.records import get_run

    with app.store.session() as session:
        run = get_run(session, run_ref)
        run_id, region = run.id, run.region
        location = checkpoint_location(run)
    try:
        files = list_files(location, region)
        saved = [download(location, f.name, download_dir, region) for f in files] if download_dir else []
    except ProviderError as exc:
        raise UserError(str(exc)) from exc
    if as_json:
        emit_json({"run_id": run_id, "location": location,
                   "files": [{"name": f.name, "size": f.size, "modified": f.modified} for f in files],
                   "downloaded": [str(p) for p in saved]})
        return
    if not files:
        click.echo(f"no checkpoints in {location}")
        return
    print_table(["file", "bytes", "modified (UTC)"],
                [(f.name, f"{f.size:,}", f.modified.strftime("%Y-%m-%d %H:%M:%S") if f.modified else "?")
                 for f in files], justify_right=["bytes"], title=f"checkpoints of {run_id} in {location}")
    if saved:
        click.echo(f"downloaded {len(saved)} file(s) to {download_dir}")
