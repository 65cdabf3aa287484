"""bench -> launch -> estimate vs actual on this machine, through the real CLI in child processes.

A CPU job whose spec names its model but no throughput must be estimated from the CPU bench of that model here
(mfu_source "bench"), plus the local start-up allowance: the documented default on the first run, then what the
first run measured. A timing *target* lives in bench/measured_accuracy.py; here only a generous bound.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.calibration.startup import provider_default

from support.clihelp import run_cli, run_subprocess

ROOT = Path(__file__).resolve().parents[2]
SEQ, BATCH = 32, 4


def job_spec(tmp_path: Path, steps: int) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(
        "name: measured-tiny\nruntime: process\n"
        f"command: python {ROOT / 'examples' / 'train_gpt.py'} --model gpt-tiny --steps {steps} --batch {BATCH} "
        f"--seq-len {SEQ} --log-every 5\n"
        "env: {OMP_NUM_THREADS: 1}\n"
        f"workload: {{model: gpt-tiny, tokens: {steps * BATCH * SEQ}, seq_len: {SEQ}, micro_batch: {BATCH}, "
        "precision: fp32}\n"
        "limits: {max_hours: 0.05}\n")
    return path


def test_launch_after_a_bench_is_estimated_from_it_plus_start_up(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the bench and the job on the same number of threads
    bench = run_subprocess("bench", "--model", "gpt-tiny", "--seq-len", str(SEQ), "--micro-batch", str(BATCH),
                           "--steps", "40", "--warmup", "3", "--json", timeout=180)
    assert bench.exit_code == 0, bench.stderr
    bench_tps = bench.json()["tokens_per_s"]
    steps = max(40, round(6 * bench_tps / (BATCH * SEQ)))  # ~6 s of training at the benched speed
    spec = job_spec(tmp_path, steps)
    tokens = steps * BATCH * SEQ

    dry = run_cli("launch", str(spec), "--dry-run", "--json").json()
    assert dry["mfu_source"] == "bench" and dry["est_tokens_per_s"] == pytest.approx(bench_tps)
    assert dry["startup_source"] == "default" and dry["startup_s"] == provider_default("local").seconds

    first = run_subprocess("launch", str(spec), "-y", "--json", "--interval", "0.3", timeout=300)
    assert first.exit_code == 0, first.stderr
    one = first.json()
    assert one["state"] == "succeeded" and one["tokens_done"] == tokens and one["tokens_per_s"] > 0
    assert one["mfu_source"] == "bench" and one["estimate_source"].startswith("measured: bench #")
    assert one["est_hours"] * 3600 == pytest.approx(provider_default("local").seconds + tokens / bench_tps, rel=1e-6)
    assert "start-up" in first.stderr  # the human estimate line says what it includes

    # The second launch learns its start-up from the first run: its wall time beyond its measured speed.
    second = run_subprocess("launch", str(spec), "-y", "--json", "--interval", "0.3", timeout=300)
    assert second.exit_code == 0, second.stderr
    two = second.json()
    learned = one["elapsed_hours"] * 3600 - tokens / one["tokens_per_s"]
    assert two["startup_source"] == "measured"
    assert two["startup_s"] == pytest.approx(max(learned, 0.0), abs=0.01)
    assert two["est_hours"] * 3600 == pytest.approx(two["startup_s"] + tokens / bench_tps, abs=0.002)  # 1 ms rounding

    accuracy = run_cli("report", "--accuracy", "--json").json()
    row = next(r for r in accuracy["runs"] if r["run_id"] == two["run_id"])
    assert row["est_hours"] == pytest.approx(two["est_hours"])
    # Generous: a shared 2-core machine can swing throughput by tens of percent between bench and run.
    assert abs(row["hours_error"]) < 0.6, row
