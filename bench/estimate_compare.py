"""Whole runs: the one model against the two it replaced, per published set, in sample and leave-one-family-out.

Usage:
    python bench/estimate_compare.py          # the table (about a minute: every fit is redone once per family)

Issue 33 asks the merged estimate to be at least as good as the better of the two old models on every set the bench
has. The three, on the 90 scored runs of tests/data/published_runs.csv:
- the old MFU prior (`session8`, shipped until commit 7a9bade): GPU-hours = model FLOPs / (peak x a flat MFU per GPU
  generation x size and precision factors). Its per-run answers at that commit are kept in
  bench/data/prior_session8_runs.csv (written by its own bench code at 7a9bade); its three fitted bases (ampere,
  hopper, volta) scale them as 1 / base, so the prior can be refitted here without its code.
- the config model alone: the step model with the default layout, no run overhead (what the old `--tp/--recompute`
  path answered for a whole run: tokens / its tokens per second). Nothing fitted to the runs.
- the one model: the step model x the run overhead (gpuplan/estimating/run_overhead.py), constants by
  estimate_accuracy.fit.
"In sample" uses the shipped constants (each model's were fitted on all 90 runs). "Leave one family out" refits each
model's constants without the family of the run it predicts (estimate_accuracy.family: llama, pythia, phi, ...;
a family is one report or a series of them), with the rule each model was chosen by: the grid point whose worst
split beats the naive 6·N·D at 40% MFU by the most (session8's rule, and fit()'s).
"""

from __future__ import annotations

import csv
import random
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import estimate_accuracy as accuracy  # noqa: E402

PRIOR_RUNS = ROOT / "bench" / "data" / "prior_session8_runs.csv"
FITTED_BASES = ("ampere", "hopper", "volta")
BASE_GRID = tuple(round(0.30 + 0.02 * i, 2) for i in range(13))
VOLTA_BASE_GRID = tuple(round(0.05 + 0.01 * i, 2) for i in range(8))
SETS = ("tune", "test", "test2", "all")

Row = dict[str, str]


def load_prior(path: Path = PRIOR_RUNS) -> dict[str, Row]:
    with path.open(newline="") as f:
        return {row["run"]: row for row in csv.DictReader(f)}


def prior_hours(row: Row, prior: dict[str, Row], bases: dict[str, float] | None = None) -> float:
    """The prior's GPU-hours for `row` with `bases` (the shipped session8 ones when None)."""
    answer = prior[row["run"]]
    shipped = float(answer["base"])
    base = (bases or {}).get(answer["generation"], shipped)
    return float(answer["prior_gpu_hours"]) * shipped / base


def _groups(rows: list[Row]) -> dict[str, list[Row]]:
    groups = {name: [r for r in rows if r["split"] == name] for name in {r["split"] for r in rows}}
    groups["all"] = rows
    return groups


def fit_prior(rows: list[Row], prior: dict[str, Row]) -> dict[str, float]:
    """The prior's bases refitted on `rows` by session8's rule (worst split's margin over naive, grid)."""
    groups = _groups(rows)
    naives = {name: accuracy.naive(group) for name, group in groups.items()}
    best: tuple[float, dict[str, float]] | None = None
    for ampere in BASE_GRID:
        for hopper in BASE_GRID:
            for volta in VOLTA_BASE_GRID:
                bases = {"ampere": ampere, "hopper": hopper, "volta": volta}
                worst = max(statistics.median(abs(prior_hours(r, prior, bases) / float(r["reported_gpu_hours"]) - 1)
                                              for r in group) - naives[name] for name, group in groups.items())
                if best is None or worst < best[0] - 1e-12:
                    best = (worst, bases)
    assert best is not None
    return best[1]


def leave_family_out(rows: list[Row], predict_with: Callable[[list[Row]], Callable[[Row], float]]) -> dict[str, float]:
    """Signed error of each run predicted by a model fitted without its family."""
    out: dict[str, float] = {}
    for family in sorted({accuracy.family(r["run"]) for r in rows}):
        predictor = predict_with([r for r in rows if accuracy.family(r["run"]) != family])
        for r in rows:
            if accuracy.family(r["run"]) == family:
                out[r["run"]] = predictor(r) / float(r["reported_gpu_hours"]) - 1
    return out


def medians(rows: list[Row], signed: dict[str, float]) -> dict[str, float]:
    """Median |error| per set."""
    return {name: statistics.median(abs(signed[r["run"]]) for r in rows if name == "all" or r["split"] == name)
            for name in SETS}


@dataclass(frozen=True)
class Gap:
    """The one model's median |error| minus the better old model's on one set, and how far resampling the set's
    model families moves it: a median over 20-47 runs from a dozen families moves several points with one family,
    so the gap is read against its interval, not alone."""

    set_name: str
    better_old: str
    observed: float
    low: float  # 5th percentile over the resamples
    high: float  # 95th percentile
    at_least_as_good: float  # share of resamples where the one model's median is <= the better old model's


