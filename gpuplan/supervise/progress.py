"""Measured progress of a run from the metrics its job writes (gpuplan.jobs.metrics): throughput, ETA.

Pure functions over the JSON lines, so follow, status and watch all agree on what "measured" means.
Throughput is measured between the first and the last record that carry `tokens` (start-up time — imports,
data loading — is not counted against the job's speed); progress is tokens over the workload's total tokens,
or steps over the job's own `total_steps` when it reports one.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.limits import LIMITS, within

METRICS_FILE = "metrics.jsonl"
TAIL_BYTES = 64 * 1024
# An ETA past the longest job the limits allow (100 years) is no estimate: shown as unknown, never as inf.
MAX_ETA_SECONDS = LIMITS["hours"].high * 3600
_COUNTS = ("step", "tokens", "total_steps")


@dataclass(frozen=True)
class Progress:
    """What the metrics say so far."""

    records: int
    step: int | None
    tokens: int | None
    loss: float | None
    last_time: float | None
    tokens_per_s: float | None
    fraction: float | None  # 0..1, None when the total is unknown
    eta_seconds: float | None


def _parse(lines: list[str]) -> list[dict[str, Any]]:
    records = []
    for line in lines:
        line = line.strip()
        if not line:
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written right now, or junk: never fail a status on it
        if isinstance(value, dict):
            record = _sane(value)
            if record is not None:
                records.append(record)
    return records


def _sane(record: dict[str, Any]) -> dict[str, Any] | None:
    """The record with only numbers that mean something, or None without a usable `step`.

    A job writes these lines itself; JSON allows `1e400` (inf), `NaN` and strings, which used to overflow the
    metrics line (`int(inf)`) in launch, status and watch. Counts must be whole numbers within the metrics
    limits (gpuplan.limits), times finite Unix seconds; a bad count or time is dropped, not the run's display.
    """
    if not _count(record.get("step")):
        return None
    clean = dict(record)
    for key in _COUNTS[1:]:
        if key in clean and not _count(clean[key]):
            del clean[key]
    if "time" in clean and not within("metric_time", _number(clean["time"])):
        del clean["time"]
    if "loss" in clean:
        loss = _number(clean["loss"])
        clean["loss"] = loss if loss is not None and math.isfinite(loss) else None
    return clean


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _count(value: Any) -> bool:
    number = _number(value)
    return number is not None and within("metric_count", number) and float(number).is_integer()


def read_records(path: Path) -> tuple[dict[str, Any] | None, list[dict[str, Any]], int]:
    """(first record, the last records, a count) without reading a huge file whole: the head line and the tail."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None, [], 0
    from gpuplan.readfile import FileRefused, open_regular

    try:
        fh = open_regular(path, "the metrics file")
    except (FileNotFoundError, FileRefused):
        return None, [], 0  # a FIFO the job put there is no metrics (and must not hang the watch loop)
    with fh:
        head = _parse([fh.readline(TAIL_BYTES).decode(errors="replace")])  # a line of 600 MB: only its start
        if size > TAIL_BYTES:
            fh.seek(size - TAIL_BYTES)
            fh.readline()  # drop the partial line
        else:
            fh.seek(0)
        tail = _parse(fh.read().decode(errors="replace").splitlines())
    count = len(tail) + (1 if size > TAIL_BYTES else 0)  # a lower bound for big files
    return (head[0] if head else (tail[0] if tail else None)), tail, count


