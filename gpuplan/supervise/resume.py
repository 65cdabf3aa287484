"""What a spot relaunch resumes from, and what the interruption cost: read from the run's own metrics.

A job marks the metrics record of each saved checkpoint with `checkpoint: true` (the examples do:
`log_metrics(step, ..., checkpoint=True)`); its boot script keeps the metrics with the checkpoints in the run's
storage, so they survive the machine. When a machine is interrupted, the relaunch resumes from the last marked
step, and the work lost is what the job did after it: the steps past it and the seconds between the checkpoint's
record and the last record. Recorded on the `relaunch` event (`resumed_from_step`, `checkpoint_at`, `lost_steps`,
`lost_seconds`), shown by `status` ("resumed from step N (checkpoint of HH:MM)"), and averaged over past runs by
the planner's spot model instead of its "half a checkpoint interval" guess (gpuplan.planning.planner.SpotModel).
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.runs.events import EventKind, events_of, payload
from gpuplan.runs.payloads import NoticeData, RelaunchData
from gpuplan.supervise.progress import METRICS_FILE


@dataclass(frozen=True)
class ResumePoint:
    """The last checkpoint a relaunch resumes from, and the work after it that the interruption threw away."""

    resumed_from_step: int
    checkpoint_at: str | None  # ISO time (UTC) of the checkpoint's metrics record
    lost_steps: int
    lost_seconds: float


def _records(path: Path) -> list[dict[str, Any]]:
    out = []
    try:
        with path.open(errors="replace") as fh:
            for line in fh:
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if isinstance(record, dict) and isinstance(record.get("step"), int):
                    out.append(record)
    except OSError:
        return []
    return out


def resume_point(metrics: str | os.PathLike[str] | None) -> ResumePoint | None:
    """From a metrics file: the last record marked `checkpoint` and what came after it; None without one."""
    if metrics is None:
        return None
    records = _records(Path(metrics))
    marked = [r for r in records if r.get("checkpoint") is True]
    if not marked:
        return None
    ckpt, last = marked[-1], records[-1]
    seconds = 0.0
    when = None
    if isinstance(ckpt.get("time"), (int, float)):
        when = dt.datetime.fromtimestamp(float(ckpt["time"]), dt.timezone.utc).isoformat()
        if isinstance(last.get("time"), (int, float)):
            seconds = max(float(last["time"]) - float(ckpt["time"]), 0.0)
    return ResumePoint(resumed_from_step=int(ckpt["step"]), checkpoint_at=when,
                       lost_steps=max(int(last["step"]) - int(ckpt["step"]), 0), lost_seconds=round(seconds, 3))


def relaunch_resume(run: Any, spec: Any, provider: Any) -> ResumePoint | None:
    """Where the relaunch of `run` resumes. A cloud machine's checkpoints survive it only in the run's storage
    (gpuplan.launching.run_storage); without one the relaunch starts over, and all the work so far is lost."""
    from gpuplan.jobs.storage import run_storage

    metrics = Path(run.run_dir) / METRICS_FILE if run.run_dir else None
    point = resume_point(metrics)
    durable = provider.shares_run_folder or run_storage(spec) is not None
    if durable or metrics is None:
        return point
    records = _records(metrics)
    if not records:
        return None
    times = [float(r["time"]) for r in records if isinstance(r.get("time"), (int, float))]
    return ResumePoint(resumed_from_step=0, checkpoint_at=None, lost_steps=int(records[-1]["step"]),
                       lost_seconds=round(max(times) - min(times), 3) if times else 0.0)


def interruption_notice(run: Any) -> NoticeData | None:
    """The interruption notice a node's boot script recorded and shipped (node-<rank>/interruption.json)."""
    if not run.run_dir:
        return None
    for rank in range(max(int(run.nodes or 1), 1)):
        try:
            notice = json.loads((Path(run.run_dir) / f"node-{rank}" / "interruption.json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(notice, dict):
            said = {k: str(notice[k]) for k in ("cloud", "action", "noticed_at") if notice.get(k) is not None}
            return NoticeData(node_rank=rank, **said)
    return None


def relaunch_data(generation: int, instances: tuple[str, ...], point: ResumePoint | None,
                  notice: NoticeData | None) -> RelaunchData:
    """The `relaunch` event's data: the new machines, where the job resumes and what the interruption cost."""
    return RelaunchData(generation=generation, instances=instances, notice=notice,
                        resumed_from_step=point.resumed_from_step if point else None,
                        checkpoint_at=point.checkpoint_at if point else None,
                        lost_steps=point.lost_steps if point else None,
                        lost_seconds=point.lost_seconds if point else None)


def resume_words(point: ResumePoint | None) -> str:
    """The relaunch event's words about it."""
    if point is None:
        return ""
    if point.checkpoint_at is None and point.resumed_from_step == 0:
        return f" (no durable storage: starts over, {point.lost_steps} steps lost)"
    return f" (step {point.resumed_from_step}; {point.lost_steps} steps, {point.lost_seconds:.0f} s of work lost)"


def resumed_line(run: Any) -> str | None:
    """`resumed from step N (checkpoint of HH:MM)` for the run's latest relaunch that knew its checkpoint."""
    for event in reversed(events_of(run, (EventKind.RELAUNCH,))):
        data = payload(event, RelaunchData)
        step = data.resumed_from_step if data else None
        if data is None or step is None:
            continue
        at = data.checkpoint_at
        when = ""
        if at is not None:
            try:
                when = f" (checkpoint of {dt.datetime.fromisoformat(at).strftime('%H:%M')} UTC)"
            except ValueError:
                when = ""
        lost = data.lost_steps
        tail = f", {lost} steps lost" if lost else ""
        return f"resumed from step {step}{when}{tail}"
    return None
