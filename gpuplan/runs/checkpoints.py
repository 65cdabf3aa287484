"""Where a run's checkpoints are kept, for `gpuplan checkpoints RUN`.

With durable storage (the spec's `storage:` or `[defaults] storage`) that is `<storage>/<run id>/checkpoints`
(gpuplan.jobs.storage), kept after the run; without it only a run on this machine still has them, in its run
folder (`checkpoint.dir`, relative to the run folder). A cloud run without storage kept them on its machine's
boot disk, which died with it: there is nothing to list, and the answer says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.errors import UserError

if TYPE_CHECKING:
    from gpuplan.store.models import Run


def _runs_here(provider_name: str) -> bool:
    """Is the provider's run folder on this machine (`Provider.runs_here`)? An unregistered one is not."""
    from gpuplan.providers.base import ProviderError
    from gpuplan.providers.registry import load_provider_class

    try:
        return load_provider_class(provider_name).runs_here
    except ProviderError:
        return False


def checkpoint_location(run: Run) -> str:
    """The run's checkpoint folder: a storage URL or a local path; UserError (exit 2) when there is none."""
    from gpuplan.jobs.spec import parse_spec
    from gpuplan.jobs.storage import checkpoint_url, run_storage

    spec = parse_spec(run.spec_text, source=f"run {run.id}")
    if spec.checkpoint is None:
        raise UserError(f"run {run.id} has no checkpoint: in its spec, so it kept none")
    storage = run_storage(spec)
    if storage:
        return checkpoint_url(storage, run.id)
    if run.run_dir and _runs_here(run.provider):
        folder = Path(spec.checkpoint.dir)
        return str(folder if folder.is_absolute() else Path(run.run_dir) / folder)
    raise UserError(f"run {run.id} ran on {run.provider} without durable storage: its checkpoints stayed on its "
                    "machine (give the spec a `storage:`, or set [defaults] storage, to keep them)")
