"""Extreme but well-formed numbers (1e300, 1e30, 10**23) are refused by one table, gpuplan.limits.

Every flag and job-spec field that takes a number: out of range -> exit 2, one line naming the flag or field
and its range, no traceback; the values just inside the range still work. Also the metrics lines a job
writes: nonsense numbers there must not break the progress/ETA line.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpuplan.limits import LIMITS, check
from gpuplan.supervise.progress import measure

from support.clihelp import run_cli

EST = ("estimate", "--gpu", "H100")
WORK = ("--params", "1B", "--tokens", "1B")

# (command args before the flag, flag, a value past the limit, the value at the limit)
FLAGS = [
    ((*EST, "--tokens", "1B"), "--params", "1e300", "1e15"),
    ((*EST, "--params", "1B"), "--tokens", "1e30", "1e18"),
    ((*EST, "--params", "1B", "--epochs", "1", "--seq-len", "128"), "--samples", "99999999999999999999999", "1e15"),
    ((*EST, "--params", "1B", "--samples", "1000", "--seq-len", "128"), "--epochs", "1e300", "1000000"),
    (EST + WORK, "--seq-len", "99999999999999999999999", "100000000"),
    (EST + WORK, "--global-batch", "99999999999999999999999", "1000000000"),
    (EST + WORK, "--micro-batch", "99999999999999999999999", "1000000"),
    (EST + WORK, "--lora", "99999999999999999999999", "100000"),
    (EST + WORK, "--gpus", "1000000000000", "1000000"),
    (EST + WORK, "--nodes", "99999999999999999999999", "100000"),
    ((*EST, *WORK, "--gpus", "64"), "--gpus-per-node", "65", "64"),
    (EST + WORK, "--network-gbps", "1e300", "100000"),
    (EST + WORK, "--throughput", "1e30", "1e10"),
    (EST + WORK, "--mfu", "1.5", "1"),
    (("plan", *WORK), "--budget", "1e300", "9999999999"),
    (("plan", *WORK), "--max-price", "1e30", "1000000"),
    (("plan", *WORK), "--max-nodes", "99999999999999999999999", "100000"),
    (("plan", *WORK), "--deadline", "99999999999999999999999 days", "876600h"),
    (("plan", *WORK), "--checkpoint-interval", "99999999999999999999999", "876600"),
    (("plan", *WORK), "--interruption-rate", "10", "9.99"),
    (("prices",), "--max-price", "1e300", "1000000"),
    (("prices",), "--min-gpu-memory", "1e30", "100000"),
    (("prices",), "--limit", "99999999999999999999999", "1000000000"),
    (("runs",), "--limit", "99999999999999999999999", "1000000000"),
    (("bench", "list"), "--limit", "99999999999999999999999", "1000000000"),
    (("reconcile", "--cloud", "local"), "--grace", "99999999999999999999999d", "36525d"),
    (("watch", "--once"), "--interval", "1e300", "86400"),
]


def _ids(case: tuple) -> str:
    return f"{case[0][0]}{case[1]}"


@pytest.mark.parametrize("before,flag,too_big,at_limit", FLAGS, ids=[_ids(c) for c in FLAGS])
def test_flag_out_of_range_is_one_line_exit_2(before: tuple[str, ...], flag: str, too_big: str,
                                              at_limit: str) -> None:
    result = run_cli(*before, flag, too_big)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert flag in lines[0] and ("between" in lines[0] or "at most" in lines[0] or "less than" in lines[0])
    assert "Traceback" not in result.stderr and result.stdout == ""


def _json(*args: str) -> Any:
    result = run_cli(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return result.json()


def _same_as_without(out: Any, before: tuple[str, ...]) -> bool:
    """A filter at its limit filters nothing out: the answer is the one without the flag (and not empty)."""
    return bool(out) and out == _json(*before)


def _no_spot(out: Any, before: tuple[str, ...]) -> bool:
    """So many interruptions (or so much work lost to each) that a spot machine never pays: on-demand only."""
    return bool(out) and [row["spot"] for row in out] == [False] * len(out)


def _all_prices(out: Any, before: tuple[str, ...]) -> bool:
    """The limit is past the catalog's size: every row, more than the default page of 20."""
    return len(out) > 20 and out == _json(*before, "--limit", "0")


