"""The run's durable storage as the launch sequence hands it to providers (see gpuplan.jobs.storage).

The spec's `storage:` wins, else `[defaults] storage` from the config file; a storage the run's cloud cannot reach
(an s3:// prefix for a GCP run) is refused before anything is recorded or started (exit 2). A relaunch builds its
request the same way from the same run id, so it restores from the same folder.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gpuplan.errors import UserError
from gpuplan.jobs.storage import checkpoint_url, code_url, run_storage, run_storage_url, storage_misfit

if TYPE_CHECKING:
    from gpuplan.jobs.spec import JobSpec
    from gpuplan.providers.base import Provider


def check_run_storage(spec: JobSpec, provider: Provider) -> None:
    """UserError (one line, exit 2) when the run's storage does not fit the cloud it is about to run on."""
    storage = run_storage(spec)
    misfit = storage_misfit(storage, provider.cloud, provider.storage_schemes) if storage else None
    if misfit:
        raise UserError(misfit)


def storage_options(spec: JobSpec, run_id: str, spot: bool) -> dict[str, Any]:
    """The LaunchRequest options for the run's storage, checkpoint copies and interruption watch (a spot machine
    watches for its cloud's notice where the provider's boot hooks have one: gpuplan.jobs.boot_cloud)."""
    storage = run_storage(spec)
    interval = spec.checkpoint.interval if spec.checkpoint else None
    return {
        "run_storage_url": run_storage_url(storage, run_id) if storage else None,
        "checkpoint_url": checkpoint_url(storage, run_id) if storage and spec.checkpoint else None,
        "checkpoint_sync_seconds": float(interval) * 3600 if interval else None,
        "code_url": code_url(storage, run_id) if storage else None,
        "interruption_watch": spot,
    }
