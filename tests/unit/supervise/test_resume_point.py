"""What a relaunch resumes from and what it lost, from the job's metrics; the planner's use of the measured loss."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.planning.planner import SpotModel
from gpuplan.supervise.resume import resume_point


def write(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + "not json\n")
    return path


def test_the_last_marked_checkpoint_and_the_work_after_it(tmp_path: Path) -> None:
    metrics = write(tmp_path / "m.jsonl", [
        {"time": 1000.0, "step": 10, "loss": 5.0},
        {"time": 1010.0, "step": 20, "loss": 4.0, "checkpoint": True},
        {"time": 1020.0, "step": 30, "loss": 3.5},
        {"time": 1040.0, "step": 50, "loss": 3.0, "checkpoint": True},
        {"time": 1100.0, "step": 80, "loss": 2.5},
    ])
    point = resume_point(metrics)
    assert point is not None
    assert (point.resumed_from_step, point.lost_steps, point.lost_seconds) == (50, 30, 60.0)
    assert point.checkpoint_at == "1970-01-01T00:17:20+00:00"


def test_no_marked_checkpoint_no_resume_point(tmp_path: Path) -> None:
    assert resume_point(write(tmp_path / "m.jsonl", [{"time": 1.0, "step": 1}])) is None
    assert resume_point(tmp_path / "missing.jsonl") is None


def test_the_spot_model_uses_the_measured_loss_where_there_is_one() -> None:
    guess = SpotModel(interruptions_per_hour={"aws": 0.1}, restart_hours=0.25, checkpoint_hours=1.0)
    measured = SpotModel(interruptions_per_hour={"aws": 0.1}, restart_hours=0.25, checkpoint_hours=1.0,
                         measured_loss_hours=0.0)
    assert guess.stretch("aws", 1) == pytest.approx(1 / (1 - 0.1 * 0.75))
    assert measured.stretch("aws", 1) == pytest.approx(1 / (1 - 0.1 * 0.25))
