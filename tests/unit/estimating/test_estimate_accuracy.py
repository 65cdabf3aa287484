"""Accuracy against published training runs (tests/data/published_runs.csv), as the README reports it.

A regression guard, not the target itself: the default prior must beat the naive 6·N·D at 40% MFU and stay
within the error the README states on the rows it was fitted on and on the `test` rows it never saw; the
frozen record of that prior must keep reproducing the README's figures, so a later batch of runs can be
scored with the prior as it was before the batch was found. The leave-one-out figure
(bench/estimate_accuracy.py --loo) refits once per row and belongs in the bench.
"""

from __future__ import annotations

import csv
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "estimate_accuracy.py"
sys.path.insert(0, str(ROOT / "bench"))

from estimate_accuracy import (  # noqa: E402
    PRIORS,
    RUNS,
    SPLITS,
    current_constants,
    errors,
    fit,
    fitted_keys,
    forced_misses,
    in_band,
    load_runs,
    naive,
    report_splits,
    shipped_prior_name,
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


def test_default_prior_beats_naive() -> None:
    """The shipped prior (session8, chosen on all 90 scored runs) beats the naive 6·N·D@40% on every published set
    (issue 24), and its "likely" band holds about 80% of the runs of each."""
    rows = load_runs()
    errs = errors(rows)
    overall = statistics.median(abs(e) for e in errs)
    assert overall < naive(rows)
    assert overall <= 0.26, overall  # README: 25.6% over all 90 scored rows
    assert abs(statistics.median(errs)) <= 0.10  # README: median signed error -8.7%
    for split in ("tune", "test", "test2"):
        chosen = [r for r in rows if r["split"] == split]
        split_errs = errors(chosen)
        assert statistics.median(abs(e) for e in split_errs) < naive(chosen), split
        assert 0.75 <= in_band(split_errs) <= 0.90, split


def test_frozen_prior_reproduces_the_readme() -> None:
    """The README's Estimate accuracy table: the `session2` prior (tune in-sample 12.3%, mean 25.9%; test 54.4%,
    mean 53.9%, naive 35.6%; test2 85.9%, naive 34.2%) and the shipped `session4` one, whatever mfu.py ships
    later."""
    stats = {s.split: s for s in report_splits(load_runs(), PRIORS["session2"])}
    tune, test, test2 = stats["tune"], stats["test"], stats["test2"]
    assert (tune.runs, test.runs, test2.runs) == (47, 20, 23)
    assert tune.median_abs_error == pytest.approx(0.123, abs=0.001)
    assert tune.mean_abs_error == pytest.approx(0.259, abs=0.001)
    assert test.median_abs_error == pytest.approx(0.544, abs=0.001)
    assert test.mean_abs_error == pytest.approx(0.539, abs=0.001)
    assert test.naive_median_abs_error == pytest.approx(0.356, abs=0.001)
    assert test.within_10pct == pytest.approx(0.15)
    assert test2.median_abs_error == pytest.approx(0.859, abs=0.001)
    assert test2.naive_median_abs_error == pytest.approx(0.342, abs=0.001)
    now = {s.split: s for s in report_splits(load_runs(), PRIORS["session4"])}
    assert [round(now[k].median_abs_error, 3) for k in ("tune", "test", "test2", "all scored")] == [
        0.230, 0.268, 0.429, 0.283]


def test_shipped_constants_have_a_frozen_record() -> None:
    """Whenever mfu.py's constants change, the new ones get a PRIORS entry, so they can be re-scored later."""
    assert shipped_prior_name() is not None, (
        f"mfu.py ships {current_constants()}: record them in PRIORS (bench/estimate_accuracy.py) under a new name")


def test_fit_moves_only_the_generations_it_has_runs_for() -> None:
    """volta is fitted when V100 rows are among the fitted ones; a generation without runs keeps its start."""
    rows = load_runs()
    volta = [r for r in rows if r["gpu"].startswith("V100")]
    assert volta and "volta" in fitted_keys(rows)
    assert "volta" not in fitted_keys([r for r in rows if not r["gpu"].startswith("V100")])
    start = PRIORS["session2"]
    values = fit(volta, start=start, rounds=10)
    assert values["ampere"] == start["ampere"] and values["hopper"] == start["hopper"]
    assert values["volta"] != start["volta"]


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


def test_unknown_prior_is_one_line_and_exit_2() -> None:
    result = _bench("--prior", "no-such-prior")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.strip().count("\n") == 0 and "no-such-prior" in result.stderr and "session2" in result.stderr


def test_every_split_is_reported_even_empty(tmp_path: Path) -> None:
    """The splits of the real table, plus test2 while it has no rows; and in a table where `test` is empty,
    one row is in test2 and one in a split the bench has never heard of."""
    result = _bench("--prior", "session2")
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