# What each command answers with the flag at its limit (the JSON it prints, and the command without the flag).
AT_LIMIT: dict[str, Callable[[Any, tuple[str, ...]], bool]] = {
    "estimate--params": lambda out, _: out["params"] == 10**15,
    "estimate--tokens": lambda out, _: out["tokens"] == 10**18,
    "estimate--samples": lambda out, _: out["tokens"] == 10**15 * 128,  # samples x seq-len x 1 epoch
    "estimate--epochs": lambda out, _: out["tokens"] == 1000 * 128 * 10**6,
    "estimate--seq-len": lambda out, _: out["seq_len"] == 10**8,
    "estimate--global-batch": lambda out, _: out["global_batch"] == 10**9,
    "estimate--micro-batch": lambda out, _: out["micro_batch"] == 10**6 and out["parallel"]["micro_batch"] == 10**6,
    # the adapters' parameters grow with the rank: 10^5 times those of rank 1
    "estimate--lora": lambda out, before: out["trainable_params"] == 10**5 * _json(*before, "--lora", "1")[
        "trainable_params"],
    "estimate--gpus": lambda out, _: (out["gpus"], out["nodes"]) == (10**6, 125000),  # 8 per node
    "estimate--nodes": lambda out, _: out["nodes"] == 10**5 and {c["nodes"] for c in out["cost"]} == {10**5},
    "estimate--gpus-per-node": lambda out, _: (out["gpus"], out["gpus_per_node"], out["nodes"]) == (64, 64, 1),
    "estimate--network-gbps": lambda out, _: out["parallel"]["network_gbps"] == 100000,
    "estimate--throughput": lambda out, _: out["tokens_per_s_per_gpu"] == 1e10,
    "estimate--mfu": lambda out, _: (out["mfu"], out["mfu_source"]) == (1.0, "user"),
    "plan--budget": _same_as_without,
    "plan--max-price": _same_as_without,
    "plan--max-nodes": _same_as_without,
    # a century of deadline rules nothing out: the cheapest option stands, and every option meets it
    "plan--deadline": lambda out, before: out[0] == _json(*before)[0] and max(r["est_hours"] for r in out) < 876600,
    "plan--checkpoint-interval": _no_spot,
    "plan--interruption-rate": _no_spot,
    "prices--max-price": _same_as_without,
    "prices--min-gpu-memory": lambda out, before: out == [] and len(_json(*before)) == 20,  # no GPU has 100 TB
    "prices--limit": _all_prices,
    "runs--limit": lambda out, _: [r["run_id"] for r in out] == [f"r-{i:03d}" for i in reversed(range(51))],
    "bench--limit": lambda out, _: out == {"benchmarks": []},
    "reconcile--grace": lambda out, _: out == [],  # nothing runs on this machine and no run is recorded
    "watch--interval": lambda out, _: out == [],  # no live run to watch
}


def _seed_runs(count: int) -> None:
    """More runs than `runs` shows by default (50), one a minute, so `--limit` at its limit shows them all."""
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    start = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)
    store = Store.open()
    try:
        with store.session() as s:
            s.add_all([Run(id=f"r-{i:03d}", name=f"run {i}", provider="local", spec_text="", spec_hash="",
                           created_at=start + dt.timedelta(minutes=i)) for i in range(count)])
            s.commit()
    finally:
        store.close()


