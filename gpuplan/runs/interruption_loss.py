"""The work a spot interruption really costs, learnt from past relaunches (gpuplan.supervise.resume records it).

The planner's spot model charges each interruption `restart + lost work`; without history the lost work is half a
checkpoint interval (a guess: interruptions land anywhere between two checkpoints). Each relaunch records the
seconds of work the interruption threw away (`lost_seconds` on its `relaunch` event: 0 when the job saved on the
notice, everything when there was no durable storage), and the mean over the latest relaunches replaces the guess
once there are any.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.calibration.throughput import _query
from gpuplan.runs.events import LATEST_OF_KIND_SQL, EventKind, read_payload
from gpuplan.runs.payloads import RelaunchData

HISTORY_RELAUNCHES = 50


@dataclass(frozen=True)
class MeasuredLoss:
    """Mean hours of work lost per interruption, over `relaunches` recorded relaunches."""

    hours: float
    relaunches: int


def measured_loss(db_url: str | None) -> MeasuredLoss | None:
    """From the store at `db_url`, None when no relaunch recorded what it lost."""
    if db_url is None:
        return None
    lost = []
    for kind, text in _query(db_url, LATEST_OF_KIND_SQL, (EventKind.RELAUNCH.value, HISTORY_RELAUNCHES)):
        data = read_payload(str(kind), str(text) if text else None, RelaunchData)
        seconds = data.lost_seconds if data is not None else None
        if seconds is not None and seconds >= 0:
            lost.append(seconds)
    if not lost:
        return None
    return MeasuredLoss(hours=sum(lost) / len(lost) / 3600, relaunches=len(lost))
