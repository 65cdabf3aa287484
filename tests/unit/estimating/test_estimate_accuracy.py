"""Accuracy of the one model's whole-run GPU-hours against published training runs (tests/data/published_runs.csv).

A regression guard, not the target itself: the step model x the run overhead must beat the naive 6·N·D at 40% MFU
on every published set, its "likely" band must hold 75-85% of the runs, and the shipped run-overhead constants must
be what the bench's fit gives (so nobody tunes them by hand).
"""

from __future__ import annotations

import csv
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "estimate_accuracy.py"
sys.path.insert(0, str(ROOT / "bench"))

from estimate_accuracy import (  # noqa: E402
    RUNS,
    SPLITS,
    errors,
    fit,
    forced_misses,
    in_band,
    load_runs,
    naive,
    shipped_constants,
    twin_pairs,
)


def test_table_is_cited_and_covers_two_generations() -> None:
    rows = load_runs()
    assert len({r["run"].split("-")[0] for r in rows}) >= 8  # model families
    assert {r["gpu"] for r in rows} >= {"A100-80GB", "A100-40GB", "H100"}
    assert all(r["source"] and float(r["reported_gpu_hours"]) > 0 for r in rows)
    assert {r["split"] for r in rows} <= set(SPLITS)
    assert all(r["checked"] == "no" or r["checked"].startswith(("yes: ", "yes (secondary): "))
               for r in load_runs(scored=False))


def test_excluded_rows_say_which_rule() -> None:
    """Rows that are not one dense model's pre-training on NVIDIA GPUs are kept with their reason, unscored."""
    excluded = [r for r in load_runs(scored=False) if r["exclude"].strip()]
    assert excluded and all(r["exclude"].lstrip().startswith(("(a)", "(b)", "(c)", "(d)", "(e)")) for r in excluded)
    assert not {r["run"] for r in excluded} & {r["run"] for r in load_runs()}


def test_one_model_beats_naive_and_its_band_holds_most_runs() -> None:
    """Every published set is predicted better than the naive 6·N·D@40% (issue 24, kept by issue 33), and the
    "likely" band holds 75-85% of all runs (each split within a few runs of it)."""
    rows = load_runs()
    errs = errors(rows)
    assert statistics.median(abs(e) for e in errs) < naive(rows)
    assert 0.75 <= in_band(errs) <= 0.85
    for split in ("tune", "test", "test2"):
        chosen = [r for r in rows if r["split"] == split]
        split_errs = errors(chosen)
        assert statistics.median(abs(e) for e in split_errs) < naive(chosen), split
        assert 0.70 <= in_band(split_errs) <= 0.90, split


def test_shipped_run_overhead_is_the_fit() -> None:
    """gpuplan/estimating/run_overhead.py ships what `bench/estimate_accuracy.py --fit` gives on all scored runs."""
    assert fit(load_runs()) == shipped_constants()


def _run(hours_per_6nd: float, name: str, gpu: str, params: float, tokens: float) -> dict[str, str]:
    return {"run": name, "gpu": gpu, "params": str(params), "tokens": str(tokens),
            "reported_gpu_hours": str(hours_per_6nd * 6 * params * tokens)}


def test_twin_pairs_on_a_small_table() -> None:
    h = 1e-18  # GPU-hours per 6·N·D: only ratios matter
    rows = [_run(h, "a", "A100-80GB", 1.00e9, 1e11),
            _run(1.5 * h, "b", "A100-80GB", 1.04e9, 1.5e11),  # a's twin, 1.5x apart: far
            _run(h, "c", "A100-80GB", 1.20e9, 1e11),  # 20% (and 15% from b) bigger: nobody's twin
            _run(h, "d", "H100", 1.00e9, 1e11),  # a's size on another GPU: not a twin
            _run(1.1 * h, "e", "A100-80GB", 1.02e9, 4e11)]  # a's twin 1.1x apart; b's 1.36x apart; 4x a's tokens
    pairs = twin_pairs(rows)
    assert {(p.a, p.b) for p in pairs} == {("a", "b"), ("a", "e"), ("b", "e")}
    assert sorted(round(p.ratio, 3) for p in pairs) == [1.1, 1.364, 1.5]
    assert {(p.a, p.b) for p in pairs if p.far} == {("a", "b"), ("b", "e")}
    assert forced_misses(pairs) == 1  # b alone misses both far pairs
    close = twin_pairs(rows, tokens_factor=2.0)
    assert [(p.a, p.b, p.far) for p in close] == [("a", "b", True)]
    assert forced_misses(close) == 1
    other = [_run(h, "x", "A100-40GB", 1e9, 1e11), _run(2 * h, "y", "A100-40GB", 1e9, 1e11)]
    assert forced_misses(twin_pairs([*other, *rows])) == 2  # a second, separate far pair: one more miss


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True, timeout=300)


def test_unknown_option_is_one_line_and_exit_2() -> None:
    result = _bench("--prior", "session2")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "--prior" in result.stderr


def test_every_split_is_reported_even_empty(tmp_path: Path) -> None:
    """The splits of the real table, plus test2 while it has no rows; and in a table where `test` is empty,
    one row is in test2 and one in a split the bench has never heard of."""
    result = _bench()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    for split in {r["split"] for r in load_runs(scored=False)} | set(SPLITS):
        assert any(line.startswith((f"{split}: ", f"{split} (in-sample): ")) for line in lines), split

    with RUNS.open(newline="") as f:
        reader = csv.DictReader(f)
        fields, rows = reader.fieldnames, [r for r in reader if r["split"] == "tune"]
    assert fields
    rows[0]["split"], rows[1]["split"] = "test2", "holdout"
    table = tmp_path / "runs.csv"
    with table.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields)
        writer.writeheader()
        writer.writerows(rows)
    result = _bench("--runs", str(table))
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert "test (in-sample): 0 runs" in lines  # the shipped prior was fitted on tune, test and test2
    assert any(line.startswith("test2 (in-sample): 1 runs, median |error|") for line in lines)
    assert any(line.startswith("holdout: 1 runs, median |error|") for line in lines)


def test_the_run_overhead_part_is_never_below_one() -> None:
    """The factor's overhead part (restarts, evaluation, checkpoints) is at least 1 for every generation it is
    fitted on; only the pull toward the typical published MFU may take the product below 1, and it is 1 at the
    reference MFU."""
    from gpuplan.estimating import run_overhead

    for generation in ("ampere", "hopper", "volta", "blackwell", "ada", "cdna3", "unknown"):
        low = run_overhead.run_factor(generation, 0.20)
        assert low.overhead >= 1.0 and low.mfu_pull < 1.0
        assert low.total == run_overhead.run_overhead(generation, 0.20)
        assert run_overhead.run_factor(generation, run_overhead.MFU_REFERENCE).mfu_pull == 1.0
