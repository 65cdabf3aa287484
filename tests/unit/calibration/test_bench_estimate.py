"""`gpuplan estimate` uses what bench and calibration recorded: mfu_source "bench" (with the bench id, exact or
transferred to another GPU's peak) or "calibrated", on SQLite and PostgreSQL."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuplan.bench.records import save_result
from gpuplan.bench.result import BenchResult
from gpuplan.calibration.run_mfu import record_run
from gpuplan.estimating.architecture import PRESETS
from gpuplan.store.db import Store
from gpuplan.store.models import Run, RunState

from support.clihelp import run_cli

GPT2 = PRESETS["gpt2"]


def _h100_bench(**overrides: object) -> BenchResult:
    """What `gpuplan bench --model gpt2 --seq-len 1024` reports on an H100 (hand-made: no GPU here)."""
    base = dict(
        model_name="gpt2", model_kind="preset", model_signature=GPT2.signature(), params=GPT2.param_count(),
        layers=12, full_layers=12, device="cuda:0", device_name="NVIDIA H100 80GB HBM3", gpu="H100", host="h",
        precision="bf16", seq_len=1024, micro_batch=16, steps=50, warmup=5, compiled=False,
        tokens_per_s=310_000.0, samples_per_s=302.7, step_time_p50_s=0.053, step_time_p90_s=0.054,
        step_time_mean_s=0.053, flops_per_step=1, hardware_flops_per_step=1, attention_flops_per_step=1,
        attention_flops_source="counted", achieved_tflops=247.0, peak_tflops=989.5,
        peak_tflops_source="gpu_table", mfu=0.25, peak_memory_gb=40.0, peak_memory_kind="cuda_max_allocated",
        final_loss=10.9, torch_version="2.13.0",
    )
    base.update(overrides)
    return BenchResult(**base)  # type: ignore[arg-type]


def _estimate(url: str, gpu: str, *extra: str) -> dict:
    result = run_cli("--db", url, "estimate", "--model", "gpt2", "--tokens", "10B", "--gpu", gpu, "--gpus", "1",
                     "--seq-len", "1024", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_estimate_uses_the_matching_bench_and_transfers_it(db_url: str) -> None:
    store = Store.open(db_url)
    with store.session() as s:
        bench_id = save_result(s, _h100_bench()).id
    store.close()

    same = _estimate(db_url, "H100")
    assert same["mfu_source"] == "bench"
    assert same["mfu_ref"]["bench_id"] == bench_id and same["mfu_ref"]["transferred"] is False
    assert same["tokens_per_s_per_gpu"] == pytest.approx(310_000.0)
    assert f"bench #{bench_id}" in same["mfu_detail"]

    other = _estimate(db_url, "A100-80GB")
    assert other["mfu_source"] == "bench" and other["mfu_ref"]["transferred"] is True
    assert other["mfu"] == pytest.approx(0.25)  # the H100's measured MFU on the A100's peak
    assert "transferred to A100-80GB's peak" in other["mfu_detail"]

    assert _estimate(db_url, "H100", "--mfu", "0.5")["mfu_source"] == "user"
    assert _estimate(db_url, "H100", "--seq-len", "2048")["mfu_ref"]["transferred"] is True


def test_a_proxy_bench_gives_its_mfu_not_its_tokens_per_s(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    store = Store.open(url)
    with store.session() as s:
        save_result(s, _h100_bench(layers=2, tokens_per_s=2_000_000.0, mfu=0.3))
    store.close()
    data = _estimate(url, "H100")
    assert data["mfu_source"] == "bench" and data["mfu"] == pytest.approx(0.3)
    assert data["mfu_ref"]["proxy_layers"] == 2 and "2-of-12-layer proxy" in data["mfu_detail"]


def test_estimate_uses_calibration_from_a_finished_run(db_url: str) -> None:
    store = Store.open(db_url)
    now = dt.datetime.now(dt.timezone.utc)
    with store.session() as s:
        run = Run(name="gpt2-run", provider="aws", spec_text="name: x\n", spec_hash="0" * 64,
                  state=RunState.SUCCEEDED, gpu="A100-80GB", gpus_per_node=8, nodes=1,
                  params=GPT2.param_count(), measured_mfu=0.37, created_at=now, ended_at=now)
        s.add(run)
        s.flush()
        assert record_run(s, run) is not None
        run_id = run.id
    store.close()
    data = _estimate(db_url, "A100-80GB")
    assert data["mfu_source"] == "calibrated" and data["mfu"] == pytest.approx(0.37)
    assert data["mfu_ref"]["run_ids"] == [run_id]
    assert _estimate(db_url, "H100")["mfu_source"] == "model"  # learned for the A100 only


@pytest.mark.slow
def test_a_real_cpu_bench_is_stored_but_never_stands_in_for_a_gpu(tmp_path) -> None:
    pytest.importorskip("torch")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    bench = run_cli("--db", url, "bench", "--model", "gpt2", "--layers", "1", "--steps", "2", "--warmup", "0",
                    "--micro-batch", "1", "--seq-len", "32", "--peak-tflops", "1", "--json")
    assert bench.exit_code == 0, bench.stderr
    assert bench.json()["mfu"] > 0
    assert _estimate(url, "H100", "--seq-len", "32")["mfu_source"] == "model"


def test_calibrated_mfu_round_trips_to_the_runs_throughput(tmp_path) -> None:
    """A run measured at X tokens/s on 8 GPUs: estimate on 1 such GPU then predicts X/8 tokens/s."""
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = Store.open(url)
    now = dt.datetime.now(dt.timezone.utc)
    with store.session() as s:
        run = Run(name="gpt2-run", provider="aws", state=RunState.STOPPED, gpu="A100-80GB", gpus_per_node=8,
                  nodes=1, params=GPT2.param_count(), tokens_per_s=8 * 120_000.0, created_at=now, ended_at=now,
                  spec_text="name: x\nworkload:\n  model: gpt2\n  seq_len: 1024\n  precision: bf16\n",
                  spec_hash="0" * 64)
        s.add(run)
        s.flush()
        assert record_run(s, run) is not None
    store.close()
    data = _estimate(url, "A100-80GB")
    assert data["mfu_source"] == "calibrated"
    assert data["tokens_per_s_per_gpu"] == pytest.approx(120_000.0, rel=1e-6)