def family_bootstrap(rows: list[Row], one: dict[str, float], old: dict[str, dict[str, float]], *,
                     draws: int = 2000, seed: int = 0) -> list[Gap]:
    """For each set, the gap between the one model and the better (in sample) of the `old` models, with its 90%
    interval over `draws` resamples of the set's families drawn with replacement (a family is one report or
    series, as in the leave-one-family-out refits: runs of a family share a team and a stack, so they are not
    independent draws). `one` and each of `old` map a run to its signed error."""
    rng = random.Random(seed)
    gaps = []
    for name in SETS:
        members = [r for r in rows if name == "all" or r["split"] == name]
        by_family: dict[str, list[str]] = {}
        for r in members:
            by_family.setdefault(accuracy.family(r["run"]), []).append(r["run"])
        runs = [r["run"] for r in members]
        better = min(old, key=lambda label: statistics.median(abs(old[label][run]) for run in runs))
        families = sorted(by_family)

        def gap(chosen: list[str], best: dict[str, float] = old[better]) -> float:
            return (statistics.median(abs(one[run]) for run in chosen)
                    - statistics.median(abs(best[run]) for run in chosen))

        samples = sorted(gap([run for family in rng.choices(families, k=len(families)) for run in by_family[family]])
                         for _ in range(draws))
        gaps.append(Gap(name, better, gap(runs), samples[int(0.05 * draws)], samples[int(0.95 * draws) - 1],
                        sum(1 for g in samples if g <= 0) / draws))
    return gaps


def _refitted_prior(prior: dict[str, Row]) -> Callable[[list[Row]], Callable[[Row], float]]:
    def predictor(train: list[Row]) -> Callable[[Row], float]:
        bases = fit_prior(train, prior)
        return lambda r: prior_hours(r, prior, bases)
    return predictor


def _refitted_model(train: list[Row]) -> Callable[[Row], float]:
    constants = accuracy.fit(train)
    return lambda r: accuracy.predict(r, constants)


def signed_errors(rows: list[Row], predict: Callable[[Row], float]) -> dict[str, float]:
    """Each run's predicted / reported GPU-hours - 1."""
    return {r["run"]: predict(r) / float(r["reported_gpu_hours"]) - 1 for r in rows}


def comparison(rows: list[Row], prior: dict[str, Row]) -> dict[str, dict[str, float]]:
    """Median |error| per set for each model and protocol (the rows of the printed table)."""
    return {
        "old MFU prior, in sample (session8)": medians(rows, signed_errors(rows, lambda r: prior_hours(r, prior))),
        "old MFU prior, leave one family out": medians(rows, leave_family_out(rows, _refitted_prior(prior))),
        "config model alone (no fit)": medians(rows, signed_errors(rows, lambda r: accuracy.step_answer(r).gpu_hours)),
        "one model, in sample (shipped)": medians(rows, signed_errors(rows, accuracy.predict)),
        "one model, leave one family out": medians(rows, leave_family_out(rows, _refitted_model)),
        "naive 6·N·D at 40% (no fit)": {name: accuracy.naive([r for r in rows if name == "all" or r["split"] == name])
                                        for name in SETS},
    }


def main() -> int:
    rows = accuracy.load_runs()
    prior = load_prior()
    missing = [r["run"] for r in rows if r["run"] not in prior]
    if missing:
        print(f"estimate_compare: no session8 answer for {', '.join(missing)}", file=sys.stderr)
        return 2
    table = comparison(rows, prior)
    counts = {name: sum(1 for r in rows if name == "all" or r["split"] == name) for name in SETS}
    print("whole-run GPU-hours, median |error| per published set")
    print("| model | " + " | ".join(f"{name} ({counts[name]})" for name in SETS) + " |")
    print("| --- |" + " ---: |" * len(SETS))
    for label, values in table.items():
        print(f"| {label} | " + " | ".join(f"{values[name]:.1%}" for name in SETS) + " |")
    in_sample = table["one model, in sample (shipped)"]
    prior_in, config = table["old MFU prior, in sample (session8)"], table["config model alone (no fit)"]
    best_old = {name: min(prior_in[name], config[name]) for name in SETS}
    verdicts = ", ".join(f"{name} {'met' if in_sample[name] <= best_old[name] else 'NOT met'}" for name in SETS)
    print(f"one model in sample <= the better old model in sample, per set: {verdicts}")
    left_out = table["one model, leave one family out"]
    prior_out = table["old MFU prior, leave one family out"]
    verdicts = ", ".join(f"{name} {'met' if left_out[name] <= prior_out[name] else 'NOT met'}" for name in SETS)
    print(f"one model <= old prior, both refitted leaving each family out, per set: {verdicts}")

    old = {"old prior": signed_errors(rows, lambda r: prior_hours(r, prior)),
           "config model": signed_errors(rows, lambda r: accuracy.step_answer(r).gpu_hours)}
    print("one model in sample minus the better old model in sample, with a 90% interval over 2,000 resamples of"
          " the set's model families:")
    for g in family_bootstrap(rows, signed_errors(rows, accuracy.predict), old):
        print(f"  {g.set_name}: {g.observed * 100:+.1f} points vs the {g.better_old} (interval {g.low * 100:+.1f} to"
              f" {g.high * 100:+.1f}; the one model at least as good in {g.at_least_as_good:.0%} of resamples)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
