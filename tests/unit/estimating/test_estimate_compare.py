"""bench/estimate_compare.py: the old MFU prior is rebuilt from its stored answers and refitted by its own rule, so
the one model can be compared with it leave-one-family-out (issue 33 item 1)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

import estimate_accuracy as accuracy  # noqa: E402
from estimate_compare import family_bootstrap, fit_prior, leave_family_out, load_prior, prior_hours  # noqa: E402


def test_the_stored_prior_refits_to_the_bases_it_shipped_with() -> None:
    """Refitted on all 90 scored runs by session8's rule, the stored answers give back session8's bases (ampere 0.42,
    hopper 0.42, volta 0.08) and its published in-sample figure (25.6% over all runs)."""
    rows, prior = accuracy.load_runs(), load_prior()
    assert {r["run"] for r in rows} <= set(prior)
    assert fit_prior(rows, prior) == {"ampere": 0.42, "hopper": 0.42, "volta": 0.08}
    errors = sorted(abs(prior_hours(r, prior) / float(r["reported_gpu_hours"]) - 1) for r in rows)
    assert (errors[44] + errors[45]) / 2 == pytest.approx(0.256, abs=0.0005)


def test_a_base_scales_the_prior_inversely_and_a_family_is_predicted_without_itself() -> None:
    rows, prior = accuracy.load_runs(), load_prior()
    row = next(r for r in rows if r["run"] == "llama-2-7b")
    assert prior_hours(row, prior, {"ampere": 0.21}) == pytest.approx(2 * prior_hours(row, prior))
    seen: list[set[str]] = []

    def predictor(train: list[dict[str, str]]):  # type: ignore[no-untyped-def]
        seen.append({accuracy.family(r["run"]) for r in train})
        return lambda r: float(r["reported_gpu_hours"])

    errors = leave_family_out(rows, predictor)
    assert set(errors) == {r["run"] for r in rows} and all(e == 0 for e in errors.values())
    families = {accuracy.family(r["run"]) for r in rows}
    assert len(seen) == len(families) and all(len(families - s) == 1 for s in seen)


def test_the_family_bootstrap_reads_a_gap_against_its_interval() -> None:
    """Errors equal to the better old model's give a zero gap every time; errors 5 points worse on every run give a
    5-point gap whose whole interval is above zero; the better of two old models is picked per set."""
    rows = accuracy.load_runs()
    prior = {r["run"]: 0.20 for r in rows}
    worse = {r["run"]: 0.40 for r in rows}
    same = family_bootstrap(rows, dict(prior), {"old prior": prior, "config model": worse}, draws=200)
    assert [g.set_name for g in same] == ["tune", "test", "test2", "all"]
    assert all(g.better_old == "old prior" and g.observed == 0 and g.at_least_as_good == 1.0 for g in same)
    behind = family_bootstrap(rows, {run: -0.25 for run in prior}, {"old prior": prior, "config model": worse},
                              draws=200)
    assert all(g.observed == pytest.approx(0.05) and g.low > 0 and g.at_least_as_good == 0 for g in behind)
