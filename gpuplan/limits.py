"""The one table of sane limits for every number a user types: flags, job-spec fields, metrics a job reports.

Finite is not enough (gpuplan.units.finite refuses nan/inf): `--params 1e300`, `--tokens 1e30` or
`--gpus 10**23` are finite yet mean nothing, and deep inside they overflow (Decimal, timedelta, SQLite's 64-bit
integers, the 16-digit Money column) or print 30-digit hours. Each bound below is far beyond anything real, so
no legitimate job is refused (405B models, 15T tokens, thousands of GPUs all pass), yet every product the
estimator forms from them (FLOPs = 6 x params x tokens, dollars = price x nodes x hours) stays a finite float
and every duration fits a datetime. The CLI's option types (gpuplan.cli.commands.params.bounded) and the job spec's
field types (gpuplan.jobs.spec) both check against this table, so a flag and its spec field agree, and an
out-of-range value is one line naming the flag or field and the allowed range (exit 2).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

HOURS_PER_YEAR = 8766  # 365.25 days
MONEY_LIMIT = 10**10  # the first dollar amount the books' Money column (16 digits, 6 after the point) cannot hold


@dataclass(frozen=True)
class Limit:
    """Allowed range of one kind of number; `low_open`: the low end itself is refused (it must be > low)."""

    low: float
    high: float
    unit: str
    why: str
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def allows(self, value: float) -> bool:
        """True when `value` is a finite number inside the range."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return above and below

    def floored(self, low: float | None) -> Limit:
        """This range with a flag's own (higher, closed) floor, e.g. `watch --interval` polls at most twice a
        second; None keeps the table's."""
        return self if low is None else replace(self, low=low, low_open=False)

    def describe(self) -> str:
        """`between 1 and 1,000,000 GPUs`, `greater than 0 and at most 1`: the range as an error line says it."""
        unit = f" {self.unit}" if self.unit else ""
        low, high = _number(self.low), _number(self.high)
        if not self.low_open and not self.high_open:
            return f"between {low} and {high}{unit}"
        low_words = f"greater than {low}" if self.low_open else f"at least {low}"
        high_words = f"less than {high}" if self.high_open else f"at most {high}"
        return f"{low_words} and {high_words}{unit}"


def _number(value: float) -> str:
    """1000000 -> `1,000,000`; 1e15 -> `1e+15`; 0.5 -> `0.5`: readable at any size."""
    if float(value).is_integer() and abs(value) < 1e9:
        return f"{int(value):,}"
    return f"{value:g}"


