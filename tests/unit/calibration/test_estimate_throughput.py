"""The throughput order: --throughput/--mfu > bench record > calibrated MFU > default prior, read from a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.calibration.throughput import (
    LookupKey,
    bench_lookup,
    calibration_lookup,
    params_bucket,
    resolve_throughput,
    sqlite_path,
)
from gpuplan.estimating.architecture import preset
from gpuplan.estimating.estimate import Throughput

from support.clihelp import run_cli

ARCH = preset("gpt2")


def _seed(url: str, *, bench: float | None = None, calibrated: float | None = None) -> None:
    from gpuplan.store.db import Store
    from gpuplan.store.models import Benchmark, Calibration

    store = Store.open(url)
    try:
        with store.session() as s:
            if bench is not None:
                s.add(Benchmark(device="cuda", gpu="A100-80GB", model_signature=ARCH.signature(), precision="bf16",
                                seq_len=1024, micro_batch=8, steps=20, tokens_per_s=bench))
                # An older, slower record of the same shape and a record of another shape must not win.
                s.add(Benchmark(device="cuda", gpu="A100-80GB", model_signature="other", precision="bf16",
                                seq_len=1024, micro_batch=8, steps=20, tokens_per_s=1.0))
            if calibrated is not None:
                s.add(Calibration(gpu="A100-80GB", params_bucket=params_bucket(ARCH.param_count()), mfu=calibrated,
                                  samples=3))
            s.commit()
    finally:
        store.close()


def _estimate(url: str, *extra: str) -> dict:
    result = run_cli("--db", url, "estimate", "--model", "gpt2", "--tokens", "10B", "--gpu", "A100-80GB",
                     "--seq-len", "1024", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_order_of_preference(db_url: str) -> None:
    assert _estimate(db_url)["mfu_source"] == "model"  # empty store (or none at all)
    _seed(db_url, calibrated=0.33)
    data = _estimate(db_url)
    assert data["mfu_source"] == "calibrated" and data["mfu"] == pytest.approx(0.33)
    _seed(db_url, bench=123_456.0)
    data = _estimate(db_url)
    assert data["mfu_source"] == "bench" and data["tokens_per_s_per_gpu"] == pytest.approx(123_456.0)
    data = _estimate(db_url, "--throughput", "1000")
    assert data["mfu_source"] == "user" and data["tokens_per_s_per_gpu"] == pytest.approx(1000)
    data = _estimate(db_url, "--mfu", "0.5")
    assert data["mfu_source"] == "user" and data["mfu"] == pytest.approx(0.5)


def test_bench_record_must_match_shape_precision_and_length(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    _seed(url, bench=50_000.0)
    lookup = bench_lookup(url)
    key = LookupKey(gpu="A100-80GB", params=ARCH.param_count(), precision="bf16", seq_len=1024, architecture=ARCH)
    found = lookup(key)
    assert found is not None and found.source == "bench" and found.tokens_per_s_per_gpu == 50_000.0
    assert lookup(LookupKey("A100-80GB", ARCH.param_count(), "fp16", 1024, ARCH)) is None
    assert lookup(LookupKey("A100-80GB", ARCH.param_count(), "bf16", 2048, ARCH)) is None
    assert lookup(LookupKey("H100", ARCH.param_count(), "bf16", 1024, ARCH)) is None
    assert lookup(LookupKey("A100-80GB", ARCH.param_count(), "bf16", 1024, None)) is None  # --params only


def test_missing_store_is_not_created(tmp_path: Path) -> None:
    """Estimating never creates or migrates a database: no file, no lookup, default prior."""
    url = f"sqlite:///{tmp_path / 'absent' / 'gpuplan.db'}"
    assert _estimate(url)["mfu_source"] == "model"
    assert not (tmp_path / "absent").exists()
    assert calibration_lookup(url)(LookupKey("A100-80GB", 10**8, "bf16", 1024, None)) is None


def test_resolve_throughput_rules() -> None:
    key = LookupKey("H100", 10**9, "bf16", 2048, None)
    calls: list[str] = []

    def first(_: LookupKey) -> Throughput | None:
        calls.append("first")
        return None

    def second(_: LookupKey) -> Throughput | None:
        calls.append("second")
        return Throughput(mfu=0.4, source="calibrated")

    assert resolve_throughput(tokens_per_s=None, mfu=None, key=key, lookups=[first, second]).source == "calibrated"
    assert calls == ["first", "second"]
    assert resolve_throughput(tokens_per_s=10.0, mfu=None, key=key, lookups=[second]).source == "user"
    assert resolve_throughput(tokens_per_s=None, mfu=None, key=key) is None
    with pytest.raises(ValueError, match="not both"):
        resolve_throughput(tokens_per_s=1.0, mfu=0.3, key=key)


def test_params_bucket_and_sqlite_path(tmp_path: Path) -> None:
    assert params_bucket(124e6) == "<500M" and params_bucket(7e9) == "2B-10B" and params_bucket(70e9) == "30B-100B"
    assert sqlite_path(f"sqlite:///{tmp_path}/x.db") == tmp_path / "x.db"
    assert sqlite_path("postgresql://u@h/db") is None
    assert sqlite_path("sqlite:///:memory:") is None


def test_inference_ignores_training_measurements(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'i.db'}"
    _seed(url, bench=99_999.0, calibrated=0.5)
    result = run_cli("--db", url, "estimate", "--model", "gpt2", "--mode", "inference", "--tokens", "1M",
                     "--gpu", "A100-80GB", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["mfu_source"] == "model"
