"""The start-up allowance learned from finished runs (gpuplan.calibration.startup) and the CPU bench that stands in for
a CPU job's throughput on this machine (gpuplan.calibration.localbench), against a real store on SQLite and
PostgreSQL."""

from __future__ import annotations

import datetime as dt
import json
import socket

import pytest

from gpuplan.calibration.localbench import cpu_throughput
from gpuplan.calibration.startup import HISTORY_RUNS, provider_default, startup_allowance
from gpuplan.estimating.architecture import preset
from gpuplan.store.db import Store
from gpuplan.store.models import Benchmark, Run

UTC = dt.timezone.utc
T0 = dt.datetime(2026, 11, 1, 12, tzinfo=UTC)


def add_run(s: object, run_id: str, *, provider: str = "local", state: str = "succeeded", wall: float = 60.0,
            tokens: int | None = 50_000, rate: float | None = 1000.0, minutes: int = 0,
            total_tokens: int | None = None) -> None:
    """A finished run whose overhead is wall - tokens / rate seconds, ending `minutes` after T0."""
    end = T0 + dt.timedelta(minutes=minutes)
    s.add(Run(id=run_id, name=run_id, provider=provider, state=state, spec_text="", spec_hash="",  # type: ignore[attr-defined]
              started_at=end - dt.timedelta(seconds=wall), ended_at=end, tokens_done=tokens,
              total_tokens=total_tokens, tokens_per_s=rate))


def test_allowance_is_the_median_overhead_of_the_providers_recent_succeeded_runs(db_url: str) -> None:
    store = Store.open(db_url)
    with store.session() as s:
        add_run(s, "r-a", wall=58, minutes=1)   # 58 - 50 = 8 s
        add_run(s, "r-b", wall=53, minutes=2)   # 3 s
        add_run(s, "r-c", wall=100, tokens=None, total_tokens=90_000, minutes=3)  # no tokens_done: total, 10 s
        add_run(s, "r-d", wall=45, minutes=4)   # faster than its measured rate: 0 s, never negative
        # None of these may count: another provider, not succeeded, no measured rate, not ended.
        add_run(s, "r-aws", provider="aws", wall=500, minutes=5)
        add_run(s, "r-failed", state="failed", wall=900, minutes=6)
        add_run(s, "r-norate", wall=900, rate=None, minutes=7)
        s.add(Run(id="r-live", name="live", provider="local", state="running", spec_text="", spec_hash="",
                  started_at=T0, tokens_done=10, tokens_per_s=1.0))
    allowance = startup_allowance("local", db_url)
    assert allowance.source == "measured"
    assert allowance.seconds == pytest.approx((3 + 8) / 2)  # median of 0, 3, 8, 10
    assert set(allowance.run_ids) == {"r-a", "r-b", "r-c", "r-d"}
    aws = startup_allowance("aws", db_url)
    assert (aws.source, aws.seconds, aws.run_ids) == ("measured", pytest.approx(450.0), ("r-aws",))


def test_only_the_last_runs_count_and_no_history_means_the_documented_default(db_url: str) -> None:
    store = Store.open(db_url)
    assert startup_allowance("gcp", db_url).seconds == provider_default("gcp").seconds  # an empty store
    with store.session() as s:
        add_run(s, "r-old", wall=1050, minutes=0)  # 1000 s overhead, but older than the last HISTORY_RUNS
        for i in range(HISTORY_RUNS):
            add_run(s, f"r-{i:02d}", wall=52, minutes=10 + i)  # 2 s each
    allowance = startup_allowance("local", db_url)
    assert allowance.seconds == pytest.approx(2.0) and "r-old" not in allowance.run_ids
    assert len(allowance.run_ids) == HISTORY_RUNS and allowance.run_ids[0] == f"r-{HISTORY_RUNS - 1:02d}"
    gcp = startup_allowance("gcp", db_url)
    assert gcp.source == "default" and gcp.seconds == provider_default("gcp").seconds and "GCE boot" in gcp.detail
    assert startup_allowance("local", None).source == "default"  # no store to learn from