LIMITS: Mapping[str, Limit] = MappingProxyType({
    # --- the model and the work
    "params": Limit(1, 1e15, "parameters", "no model has more than 1e15 parameters (the largest trained are ~2e12)",
                    integer=True),
    "tokens": Limit(1, 1e18, "tokens", "no job trains on more than 1e18 tokens (Llama 3 used 1.5e13; the whole "
                                       "public web is ~1e15)", integer=True),
    "samples": Limit(1, 1e18, "sequences", "never more sequences than the 1e18-token limit", integer=True),
    "epochs": Limit(0, 1e6, "epochs", "a million passes over any data set is already absurd", low_open=True),
    "seq_len": Limit(1, 1e8, "tokens", "the longest context windows are ~1e7 tokens", integer=True),
    "context": Limit(1, 1e8, "tokens", "the longest context windows are ~1e7 tokens", integer=True),
    "global_batch": Limit(1, 1e9, "sequences", "the largest runs step on ~1e4 sequences (16M tokens)",
                          integer=True),
    "micro_batch": Limit(1, 1e6, "sequences", "no GPU holds a million sequences per forward pass", integer=True),
    "batch": Limit(1, 1e6, "sequences", "a million concurrent sequences is past any serving GPU", integer=True),
    "lora": Limit(1, 1e5, "", "a LoRA rank above the widest hidden size (~5e4) is no low-rank adapter",
                  integer=True),
    # --- the hardware
    "gpus": Limit(1, 1e6, "GPUs", "no job has more than 1e6 GPUs (the largest clusters hold ~2e5)", integer=True),
    "nodes": Limit(1, 1e5, "nodes", "1e6 GPUs at 8 per node are 125,000 nodes; 1e5 is past any cluster",
                   integer=True),
    "launch_nodes": Limit(1, 1024, "nodes", "machines one launch starts (one provider call each); larger jobs are "
                                            "a cluster, not a spec", integer=True),
    "model_parallel": Limit(1, 1024, "GPUs", "tensor or pipeline parallel sizes past 1,024 GPUs per replica "
                                             "are past any published run", integer=True),
    "gpus_per_node": Limit(1, 64, "GPUs", "the largest machines hold 8-16 GPUs; 64 leaves room", integer=True),
    "gpus_per_instance": Limit(0, 64, "GPUs", "clouds sell from a fraction of a GPU to 16 per instance",
                               low_open=True),
    "network_gbps": Limit(0, 1e5, "Gbit/s", "the fastest node NICs carry 3,200 Gbit/s", low_open=True),
    "peak_tflops": Limit(0, 1e5, "TFLOP/s", "the fastest GPU peaks below 1e4 TFLOP/s (fp4, sparse)",
                         low_open=True),
    "gpu_memory_gb": Limit(0, 1e5, "GB", "the largest GPUs hold ~300 GB", low_open=True),
    # --- speed
    "throughput": Limit(0, 1e10, "tokens/s per GPU", "a 1e16 FLOP/s GPU on a 1e5-parameter model does ~2e10",
                        low_open=True),
    "mfu": Limit(0, 1, "", "model FLOPs utilisation is a fraction of the GPU's peak", low_open=True),
    "interruption_rate": Limit(0, 10, "per hour", "ten spot interruptions an hour leave no time to work",
                               high_open=True),
    # --- time
    # Below one second, `max_hours: 1e-300` launched a job no timer could stop.
    "hours": Limit(1 / 3600, 100 * HOURS_PER_YEAR, "hours", "one second (the shortest a timer or a bill counts) to "
                   "100 years (every deadline, cap and interval fits a datetime)"),
    "interval_s": Limit(0, 86400, "seconds", "polling less than once a day could not enforce an hourly cap",
                        low_open=True),
    # --- money
    "usd": Limit(0, MONEY_LIMIT, "dollars", "the books' Money column holds 16 digits, 6 after the point",
                 low_open=True, high_open=True),
    "usd_per_hour": Limit(0, 1e6, "dollars per hour", "the dearest instances cost ~$100/h; a $1M/h cap caps "
                                                      "nothing", low_open=True),
    # --- what a running job reports in its metrics lines (gpuplan.supervise.progress keeps only records inside these)
    "metric_count": Limit(0, 1e18, "", "steps and tokens done: never more than the 1e18-token limit",
                          integer=True),
    "metric_time": Limit(0, 1e11, "seconds since 1970", "a Unix time before the year 5138"),
    # --- counts of rows to show or compute
    "rows": Limit(0, 1e9, "rows", "more rows than any store holds; SQLite's LIMIT is a 64-bit integer",
                  integer=True),
    "steps": Limit(0, 1e6, "steps", "a bench measures seconds to minutes of steps, not days", integer=True),
    "layers": Limit(1, 1e4, "layers", "the deepest models have ~1e2 layers", integer=True),
})


def limit(name: str) -> Limit:
    """The table's entry for `name` (a KeyError is a programming error, not input)."""
    return LIMITS[name]


def check(name: str, value: float, what: str, *, text: object = None, low: float | None = None) -> float:
    """`value` when `LIMITS[name]` allows it; else a ValueError fit to show: `what` (the flag or field), the
    allowed range and why. `low`: a flag's own higher floor (e.g. `watch --interval` polls at most twice a
    second); `text`: what the user typed, when it reads better than the parsed number."""
    bound = LIMITS[name].floored(low)
    if not bound.allows(value):
        shown = text if text is not None else (_number(value) if isinstance(value, (int, float)) else value)
        raise ValueError(f"{what + ' ' if what else ''}must be {bound.describe()}, not {shown}: {bound.why}")
    return value


def within(name: str, value: float | None) -> bool:
    """True when `value` is inside `LIMITS[name]` (None: nothing to check). For numbers that are computed, not
    typed (a job's reported metrics, an estimate's hours), where the caller decides what "outside" means."""
    return value is None or LIMITS[name].allows(value)