def measure(path: str | os.PathLike[str] | None, total_tokens: int | None = None) -> Progress | None:
    """Progress from a metrics file, or None when there is none yet."""
    if path is None:
        return None
    first, tail, count = read_records(Path(path))
    if not tail or first is None:
        return None
    last = tail[-1]
    with_tokens = [r for r in ([first, *tail]) if r.get("tokens") is not None and r.get("time") is not None]
    rate = None
    if len(with_tokens) >= 2:
        a, b = with_tokens[0], with_tokens[-1]
        seconds = float(b["time"]) - float(a["time"])
        if seconds > 0 and int(b["tokens"]) > int(a["tokens"]):
            rate = (int(b["tokens"]) - int(a["tokens"])) / seconds
    tokens = int(last["tokens"]) if last.get("tokens") is not None else None
    fraction = None
    eta = None
    total_steps = last.get("total_steps")
    if total_tokens and tokens is not None:
        fraction = min(tokens / total_tokens, 1.0)
        if rate:
            eta = max(total_tokens - tokens, 0) / rate
    elif total_steps and last.get("step") is not None:
        fraction = min(int(last["step"]) / int(total_steps), 1.0)
        steps_rate = _steps_rate(with_tokens or [first, last])
        if steps_rate:
            eta = max(int(total_steps) - int(last["step"]), 0) / steps_rate
    loss = last.get("loss")
    if eta is not None and not eta <= MAX_ETA_SECONDS:
        eta = None
    return Progress(records=count, step=int(last["step"]), tokens=tokens,
                    loss=float(loss) if isinstance(loss, (int, float)) else None,
                    last_time=float(last["time"]) if last.get("time") is not None else None,
                    tokens_per_s=rate, fraction=fraction, eta_seconds=eta)


def _steps_rate(records: list[dict[str, Any]]) -> float | None:
    timed = [r for r in records if r.get("time") is not None]
    if len(timed) < 2:
        return None
    a, b = timed[0], timed[-1]
    seconds = float(b["time"]) - float(a["time"])
    return (int(b["step"]) - int(a["step"])) / seconds if seconds > 0 and b["step"] > a["step"] else None


SERIES_BYTES = 4 * 1024 * 1024  # the curves of a run read at most its last 4 MiB of metrics (~50k records)


@dataclass(frozen=True)
class MetricPoint:
    """One point of a run's curves: its step, seconds since the first record, loss, and the tokens/s measured
    since the previous record that carried tokens (the same tokens-over-time rule as `measure`)."""

    step: int
    seconds: float | None
    loss: float | None
    tokens_per_s: float | None


def series(path: str | os.PathLike[str] | None, max_points: int = 400) -> list[MetricPoint]:
    """The loss and throughput curves of a metrics file, thinned to at most `max_points` evenly spaced records
    (the last one always kept). Lines are sanitised as `measure` does; a huge file is read from its tail."""
    if path is None:
        return []
    try:
        size = Path(path).stat().st_size
    except FileNotFoundError:
        return []
    with open(path, "rb") as fh:
        if size > SERIES_BYTES:
            fh.seek(size - SERIES_BYTES)
            fh.readline()  # drop the partial line
        records = _parse(fh.read().decode(errors="replace").splitlines())
    t0 = next((float(r["time"]) for r in records if r.get("time") is not None), None)
    points: list[MetricPoint] = []
    previous: dict[str, Any] | None = None
    for record in records:
        rate = None
        timed = record.get("time") is not None and record.get("tokens") is not None
        if timed and previous is not None:
            seconds = float(record["time"]) - float(previous["time"])
            if seconds > 0 and int(record["tokens"]) > int(previous["tokens"]):
                rate = (int(record["tokens"]) - int(previous["tokens"])) / seconds
        # A record that did not advance the tokens (a checkpoint's note) has no rate of its own; the next one is
        # measured from the last that did, so the time the checkpoint took still counts.
        if timed and (previous is None or int(record["tokens"]) > int(previous["tokens"])):
            previous = record
        loss = record.get("loss")
        points.append(MetricPoint(step=int(record["step"]),
                                  seconds=None if t0 is None or record.get("time") is None
                                  else float(record["time"]) - t0,
                                  loss=float(loss) if isinstance(loss, (int, float)) else None,
                                  tokens_per_s=rate))
    if len(points) <= max_points:
        return points
    stride = len(points) / max_points
    return [points[int(i * stride)] for i in range(max_points - 1)] + [points[-1]]