@pytest.mark.parametrize("before,flag,too_big,at_limit", FLAGS, ids=[_ids(c) for c in FLAGS])
def test_flag_at_its_limit_is_accepted(before: tuple[str, ...], flag: str, too_big: str, at_limit: str) -> None:
    if before[0] == "runs":
        _seed_runs(51)
    result = run_cli(*before, flag, at_limit, "--json")
    assert "Invalid value" not in result.stderr and "must be" not in result.stderr, result.stderr
    assert result.exit_code == 0, (result.stdout, result.stderr)
    assert "Infinity" not in result.stdout and "NaN" not in result.stdout
    out = json.loads(result.stdout)
    assert AT_LIMIT[_ids((before, flag))](out, before), out


def test_every_flag_has_its_value_check() -> None:
    assert set(AT_LIMIT) == {_ids(c) for c in FLAGS}


@pytest.mark.parametrize("args", [
    ("--params", "405B", "--tokens", "15T", "--gpus", "16384", "--gpus-per-node", "8"),
    ("--params", "1.5T", "--tokens", "15T", "--gpus", "4096", "--gpus-per-node", "8", "--sharding", "zero3"),
])
def test_real_large_jobs_still_estimate(args: tuple[str, ...]) -> None:
    result = run_cli(*EST, *args, "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["wall_hours"] > 0 and data["gpus"] == int(args[args.index("--gpus") + 1])


def test_samples_times_epochs_past_the_token_limit_is_refused() -> None:
    result = run_cli(*EST, "--params", "1B", "--samples", "1e15", "--epochs", "1000", "--seq-len", "100000")
    assert result.exit_code == 2
    assert "--samples x --epochs x --seq-len must be between 1 and 1e+18 tokens" in result.stderr


def test_nodes_times_gpus_per_node_past_the_gpu_limit_is_refused() -> None:
    result = run_cli(*EST, *WORK, "--nodes", "100000", "--gpus-per-node", "64")
    assert result.exit_code == 2
    assert "--nodes x --gpus-per-node must be between 1 and 1,000,000 GPUs" in result.stderr


BASE_SPEC = "name: x\nruntime: process\ncommand: echo hi\n"
# (field path, YAML for a value, value past the limit, value at the limit)
SPEC_FIELDS = [
    ("resources.gpus_per_node", "resources:\n  gpu: H100\n  gpus_per_node: {v}\n", "65", "64"),
    ("resources.nodes", "resources:\n  nodes: {v}\n", "99999999999999999999999", "1024"),
    ("resources.max_price_per_hour", "resources:\n  gpu: H100\n  max_price_per_hour: {v}\n", "1e30", "1000000"),
    ("workload.params", "workload:\n  params: {v}\n  tokens: 1B\n", "1e300", "1e15"),
    ("workload.tokens", "workload:\n  params: 7B\n  tokens: {v}\n", "1e30", "1e18"),
    ("workload.samples", "workload:\n  params: 7B\n  samples: {v}\n  seq_len: 1\n", "1e30", "1e18"),
    ("workload.epochs", "workload:\n  params: 7B\n  samples: 1000\n  seq_len: 8\n  epochs: {v}\n", "1e300",
     "1000000"),
    ("workload.seq_len", "workload:\n  params: 7B\n  tokens: 1B\n  seq_len: {v}\n", "99999999999999999999999",
     "100000000"),
    ("workload.global_batch", "workload:\n  params: 7B\n  tokens: 1B\n  global_batch: {v}\n", "1e30", "1000000000"),
    ("workload.micro_batch", "workload:\n  params: 7B\n  tokens: 1B\n  micro_batch: {v}\n", "1e30", "1000000"),
    ("workload.lora", "workload:\n  params: 7B\n  tokens: 1B\n  lora: {v}\n", "1e30", "100000"),
    ("workload.throughput", "workload:\n  params: 7B\n  tokens: 1B\n  throughput: {v}\n", "1e300", "1e10"),
    ("workload.mfu", "workload:\n  params: 7B\n  tokens: 1B\n  mfu: {v}\n", "1e30", "1"),
    ("limits.budget_usd", "limits:\n  budget_usd: {v}\n", "1e300", "9999999999"),
    ("limits.max_hours", "limits:\n  max_hours: {v}\n", "'1e9 days'", "876600"),
    ("limits.max_hours", "limits:\n  max_hours: {v}\n", "99999999999999999999999", "'36525 days'"),
    ("limits.deadline", "limits:\n  deadline: {v}\n", "'99999999999999999999 days'", "'36525d'"),
    ("checkpoint.interval", "checkpoint:\n  dir: /tmp/c\n  interval: {v}\n", "99999999999999999999999", "876600"),
]


@pytest.mark.parametrize("field,yaml,too_big,at_limit", SPEC_FIELDS,
                         ids=[f"{c[0]}={c[2]}" for c in SPEC_FIELDS])
def test_spec_field_out_of_range_is_one_line_exit_2(tmp_path: Path, field: str, yaml: str, too_big: str,
                                                    at_limit: str) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(BASE_SPEC + yaml.format(v=too_big))
    for command in (("launch", "--dry-run"), ("schedule", "add", "--cron", "0 2 * * *")):
        result = run_cli(*command, str(spec))
        assert result.exit_code == 2, (command, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and f"{spec}:" in lines[0] and field in lines[0], result.stderr
        assert "Traceback" not in result.stderr
    assert run_cli("runs", "--json").json() == []  # nothing recorded


@pytest.mark.parametrize("field,yaml,too_big,at_limit", SPEC_FIELDS,
                         ids=[f"{c[0]}={c[3]}" for c in SPEC_FIELDS])
def test_spec_field_at_its_limit_is_accepted(tmp_path: Path, field: str, yaml: str, too_big: str,
                                             at_limit: str) -> None:
    from gpuplan.jobs.spec import parse_spec

    value: object = parse_spec(BASE_SPEC + yaml.format(v=at_limit), source="job.yaml")  # SpecError if refused
    for part in field.split("."):
        value = getattr(value, part)
    days = at_limit.strip("'").removesuffix("days").removesuffix("d").strip()
    expected = float(days) * 24 if "d" in at_limit else float(at_limit)  # durations are read as hours
    assert isinstance(value, (int, float, Decimal)) and float(value) == expected, (field, at_limit, value)


def test_every_limit_describes_itself_and_refuses_its_outside() -> None:
    for name, bound in LIMITS.items():
        assert bound.why and bound.describe()
        with pytest.raises(ValueError, match=name):
            check(name, bound.high * 10 + 1, name)
        assert check(name, bound.high - (1 if bound.high_open else 0), name) is not None


@pytest.mark.parametrize("bad", ["1e400", "NaN", "Infinity", '"lots"', "1e30"])
def test_metrics_with_nonsense_numbers_do_not_break_the_progress_line(tmp_path: Path, bad: str) -> None:
    """A job's metrics lines are its own JSON: `tokens: 1e400` (inf) used to crash the ETA with int(inf)."""
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"time": 1000, "step": 1, "tokens": 0}\n'
                    '{"time": 1010, "step": 2, "tokens": 1000}\n'
                    f'{{"time": 1020, "step": 3, "tokens": {bad}, "loss": {bad}, "total_steps": {bad}}}\n'
                    f'{{"time": {bad}, "step": {bad}, "tokens": 3000}}\n')
    progress = measure(path, total_tokens=10**6)
    assert progress is not None and progress.step == 3
    assert progress.loss is None or math.isfinite(progress.loss)
    assert progress.tokens is None or progress.tokens <= 10**6
    assert progress.eta_seconds is None or progress.eta_seconds < LIMITS["hours"].high * 3600


def test_an_eta_past_100_years_is_unknown(tmp_path: Path) -> None:
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"time": 1000, "step": 1, "tokens": 0}\n{"time": 2000, "step": 2, "tokens": 1}\n')
    progress = measure(path, total_tokens=10**18)
    assert progress is not None and progress.tokens_per_s == pytest.approx(0.001)
    assert progress.eta_seconds is None
