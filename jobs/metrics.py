"""Progress reports from inside a job: one JSON line per call appended to the file `$GPUPLAN_METRICS` names.

Stdlib only, so a training script can `from gpuplan.jobs.metrics import log_metrics` in any image (or copy this
file next to it). gpuplan reads the lines to derive measured throughput, progress, ETA and projected cost.
Each line: {"time": unix seconds, "step": int, "tokens": cumulative tokens, "loss": float, ...extra}.
Outside gpuplan (no GPUPLAN_METRICS) every call is a cheap no-op, so the same script runs anywhere.
"""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

ENV_VAR = "GPUPLAN_METRICS"


def metrics_path() -> str | None:
    """The file metrics go to, or None when not running under gpuplan."""
    return os.environ.get(ENV_VAR) or None


def log_metrics(step: int, tokens: int | None = None, loss: float | None = None, **extra: Any) -> None:
    """Append one record. `tokens` is the cumulative count of tokens trained so far (all ranks together).

    Only rank 0 writes in a multi-rank job (RANK unset or "0"), so N ranks do not each count the same tokens.
    One `write` of one line under O_APPEND keeps concurrent readers from seeing half a record.
    """
    path = metrics_path()
    if path is None or os.environ.get("RANK", "0") != "0":
        return
    record: dict[str, Any] = {"time": round(time.time(), 3), "step": int(step)}
    if tokens is not None:
        record["tokens"] = int(tokens)
    if loss is not None:
        record["loss"] = float(loss) if math.isfinite(float(loss)) else None
    record.update(extra)
    line = json.dumps(record, separators=(",", ":"), default=str) + "\n"
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = "\n" + line  # a previous writer died mid-line: never glue a record onto its remains
        os.write(fd, line.encode())
    finally:
        os.close(fd)