def add_bench(s: object, *, host: str, micro_batch: int = 4, precision: str = "fp32", seq_len: int = 32,
              tps: float = 1000.0, layers: int = 2, gpu: str | None = None, when: int = 0) -> int:
    arch = preset("gpt-tiny")
    row = Benchmark(host=host, device="cuda:0" if gpu else "cpu", gpu=gpu, model_name="gpt-tiny",
                    model_signature=arch.signature(), params=arch.param_count(), layers=layers, precision=precision,
                    seq_len=seq_len, micro_batch=micro_batch, steps=10, tokens_per_s=tps,
                    created_at=T0 + dt.timedelta(minutes=when), config_json=json.dumps({"full_layers": 2}))
    s.add(row)  # type: ignore[attr-defined]
    s.flush()  # type: ignore[attr-defined]
    return int(row.id)


def test_a_cpu_job_uses_a_cpu_bench_of_its_model_on_this_host(db_url: str) -> None:
    store = Store.open(db_url)
    here = socket.gethostname()
    signature = preset("gpt-tiny").signature()
    with store.session() as s:
        add_bench(s, host="elsewhere", tps=99_999.0, when=9)           # another machine
        add_bench(s, host=here, precision="bf16", tps=88_888.0, when=9)  # another precision
        add_bench(s, host=here, seq_len=64, tps=77_777.0, when=9)        # another sequence length
        add_bench(s, host=here, layers=1, tps=66_666.0, when=9)          # a 1-of-2-layer proxy
        add_bench(s, host=here, gpu="H100", tps=55_555.0, when=9)        # a GPU bench
        other_batch = add_bench(s, host=here, micro_batch=16, tps=3000.0, when=5)
        same_batch = add_bench(s, host=here, micro_batch=4, tps=1200.0, when=1)
    found = cpu_throughput(db_url, signature=signature, precision="fp32", seq_len=32, micro_batch=4)
    assert found is not None and found.source == "bench"
    assert (found.tokens_per_s_per_gpu, found.ref["bench_id"], found.ref["transferred"]) == (1200.0, same_batch, False)
    closest = cpu_throughput(db_url, signature=signature, precision="fp32", seq_len=32, micro_batch=12)
    assert closest is not None and closest.ref["bench_id"] == other_batch and closest.ref["transferred"] is True
    assert "micro-batch 16" in closest.detail
    assert cpu_throughput(db_url, signature=signature, precision="fp32", seq_len=128, micro_batch=4) is None
    assert cpu_throughput(db_url, signature="h1-l1", precision="fp32", seq_len=32, micro_batch=4) is None


def test_a_scheduled_launch_is_estimated_from_the_store_like_a_launch(tmp_path: object) -> None:
    """The scheduler's launcher plans with the store: the CPU bench and the measured start-up, not the defaults."""
    import os
    from pathlib import Path

    from gpuplan.scheduling.fire import make_launcher
    from gpuplan.scheduling.scheduler import FireRequest, Gates
    from gpuplan.store.models import Schedule
    from gpuplan.supervise.watch import watch_run

    store = Store.open(os.environ["GPUPLAN_DB"])
    spec_text = ("name: nightly\nruntime: process\ncommand: 'true'\n"
                 "workload: {model: gpt-tiny, tokens: 6400, seq_len: 32, micro_batch: 4, precision: fp32}\n")
    with store.session() as s:
        add_run(s, "r-before", wall=57)  # 7 s of start-up on this machine
        bench_id = add_bench(s, host=socket.gethostname(), tps=3200.0)
        schedule = Schedule(name="nightly", cron="0 3 * * *", spec_text=spec_text, spec_hash="x")
        s.add(schedule)
        s.flush()
        schedule_id = schedule.id
    launcher = make_launcher(store, spec_dir=str(Path(str(tmp_path))))
    run_id = launcher(FireRequest(schedule_id=schedule_id, schedule_name="nightly", spec_text=spec_text,
                                  fire_at=T0, now=dt.datetime.now(UTC), gates=Gates()))
    with store.session() as s:
        run = s.get(Run, run_id)
        assert run is not None
        basis = json.loads(run.estimate_json or "{}")
        assert basis["mfu_source"] == "bench" and basis["mfu_ref"]["bench_id"] == bench_id
        assert basis["startup_source"] == "measured" and basis["startup_runs"] == ["r-before"]
        assert run.est_hours == pytest.approx((7.0 + 6400 / 3200.0) / 3600)
    watch_run(store, run_id)  # settle the `true` job's books
