"""The curves of a run (gpuplan.supervise.progress.series): loss and tokens/s per record, as the dashboard draws
them."""

from __future__ import annotations

import json
from pathlib import Path

from gpuplan.supervise.progress import series


def _write(path: Path, records: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_throughput_is_tokens_over_time_between_records_and_a_checkpoint_note_is_no_zero(tmp_path: Path) -> None:
    path = _write(tmp_path / "metrics.jsonl", [
        {"time": 100.0, "step": 1, "tokens": 1000, "loss": 4.0},
        {"time": 102.0, "step": 2, "tokens": 3000, "loss": 3.0},
        {"time": 103.0, "step": 2, "tokens": 3000, "checkpoint": "saved"},  # no tokens trained: no rate
        {"time": 106.0, "step": 3, "tokens": 7000, "loss": 2.0},  # measured from step 2's record: 4000 / 4 s
        "{not json",
        {"time": 107.0, "step": 4, "tokens": 9000, "loss": float("nan")},
    ])
    points = series(path)
    assert [p.step for p in points] == [1, 2, 2, 3, 4]
    assert [p.tokens_per_s for p in points] == [None, 1000.0, None, 1000.0, 2000.0]
    assert [p.loss for p in points] == [4.0, 3.0, None, 2.0, None]
    assert [p.seconds for p in points] == [0.0, 2.0, 3.0, 6.0, 7.0]


def test_a_long_file_is_thinned_keeping_the_last_record(tmp_path: Path) -> None:
    path = _write(tmp_path / "metrics.jsonl", [{"time": float(i), "step": i, "tokens": i * 10} for i in range(1000)])
    points = series(path, max_points=100)
    assert len(points) == 100
    assert points[0].step == 0 and points[-1].step == 999
    assert [p.step for p in points] == sorted(p.step for p in points)


def test_no_file_no_points(tmp_path: Path) -> None:
    assert series(tmp_path / "absent.jsonl") == []
    assert series(None) == []
