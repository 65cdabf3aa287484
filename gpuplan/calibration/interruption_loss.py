"""The work a spot interruption really costs, learnt from past relaunches (gpuplan.supervise.resume records it).

The planner's spot model charges each interruption `restart + lost work`; without history the lost work is half a
checkpoint interval (a guess: interruptions land anywhere between two checkpoints). Each relaunch records the
seconds of work the interruption threw away (`lost_seconds` on its `relaunch` event: 0 when the job saved on the
notice, everything when there was no durable storage), and the mean over the latest relaunches replaces the guess
once there are any.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpuplan.calibration.throughput import _query

HISTORY_RELAUNCHES = 50
RELAUNCH_SQL = "SELECT data_json FROM events WHERE kind = 'relaunch' ORDER BY at DESC, id DESC LIMIT ?"


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
    for (text,) in _query(db_url, RELAUNCH_SQL, (HISTORY_RELAUNCHES,)):
        try:
            data = json.loads(str(text)) if text else None
        except ValueError:
            continue
        seconds = data.get("lost_seconds") if isinstance(data, dict) else None
        if isinstance(seconds, (int, float)) and seconds >= 0:
            lost.append(float(seconds))
    if not lost:
        return None
    return MeasuredLoss(hours=sum(lost) / len(lost) / 3600, relaunches=len(lost))
