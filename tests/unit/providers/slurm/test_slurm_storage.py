"""On Slurm the run's folder storage is on the shared file system: the job checkpoints straight into it."""

from __future__ import annotations

from gpuplan.providers.slurm.provider import slurm_checkpoint_dir


def test_a_folder_storage_is_where_a_slurm_job_checkpoints() -> None:
    options = {"checkpoint_dir": "ckpt", "checkpoint_url": "/shared/gpuplan/r-1/checkpoints"}
    assert slurm_checkpoint_dir(options) == "/shared/gpuplan/r-1/checkpoints"
    assert slurm_checkpoint_dir({"checkpoint_dir": "ckpt"}) == "ckpt"
    assert slurm_checkpoint_dir({"checkpoint_dir": "ckpt", "checkpoint_url": "s3://b/r-1/checkpoints"}) == "ckpt"
    assert slurm_checkpoint_dir({"checkpoint_url": "/shared/r-1/checkpoints"}) is None  # no checkpoint: in spec
