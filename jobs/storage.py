"""A run's durable storage: where its checkpoints (and outputs) outlive the machine that wrote them.

The spec's `storage:` (or `[defaults] storage` in the config file) names a place on the run's own cloud — an S3
prefix on AWS (`s3://bucket/prefix`), a GCS prefix on GCP (`gs://bucket/prefix`), an absolute folder path that
every node can reach on Slurm or this machine (`/shared/gpuplan`). Each run gets its own folder there, named by its
run id, so runs never read each other's checkpoints: `<storage>/<run id>/checkpoints/` holds what the job wrote to
`$GPUPLAN_CHECKPOINT_DIR`, restored on every (re)launch (gpuplan.jobs.boot_checkpoints).

Rules, no I/O but the config file: validation of the value, the run's URLs, which storage fits which cloud.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from gpuplan.config import default_setting
from gpuplan.errors import UserError

CHECKPOINTS = "checkpoints"
CODE_BUNDLE = "code.tar.gz"
# s3://bucket[/prefix] and gs://bucket[/prefix]: bucket names are 3-63 lower-case letters, digits, dots and dashes
# (https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html,
# https://cloud.google.com/storage/docs/buckets#naming); prefixes stay to safe object-name characters here.
_BUCKET_URL = re.compile(r"^(s3|gs)://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])(/[A-Za-z0-9._=+@,:/-]*)?$")
_PATH = re.compile(r"^/[A-Za-z0-9._=+@,:/ -]*$")
# Which storage each cloud's machines can reach with what their images ship (and, on AWS, their role allows).


def storage_scheme(value: str) -> str:
    """`s3`, `gs` or `path`; ValueError (a spec error, exit 2) for anything else."""
    match = _BUCKET_URL.match(value)
    if match:
        return match.group(1)
    if _PATH.match(value) and "/../" not in f"{value}/" and "//" not in value:
        return "path"
    raise ValueError(f"storage {value!r} is not s3://bucket/prefix, gs://bucket/prefix or an absolute folder path")


def check_storage(value: str | None) -> str | None:
    """The value without a trailing `/`, checked (the spec's validator)."""
    if value is None:
        return None
    value = value.strip()
    storage_scheme(value)
    return value.rstrip("/") or "/"


def run_storage_url(storage: str, run_id: str) -> str:
    """The run's own folder in the storage."""
    return f"{storage.rstrip('/')}/{run_id}"


def code_url(storage: str, run_id: str) -> str:
    """Where the run's packed folder goes (gpuplan.jobs.code_bundle)."""
    return f"{run_storage_url(storage, run_id)}/{CODE_BUNDLE}"


def checkpoint_url(storage: str, run_id: str) -> str:
    """Where the run's checkpoints live in the storage."""
    return f"{run_storage_url(storage, run_id)}/{CHECKPOINTS}"


def storage_misfit(storage: str, cloud: str, allowed: Sequence[str]) -> str | None:
    """Why `storage` cannot serve a run on `cloud`, whose machines reach the `allowed` schemes (its provider's
    `storage_schemes`; empty: any), in one line; None when it can."""
    scheme = storage_scheme(storage)
    if not allowed or scheme in allowed:
        return None
    wanted = {"s3": "an s3:// prefix", "gs": "a gs:// prefix", "path": "a shared folder path"}[allowed[0]]
    return f"storage {storage} cannot be used on {cloud}: a {cloud} run keeps its checkpoints in {wanted}"


def node_storage_fields(options: Mapping[str, Any]) -> dict[str, Any]:
    """The NodeLaunch fields a provider copies from its LaunchRequest's options (set by the launch sequence)."""
    seconds = options.get("checkpoint_sync_seconds")
    return {"checkpoint_url": options.get("checkpoint_url") or None,
            "checkpoint_sync_seconds": float(seconds) if seconds else None,
            "code_url": options.get("code_url") or None}


def run_storage(spec: Any) -> str | None:
    """The storage of a run of `spec` (a JobSpec; not imported: the spec imports this module): its own
    `storage:`, else the config's `[defaults] storage`, else None."""
    if spec.storage:
        return spec.storage
    default = default_setting("storage")
    if default in (None, ""):
        return None
    try:
        return check_storage(str(default))
    except ValueError as exc:
        raise UserError(f"[defaults] storage: {exc}") from exc
