"""A run's durable storage: where its checkpoints (and outputs) outlive the machine that wrote them.

The spec's `storage:` (or `[defaults] storage` in the config file) names a place the run's machines reach — a
bucket prefix (`SCHEME://bucket/prefix`: the object store of the run's cloud) or an absolute folder path that every
node can reach on a cluster or this machine (`/shared/gpuplan`). Each run gets its own folder there, named by its
run id, so runs never read each other's checkpoints: `<storage>/<run id>/checkpoints/` holds what the job wrote to
`$GPUPLAN_CHECKPOINT_DIR`, restored on every (re)launch (gpuplan.jobs.boot_checkpoints).

Which schemes exist is the providers' knowledge, not this module's: each declares the `storage_schemes` its
machines reach (`Provider.storage_schemes`; `path` for a shared folder), the launch refuses a storage its provider
does not reach (`storage_misfit`), and `gpuplan config` refuses one no provider reaches (`unknown_scheme`).

Rules, no I/O but the config file: validation of the value, the run's URLs, which storage fits which provider.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from gpuplan.config import default_setting
from gpuplan.errors import UserError

CHECKPOINTS = "checkpoints"
CODE_BUNDLE = "code.tar.gz"
PATH = "path"  # the scheme of an absolute folder path: a file system every node reaches, no cloud's object store
# SCHEME://bucket[/prefix]. The bucket rule is what the object stores' naming rules share: 3-63 lower-case letters,
# digits, dots and dashes (S3: https://docs.aws.amazon.com/AmazonS3/latest/userguide/bucketnamingrules.html, GCS:
# https://cloud.google.com/storage/docs/buckets#naming); prefixes stay to safe object-name characters here.
_BUCKET_URL = re.compile(r"^([a-z][a-z0-9]{0,15})://([a-z0-9][a-z0-9._-]{1,61}[a-z0-9])(/[A-Za-z0-9._=+@,:/-]*)?$")
_PATH = re.compile(r"^/[A-Za-z0-9._=+@,:/ -]*$")


def storage_scheme(value: str) -> str:
    """A bucket URL's scheme (`SCHEME` of `SCHEME://bucket/prefix`) or `path` for an absolute folder path; ValueError
    (a spec error, exit 2) for anything else. Whether a provider reaches that scheme is checked at launch."""
    match = _BUCKET_URL.match(value)
    if match:
        return match.group(1)
    if _PATH.match(value) and "/../" not in f"{value}/" and "//" not in value:
        return PATH
    raise ValueError(f"storage {value!r} is neither a bucket prefix (SCHEME://bucket/prefix, e.g. the run's cloud's "
                     "object store) nor an absolute folder path")


def scheme_words(scheme: str) -> str:
    """`an s3:// prefix`, `a shared folder path`: a scheme as a message names it."""
    if scheme == PATH:
        return "a shared folder path"
    article = "an" if scheme[0] in "aefhilmnorsx" else "a"  # said letter by letter: an s3, a gs
    return f"{article} {scheme}:// prefix"


def unknown_scheme(storage: str, known: Collection[str]) -> str | None:
    """Why no provider can keep runs in `storage` (`known`: every registered provider's `storage_schemes`), in one
    line; None when one can."""
    scheme = storage_scheme(storage)
    if scheme in known:
        return None
    return (f"storage {storage}: no provider keeps runs in {scheme}:// storage; they take "
            + ", ".join(scheme_words(s) for s in sorted(known)))


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
    return (f"storage {storage} cannot be used on {cloud}: a {cloud} run keeps its checkpoints in "
            f"{scheme_words(allowed[0])}")


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
