"""`gpuplan convert TASK.yaml`: the gpuplan job spec a SkyPilot task or a dstack task becomes.

The same translation `gpuplan launch TASK.yaml` runs (gpuplan.jobs.foreign), written out so it can be read,
kept and edited; what has no gpuplan equivalent is named in one note on stderr.
"""

from __future__ import annotations

from pathlib import Path

import click

from gpuplan.cli.output import note
from gpuplan.errors import UserError


@click.command("convert")
@click.argument("task_path", metavar="TASK.yaml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Write the spec to this file (refused if it exists) instead of stdout.")
def convert(task_path: Path, out_path: Path | None) -> None:
    """Print the gpuplan job spec equivalent to TASK.yaml (a SkyPilot task or a dstack `type: task`)."""
    from gpuplan.jobs.foreign import load_job

    loaded = load_job(task_path)  # validates the result as a gpuplan spec, like launch
    if loaded.translation is None:
        raise UserError(f"{task_path} is already a gpuplan job spec (neither a SkyPilot task nor a dstack task)")
    if loaded.translation.note():
        note(loaded.translation.note())
    if out_path is None:
        click.echo(loaded.text, nl=False)
        return
    try:
        with open(out_path, "x") as fh:
            fh.write(loaded.text)
    except FileExistsError:
        raise UserError(f"{out_path} exists; choose another file or remove it") from None
    except OSError as exc:
        raise UserError(f"cannot write {out_path}: {exc.strerror or exc}") from None
    note(f"wrote {out_path}: gpuplan launch {out_path}")
