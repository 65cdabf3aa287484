"""bench/estimate_residuals.py: the analysis behind the README's claim that nothing a user tells the estimate
explains the prior's misses on published runs, while knowing the run's family does.

The arithmetic is checked on tables whose answer is known; the real table's figures are checked against the
README, which quotes them.
"""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "bench" / "estimate_residuals.py"
sys.path.insert(0, str(ROOT / "bench"))

from estimate_residuals import Score, family_calibrated, fit_line, held_out  # noqa: E402


def test_fit_line_recovers_a_line_and_the_ridge_only_shrinks_the_slope() -> None:
    xs = [float(x) for x in range(20)]
    ys = [0.5 + 0.1 * x for x in xs]
    exact = fit_line(xs, ys, ridge=0.0)
    assert exact(3.0) == pytest.approx(0.8) and exact(30.0) == pytest.approx(3.5)
    shrunk = fit_line(xs, ys)  # ridge 1 against 20 runs: the slope keeps 20/21 of itself
    mean_x = sum(xs) / len(xs)
    assert shrunk(mean_x) == pytest.approx(0.5 + 0.1 * mean_x)
    assert (shrunk(19.0) - shrunk(0.0)) / 19 == pytest.approx(0.1 * 20 / 21)
    assert fit_line([2.0, 2.0, 2.0], [0.1, 0.2, 0.3])(100.0) == pytest.approx(0.2)  # no spread: the mean


def test_held_out_removes_what_a_feature_explains() -> None:
    xs = [float(x) for x in range(30)]
    ys = [0.02 * x - 0.3 for x in xs]  # the log error is a line in the feature: a correction removes it
    left = held_out(xs, ys, [str(i) for i in range(30)])
    assert max(abs(e) for e in left) < 0.02
    flat = held_out([0.0] * 30, ys, [str(i) for i in range(30)])  # a feature with no spread: just the mean
    assert Score.of(flat).median_abs_error > 0.1
    # leaving out a whole group: the group's own runs are not used for its correction
    groups = ["a"] * 15 + ["b"] * 15
    ys_by_group = [0.0] * 15 + [0.4] * 15
    assert held_out([0.0] * 30, ys_by_group, groups) == pytest.approx([-0.4] * 15 + [0.4] * 15)


def test_family_calibration_uses_only_the_other_runs_of_the_family() -> None:
    rows = [{"run": "alpha-1b"}, {"run": "alpha-7b"}, {"run": "alpha-70b"}, {"run": "beta-1b"}]
    ys = [0.1, 0.3, 0.2, 1.0]
    # alpha-1b: mates 0.3, 0.2 -> median 0.25; beta-1b is alone in its family and is not scored
    assert family_calibrated(rows, ys) == pytest.approx([0.1 - 0.25, 0.3 - 0.15, 0.2 - 0.2])


def test_score_counts_within_ten_percent_on_the_ratio() -> None:
    score = Score.of([math.log(1.05), math.log(0.95), math.log(1.5), math.log(0.5)])
    assert score.runs == 4 and score.within_10pct == 0.5
    assert score.median_abs_error == pytest.approx((0.05 + 0.5) / 2)


def test_the_benchmarks_page_quotes_the_bench() -> None:
    result = subprocess.run([sys.executable, str(BENCH)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    page = (ROOT / "docs" / "benchmarks" / "estimator.md").read_text()
    table = [line for line in result.stdout.splitlines() if line.startswith("| model")]
    assert len(table) >= 10
    for line in table:
        assert line in page, f"docs/benchmarks/estimator.md does not quote: {line}"


def test_bad_runs_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, str(BENCH), "--runs", str(tmp_path / "missing.csv")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "missing.csv" in result.stderr
