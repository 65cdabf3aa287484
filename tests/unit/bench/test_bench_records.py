"""Bench records and the lookup `estimate` uses: exact matches, transfers to another GPU, proxies (SQLite and
PostgreSQL); calibration from hand-made finished runs; `gpuplan calibrate --show`."""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import replace

import pytest

from gpuplan.bench.records import best_bench, candidate_from_row, save_result
from gpuplan.calibration.run_mfu import (
    calibration_table,
    learn_from_finished_runs,
    params_bucket,
    record_run,
    run_mfu,
)
from gpuplan.estimating.architecture import PRESETS
from gpuplan.estimating.flops import training_flops_per_token
from gpuplan.estimating.shape import shape_of
from gpuplan.store.db import Store
from gpuplan.store.models import Benchmark, Calibration, Run, RunState

from support.clihelp import run_cli

GPT2 = PRESETS["gpt2"]


def _result(**overrides: object):
    """A finished bench as the runner reports it (hand-made: this machine has no GPU)."""
    from gpuplan.bench.result import BenchResult

    base = dict(
        model_name="gpt2", model_kind="preset", model_signature=GPT2.signature(), params=GPT2.param_count(),
        layers=12, full_layers=12, device="cuda:0", device_name="NVIDIA H100 80GB HBM3", gpu="H100", host="h",
        precision="bf16", seq_len=1024, micro_batch=8, steps=20, warmup=5, compiled=False,
        tokens_per_s=400_000.0, samples_per_s=390.6, step_time_p50_s=0.02, step_time_p90_s=0.021,
        step_time_mean_s=0.0205, flops_per_step=10**13, hardware_flops_per_step=10**13,
        attention_flops_per_step=10**12, attention_flops_source="counted", achieved_tflops=400.0,
        peak_tflops=989.5, peak_tflops_source="gpu_table", mfu=0.404, peak_memory_gb=30.0,
        peak_memory_kind="cuda_max_allocated", final_loss=10.8, torch_version="2.13.0",
    )
    base.update(overrides)
    return BenchResult(**base)  # type: ignore[arg-type]


@pytest.fixture
def store(db_url: str):
    opened = Store.open(db_url)
    yield opened
    opened.close()


def _candidate(bench_id: int, **kw: object):
    row = dict(id=bench_id, gpu="H100", precision="bf16", seq_len=1024, layers=12, mfu=0.4, tokens_per_s=1e5,
               created_at=f"2026-01-0{bench_id} 00:00:00", config_json=json.dumps({"full_layers": 12}))
    row.update(kw)
    return candidate_from_row(tuple(row.values()))


def test_ranking_rules() -> None:
    full, proxy = _candidate(1), _candidate(2, layers=2, mfu=0.3)
    match = best_bench([full, proxy], gpu="H100", precision="bf16", seq_len=1024)
    assert match is not None and match.bench_id == 1  # the full model beats a newer proxy
    only_proxy = best_bench([proxy], gpu="H100", precision="bf16", seq_len=1024)
    assert only_proxy is not None and only_proxy.proxy_layers == 2 and "2-of-12-layer proxy" in only_proxy.note
    other_precision = best_bench([_candidate(3, precision="fp16")], gpu="H100", precision="bf16", seq_len=1024)
    assert other_precision is not None and other_precision.transferred and "fp16" in other_precision.note
    newest = best_bench([_candidate(1), _candidate(4, mfu=0.42)], gpu="H100", precision="bf16", seq_len=1024)
    assert newest is not None and newest.bench_id == 4
    # No MFU (a GPU the table has no peak for): usable only as an exact match, through its tokens/s.
    no_mfu = _candidate(5, gpu="A10G", mfu=None)
    assert best_bench([no_mfu], gpu="H100", precision="bf16", seq_len=1024) is None
    exact = best_bench([no_mfu], gpu="A10G", precision="bf16", seq_len=1024)
    assert exact is not None and exact.mfu is None and exact.tokens_per_s == 1e5


def _run(**overrides: object) -> Run:
    now = dt.datetime.now(dt.timezone.utc)
    base = dict(name="train", provider="aws", spec_text="name: train\n", spec_hash="0" * 64,
                state=RunState.SUCCEEDED, gpu="H100", gpus_per_node=8, nodes=1, params=7_000_000_000,
                created_at=now, ended_at=now)
    base.update(overrides)
    return Run(**base)


