"""Where a machine's shipped outputs land in the local run folder, shared by every provider that fetches them.

The layout is the local provider's (jobs.runner writes it on this machine), so watch, status, logs and progress
never need to know whether a run was local or on a cloud:

    RUN_DIR/node-<rank>/job.log      the node's job log
    RUN_DIR/node-<rank>/exit.json    {"exit_code": N, "ended_at": ..., "reason": ...}
    RUN_DIR/node-<rank>/interruption.json   the cloud's interruption notice, when the boot script saw one
    RUN_DIR/metrics.jsonl            rank 0's metrics (gpuplan.supervise.progress reads this one)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.paths import PRIVATE_FILE_MODE, make_private_dir

OUTPUT_FILES = ("job.log", "metrics.jsonl", "interruption.json", "exit.json")
EXIT_FILE = "exit.json"


def node_prefix(run_id: str, rank: int) -> str:
    """The key prefix of one node's outputs in a bucket: `gpuplan/<run_id>/node-<rank>/`."""
    return f"gpuplan/{run_id}/node-{int(rank)}/"


def run_url(scheme: str, bucket: str | None, run_id: str) -> str | None:
    """A run's storage URL (`s3://BUCKET/gpuplan/<run_id>`, `gs://...`), or None without a bucket; node `r`
    ships under `<url>/node-<r>/`, which is `node_prefix` inside the bucket."""
    return f"{scheme}://{bucket}/gpuplan/{run_id}" if bucket else None


def node_dir(run_dir: str | os.PathLike[str], rank: int) -> Path:
    return Path(run_dir) / f"node-{int(rank)}"


def local_path(run_dir: str | os.PathLike[str], rank: int, name: str) -> Path:
    """Where a shipped file of node `rank` is kept locally (rank 0's metrics at the run level)."""
    if name == "metrics.jsonl" and int(rank) == 0:
        return Path(run_dir) / name
    return node_dir(run_dir, rank) / name


def store_output(run_dir: str | os.PathLike[str], rank: int, name: str, data: bytes) -> Path:
    """Write a fetched file atomically (a reader never sees half of it)."""
    if name not in OUTPUT_FILES:
        raise ValueError(f"not an output file: {name!r}")
    path = local_path(run_dir, rank, name)
    make_private_dir(path.parent)  # shipped logs are job output: owner only, like a local run's
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, PRIVATE_FILE_MODE)  # 0600 whatever the umask
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)
    return path


def write_exit_record(run_dir: str | os.PathLike[str], rank: int, exit_code: int, reason: str | None = None,
                      ended_at: str | None = None) -> Path:
    """An exit record learnt some other way than a file (GCP guest attributes), in the same shape."""
    record = {"exit_code": int(exit_code), "ended_at": ended_at, "reason": reason or ""}
    return store_output(run_dir, rank, EXIT_FILE, (json.dumps(record) + "\n").encode())


def read_exit_record(run_dir: str | os.PathLike[str] | None, rank: int) -> dict[str, Any] | None:
    """The node's exit record, or None while there is none (or it is unreadable)."""
    if not run_dir:
        return None
    try:
        record = json.loads(node_dir(run_dir, rank).joinpath(EXIT_FILE).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or not isinstance(record.get("exit_code"), int):
        return None
    return record


@dataclass(frozen=True)
class StoredObject:
    """One object listed under a node's prefix: its key and a version tag that changes when it is rewritten
    (an S3 ETag, a GCS generation), so a watch step downloads only what changed since the last one."""

    key: str
    version: str


def sync_node_outputs(objects: Iterable[StoredObject], prefix: str, read: Callable[[str], bytes],
                      run_dir: str | os.PathLike[str], rank: int, seen: MutableMapping[str, str]) -> list[Path]:
    """Copy a node's shipped output files into the run folder, skipping objects whose version `seen` already
    holds (the cache lives as long as the provider object). Shared by every bucket-backed provider: only the
    listing and the `read(key) -> bytes` call differ between clouds. Returns the paths written."""
    written: list[Path] = []
    for obj in objects:
        name = obj.key[len(prefix):] if obj.key.startswith(prefix) else ""
        if name not in OUTPUT_FILES or seen.get(obj.key) == obj.version:
            continue
        written.append(store_output(run_dir, rank, name, read(obj.key)))
        seen[obj.key] = obj.version
    return written


def bucket_hint(setting: str, permission: str) -> str:
    """The outcome hint of a provider without run storage: which setting turns it on, and what the machine needs."""
    return f"set {setting} (and give the machines {permission}) so runs ship their logs, metrics and exit code"
