"""Read what Slurm's commands print about jobs into one neutral record (pure parsing; no I/O).

Slurm reports a job in four shapes, depending on the version and on whether the job is still in the
controller's memory (squeue/scontrol: up to MinJobAge after it ends, 300 s by default) or only in the
accounting database (sacct):

- `squeue --json`: 22.05 gives `job_state` as a string, times as epoch ints and `exit_code` as a wait status
  (768 = exit 3); 23.02+ give lists/objects ({"set": true, "number": ...}, {"return_code": ...}). Both are read.
- `squeue -h -t all -o FORMAT`: the parsable fallback for clusters without the JSON plugin; no exit code.
- `scontrol show job -o`: `key=value` pairs, `ExitCode=3:0` (code:signal); used for the exit code when squeue's
  parsable form is all there is.
- `sacct -X -P -n --format=...` (parsable2): finished jobs the controller has already forgotten. gpuplan does
  not use `sacct --json` because 22.05 reports the allocation's exit code there as 0 even when the batch script
  failed (checked against a real 22.05 cluster); the parsable `ExitCode` column is right.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass
from typing import Any

from gpuplan.providers.base import InstanceState

# Slurm job states -> gpuplan's provider-neutral instance states.
_STATE_MAP = {
    "PENDING": InstanceState.PENDING,
    "CONFIGURING": InstanceState.PENDING,
    "REQUEUED": InstanceState.PENDING,
    "REQUEUE_HOLD": InstanceState.PENDING,
    "REQUEUE_FED": InstanceState.PENDING,
    "RESV_DEL_HOLD": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "SUSPENDED": InstanceState.RUNNING,  # still holds (and is charged for) its allocation
    "STOPPED": InstanceState.RUNNING,
    "SIGNALING": InstanceState.RUNNING,
    "STAGE_OUT": InstanceState.STOPPING,
    "COMPLETING": InstanceState.STOPPING,
    "COMPLETED": InstanceState.SUCCEEDED,
    "FAILED": InstanceState.FAILED,
    "TIMEOUT": InstanceState.FAILED,
    "NODE_FAIL": InstanceState.FAILED,
    "OUT_OF_MEMORY": InstanceState.FAILED,
    "BOOT_FAIL": InstanceState.FAILED,
    "DEADLINE": InstanceState.FAILED,
    "CANCELLED": InstanceState.TERMINATED,
    "REVOKED": InstanceState.TERMINATED,
    "SPECIAL_EXIT": InstanceState.FAILED,
    "PREEMPTED": InstanceState.PREEMPTED,
}

# The squeue columns of the parsable fallback; the comment (free text) goes last so a `|` in it is harmless.
SQUEUE_FORMAT = "%i|%j|%T|%r|%S|%e|%D|%P|%b|%V|%k"  # %V: submit time; %k (comment) last
SACCT_FIELDS = "JobID,JobName,State,ExitCode,Start,End,NNodes,Partition,AllocTRES,Submit,Comment"
_GPU_TRES = re.compile(r"^(?:gres[:/])?gpu(?::(?!\d+$)[^:=]+)?(?:[:=](?P<count>\d+))?$")
_UNSET = {"", "N/A", "None", "Unknown", "(null)"}


class SlurmReportedError(ValueError):
    """A Slurm command answered with an `errors` list instead of (or as well as) its data."""


@dataclass(frozen=True)
class JobRecord:
    """One Slurm job as gpuplan needs it."""

    job_id: str
    name: str
    slurm_state: str
    reason: str | None = None
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    exit_code: int | None = None
    nodes: int | None = None
    partition: str | None = None
    comment: str | None = None
    gpus_per_node: int = 0
    submit: dt.datetime | None = None  # when sbatch handed it over: a queued job has no start yet

    @property
    def state(self) -> str:
        """The provider-neutral state (`InstanceState`)."""
        return map_state(self.slurm_state)

    @property
    def finished(self) -> bool:
        return self.state in InstanceState.GONE


def map_state(slurm_state: str) -> str:
    """Map `CANCELLED by 0`, `FAILED`, `RUNNING` ... to an InstanceState; unknown states are UNKNOWN."""
    base = slurm_state.split()[0].rstrip("+").upper() if slurm_state.strip() else ""
    return _STATE_MAP.get(base, InstanceState.UNKNOWN)


def exit_code_from_wait_status(status: int) -> int:
    """A POSIX wait status (squeue --json 22.05) -> a shell-style exit code (128+signal when killed)."""
    signal = status & 0x7F
    return 128 + signal if signal else (status >> 8) & 0xFF


def exit_code_from_pair(text: str) -> int | None:
    """`3:0` (code:signal, as sacct and scontrol print it) -> 3; `0:15` -> 143."""
    if not text or text in _UNSET:
        return None
    code, _, signal = text.partition(":")
    try:
        code_n, signal_n = int(code), int(signal or 0)
    except ValueError:
        return None
    return 128 + signal_n if code_n == 0 and signal_n else code_n


def _epoch(value: Any) -> dt.datetime | None:
    """Epoch seconds (int, or 23.02's {"set": true, "number": n}) -> aware UTC; 0/unset -> None."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    if not isinstance(value, (int, float)) or value <= 0:
        return None
    return dt.datetime.fromtimestamp(value, tz=dt.timezone.utc)


def _local_time(text: str) -> dt.datetime | None:
    """`2026-11-22T02:06:19` (the cluster's local time, as squeue/sacct print it) -> aware UTC."""
    text = text.strip()
    if text in _UNSET:
        return None
    try:
        return dt.datetime.fromisoformat(text).astimezone(dt.timezone.utc)
    except ValueError:
        return None


def _json_exit_code(value: Any) -> int | None:
    if isinstance(value, int):
        return exit_code_from_wait_status(value)
    if isinstance(value, dict):
        code = value.get("return_code")
        if isinstance(code, dict):
            code = code.get("number") if code.get("set", True) else None
        signal = value.get("signal", {})
        signal_id = signal.get("id") if isinstance(signal, dict) else None
        if isinstance(signal_id, dict):
            signal_id = signal_id.get("number") if signal_id.get("set", True) else None
        if isinstance(code, int):
            return 128 + signal_id if code == 0 and isinstance(signal_id, int) and signal_id else code
    return None


def _json_state(value: Any) -> str:
    if isinstance(value, list):
        return str(value[0]) if value else ""
    if isinstance(value, dict):  # sacct-style {"current": ...}
        return _json_state(value.get("current"))
    return str(value or "")


def parse_squeue_json(text: str) -> list[JobRecord]:
    """Every job in `squeue --json` output (22.05 ignores -j filters with --json: the caller filters)."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"squeue --json printed something that is not JSON: {exc}") from exc
    errors = [e for e in data.get("errors") or [] if isinstance(e, dict)]
    if errors:
        # 22.05 exits 0 with an empty job list when it cannot reach the controller: never read that as "no jobs".
        raise SlurmReportedError("; ".join(str(e.get("description") or e.get("error") or e) for e in errors))
    records = []
    for job in data.get("jobs", []):
        state = _json_state(job.get("job_state"))
        finished = map_state(state) in InstanceState.GONE
        nodes = job.get("node_count")
        if isinstance(nodes, dict):
            nodes = nodes.get("number")
        comment = job.get("comment")
        records.append(JobRecord(
            job_id=str(job.get("job_id")),
            name=str(job.get("name") or ""),
            slurm_state=state,
            reason=_clean(job.get("state_reason")),
            start=_epoch(job.get("start_time")),
            # While a job runs, end_time is the time limit's end, not an end: only trust it once finished.
            end=_epoch(job.get("end_time")) if finished else None,
            exit_code=_json_exit_code(job.get("exit_code")) if finished else None,
            nodes=nodes if isinstance(nodes, int) else None,
            partition=_clean(job.get("partition")),
            comment=_clean(comment if isinstance(comment, str) else None),
            gpus_per_node=gpus_from_tres_per_node(job.get("tres_per_node")),
            submit=_epoch(job.get("submit_time")),
        ))
    return records


def _pipe_rows(text: str, fields: int = 11) -> list[list[str]]:
    """The `|`-separated rows of a parsable squeue/sacct listing; the last field keeps any further `|`."""
    rows = []
    for line in text.splitlines():
        parts = line.split("|", fields - 1)
        if line.strip() and len(parts) == fields:
            rows.append(parts)
    return rows


def parse_squeue_parsable(text: str) -> list[JobRecord]:
    """Lines of `squeue -h -t all -o SQUEUE_FORMAT`."""
    records = []
    for parts in _pipe_rows(text):
        job_id, name, state, reason, start, end, nodes, partition, tres, submit, comment = parts
        finished = map_state(state) in InstanceState.GONE
        records.append(JobRecord(
            job_id=job_id.strip(), name=name, slurm_state=state, reason=_clean(reason), start=_local_time(start),
            end=_local_time(end) if finished else None, nodes=int(nodes) if nodes.isdigit() else None,
            partition=_clean(partition), comment=_clean(comment), gpus_per_node=gpus_from_tres_per_node(tres),
            submit=_local_time(submit),
        ))
    return records


def parse_scontrol_job(text: str) -> dict[str, str]:
    """`scontrol show job -o ID` -> its key=value pairs (values never contain spaces except Comment's tail)."""
    fields: dict[str, str] = {}
    for token in text.split():
        key, sep, value = token.partition("=")
        if sep:
            fields[key] = value
    return fields


def parse_sacct_parsable(text: str) -> list[JobRecord]:
    """Lines of `sacct -X -P -n --format=SACCT_FIELDS` (one line per allocation, job steps excluded by -X)."""
    records = []
    for parts in _pipe_rows(text):
        job_id, name, state, exit_code, start, end, nodes, partition, alloc_tres, submit, comment = parts
        node_count = int(nodes) if nodes.isdigit() else None
        records.append(JobRecord(
            job_id=job_id.strip(), name=name, slurm_state=state, start=_local_time(start), end=_local_time(end),
            exit_code=exit_code_from_pair(exit_code), nodes=node_count, partition=_clean(partition),
            comment=_clean(comment), gpus_per_node=gpus_from_alloc_tres(alloc_tres, node_count or 1),
            submit=_local_time(submit),
        ))
    return records


def parse_sbatch_job_id(text: str) -> str:
    """`sbatch --parsable` prints `ID` or `ID;cluster`."""
    first = text.strip().splitlines()[-1] if text.strip() else ""
    job_id = first.split(";", 1)[0].strip()
    if not job_id.isdigit():
        raise ValueError(f"sbatch --parsable printed {text.strip()!r}, not a job id")
    return job_id


def gpus_from_tres_per_node(value: Any) -> int:
    """GPUs per node from squeue's TRES-per-node: `gres:gpu:2`, `gres/gpu:a100:4`, `gres:gpu=2` -> 2/4/2."""
    if not isinstance(value, str):
        return 0
    total = 0
    for item in value.split(","):
        match = _GPU_TRES.match(item.strip())
        if match:
            total += int(match.group("count") or 1)
    return total


def gpus_from_alloc_tres(value: str, nodes: int) -> int:
    """GPUs per node from sacct's AllocTRES (`cpu=1,gres/gpu=4,node=2` is per job: 4 over 2 nodes -> 2)."""
    for item in (value or "").split(","):
        key, _, count = item.partition("=")
        if key.strip() == "gres/gpu" and count.strip().isdigit():
            return int(count) // max(nodes, 1)
    return 0


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    return None if text in _UNSET else text