def test_calibration_from_hand_made_finished_runs(store: Store) -> None:
    with store.session() as s:
        first = _run(measured_mfu=0.40)
        # 8 x H100 at 989.5 TFLOP/s bf16 with the estimator's FLOPs per token (6N + attention at seq 4096):
        # 0.5 MFU is this many tokens/s in total.
        llama = PRESETS["llama-2-7b"]
        fpt = training_flops_per_token(shape_of(llama.param_count(), llama), 4096, recompute=False, lora=False)
        tokens_per_s = 0.5 * 989.5e12 * 8 / fpt.model
        second = _run(tokens_per_s=tokens_per_s, params=llama.param_count(),
                      spec_text="name: t\nworkload:\n  model: llama-2-7b\n  seq_len: 4096\n  precision: bf16\n")
        failed = _run(state=RunState.FAILED, measured_mfu=0.9)
        live = _run(state=RunState.RUNNING, measured_mfu=0.9)
        small = _run(params=125_000_000, measured_mfu=0.3)
        no_gpu = _run(gpu=None, measured_mfu=0.3)
        s.add_all([first, second, failed, live, small, no_gpu])
        s.flush()
        assert run_mfu(second) is not None and run_mfu(second).mfu == pytest.approx(0.5)
        row1 = record_run(s, first)
        row2 = record_run(s, second)
        assert row1 is not None and row2 is not None
        assert (row2.gpu, row2.params_bucket, row2.samples) == ("H100", "2B-10B", 2)
        assert row2.mfu == pytest.approx(0.45)  # the mean of 0.40 and 0.50
        assert record_run(s, second) is None  # learned from once only
        assert record_run(s, failed) is None and record_run(s, live) is None and record_run(s, no_gpu) is None

    with store.session() as s:
        # The small run was never recorded by hand: `calibrate --update` style learning picks it up.
        assert [c.run_id for c in learn_from_finished_runs(s)] == [small.id]
        table = calibration_table(s)
    assert [(t["gpu"], t["params_bucket"], t["samples"]) for t in table] == [("H100", "<500M", 1),
                                                                             ("H100", "2B-10B", 2)]
    history = table[1]["history"]
    assert [h["run_mfu"] for h in history] == [pytest.approx(0.40), pytest.approx(0.50)]
    assert [h["run_id"] for h in history] == [first.id, second.id]


def test_implausible_mfu_is_not_learned(store: Store) -> None:
    with store.session() as s:
        tiny = _run(tokens_per_s=10.0)  # a CPU-speed job labelled H100: MFU ~1e-9, a broken measurement
        s.add(tiny)
        s.flush()
        assert record_run(s, tiny) is None


def test_settling_an_ended_run_teaches_calibration_and_closing_its_books_does_not(store: Store) -> None:
    from gpuplan.runs.events import EventKind
    from gpuplan.runs.records import set_state
    from gpuplan.supervise.settle import settle

    with store.session() as s:
        run = _run(state=RunState.RUNNING, measured_mfu=0.38)
        s.add(run)
        s.flush()
        assert settle(s, run) is None  # still running: nothing to learn yet
        assert set_state(s, run, RunState.SUCCEEDED, "exit 0", exit_code=0)
        assert s.query(Calibration).all() == []  # the state change alone teaches nothing
        learned = settle(s, run)
        assert learned is not None and settle(s, run) is None  # once per run
    with store.session() as s:
        rows = s.query(Calibration).all()
        assert [(r.run_id, r.mfu) for r in rows] == [(run.id, pytest.approx(0.38))]
        kinds = [e.kind for e in s.get(Run, run.id).events]
        assert kinds == [EventKind.STATE, EventKind.CALIBRATED]


def test_calibrate_show_cli() -> None:
    empty = run_cli("calibrate", "--show", "--json")
    assert empty.exit_code == 0 and empty.json() == {"learned_now": [], "calibrations": []}
    with Store.open().session() as s:
        run = _run(measured_mfu=0.41)
        s.add(run)
    updated = run_cli("calibrate", "--update", "--json")
    assert updated.exit_code == 0
    out = updated.json()
    assert out["learned_now"] == [run.id]
    assert out["calibrations"][0]["gpu"] == "H100" and out["calibrations"][0]["run_ids"] == [run.id]
    assert out["calibrations"][0]["mfu"] == pytest.approx(0.41)
    human = run_cli("calibrate")
    assert "H100" in human.stdout and run.id in human.stdout and "41.0%" in human.stdout


def test_params_buckets() -> None:
    assert [params_bucket(p) for p in (124e6, 1.3e9, 7e9, 13e9, 70e9, 175e9)] == [
        "<500M", "500M-2B", "2B-10B", "10B-30B", "30B-100B", ">=100B"]


def test_bench_list_json_keys(store: Store) -> None:
    with store.session() as s:
        save_result(s, replace(_result(), layers=2))
    listed = run_cli("--db", store.url, "bench", "list", "--json")
    assert listed.exit_code == 0
    record = listed.json()["benchmarks"][0]
    assert list(record) == ["id", "created_at", "host", "device", "device_name", "gpu", "model", "model_signature",
                            "params", "layers", "full_layers", "precision", "seq_len", "micro_batch", "steps",
                            "compiled", "tokens_per_s", "samples_per_s", "step_time_p50_s", "step_time_p90_s",
                            "achieved_tflops", "peak_tflops", "mfu", "peak_memory_gb", "torch_version", "run_id",
                            "source"]
    assert record["gpu"] == "H100" and record["layers"] == 2 and record["full_layers"] == 12
    assert Benchmark.__tablename__ == "benchmarks"
