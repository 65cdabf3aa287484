"""Whole runs take longer than their steps: the run-overhead factor and how far published runs fall around it.

The step model (gpuplan.estimating.throughput) times optimizer steps and is scored against published throughput
tables (bench/throughput_accuracy.py). A published training run's GPU-hours also hold what no step shows: restarts
after failures and the steps redone since the last checkpoint (Llama 3: 466 interruptions in 54 days, Dubey et al.
2024 sec. 3.3.4), evaluation, checkpoint writes, data-loader stalls, the time to a stable setup, and a software
stack below the tuned one the step model's sustained rate was fitted on. So the estimate's whole-run hours are the
step model's hours times

    overhead = K[generation] x (step MFU / MFU_REFERENCE) ^ SHRINK

fitted on the 90 scored published runs of tests/data/published_runs.csv (`python bench/estimate_accuracy.py --fit`
refits; the same rule that chose the earlier MFU prior's constants: the grid point whose worst split beats the naive
6·N·D at 40% MFU by the most). SHRINK: published runs' MFUs spread about half as much as the step model's roofline
says (the table shows no size effect: small models on modern stacks run as fast as large ones, README "Accuracy"),
so a step the model times as unusually efficient gets a larger overhead. K per GPU generation: the V100 runs
(2020-2023 stacks, calendar days reported) run far below what the step model says the hardware can do.

RUN_RATIO_BAND is the 10th and 90th percentile of reported / predicted GPU-hours over those runs with these constants:
the "likely" band the estimate prints (~80% of published runs inside; the bench prints the coverage per split).
A measured or given throughput (gpuplan bench, --throughput, calibration from the user's own finished runs) is the
user's own whole-run rate: no overhead is added to it.
"""

from __future__ import annotations

from dataclasses import dataclass

MFU_REFERENCE = 0.42
SHRINK = 0.5
RUN_OVERHEAD = {"ampere": 1.2, "hopper": 1.05, "volta": 3.0}
FALLBACK_GENERATION = {"ada": "ampere", "turing": "ampere", "pascal": "volta", "blackwell": "hopper",
                       "cdna3": "hopper"}
RUN_RATIO_BAND = (0.58, 1.94)


@dataclass(frozen=True)
class RunFactor:
    """Whole-run hours / step-model hours, in its two parts, so the estimate can say what each one is: `overhead`
    (K[generation], at least 1 for every fitted generation: restarts, evaluation, checkpoints, the stack) and
    `mfu_pull` ((step MFU / MFU_REFERENCE) ^ SHRINK: below 1 when the step model rates a step less efficient than
    the typical published run, above 1 when more — published runs spread about half as far)."""

    overhead: float
    mfu_pull: float

    @property
    def total(self) -> float:
        return self.overhead * self.mfu_pull


def run_factor(generation: str, step_mfu: float, *, constants: dict[str, float] | None = None) -> RunFactor:
    """The run factor for a run on `generation` whose steps reach `step_mfu` (model FLOPs utilisation of the step
    model); `constants` (the bench's fit) overrides RUN_OVERHEAD and SHRINK."""
    table = dict(RUN_OVERHEAD, shrink=SHRINK) if constants is None else constants
    key = generation if generation in table else FALLBACK_GENERATION.get(generation, "ampere")
    return RunFactor(table[key], (max(step_mfu, 1e-6) / MFU_REFERENCE) ** table["shrink"])


def run_overhead(generation: str, step_mfu: float, *, constants: dict[str, float] | None = None) -> float:
    """Whole-run hours / step-model hours (run_factor's total)."""
    return run_factor(generation, step_mfu, constants=constants).total
