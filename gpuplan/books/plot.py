"""`report --plot`: spend over time as stacked bars (one colour per --by key) with the budget line.

matplotlib (the `plot` extra) is imported inside, with the Agg backend, so it works on a headless machine and
costs nothing unless a plot is asked for. The figure has a fixed size (PLOT_WIDTH x PLOT_HEIGHT pixels) so the
PNG is predictable.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from gpuplan.books import periods
from gpuplan.errors import UserError

PLOT_WIDTH, PLOT_HEIGHT, PLOT_DPI = 1200, 600, 100
MAX_SERIES = 8  # beyond this many keys, the smallest are folded into "other"


@dataclass(frozen=True)
class BudgetLine:
    """A budget drawn on the plot: per-bucket allowance for month/week budgets, a cumulative cap for total."""

    name: str
    amount_usd: Decimal
    period: str


def allowance(line: BudgetLine, bucket_start: dt.datetime, unit: str) -> float:
    """The share of a month/week budget that one bucket may spend (the budget spread evenly over its period)."""
    bucket_end = periods.next_start(bucket_start, unit)
    period_start = periods.floor(bucket_start, line.period)
    period_end = periods.next_start(period_start, line.period)
    share = (bucket_end - bucket_start).total_seconds() / (period_end - period_start).total_seconds()
    return float(line.amount_usd) * share


def plot_spend(path: Path, buckets: list[dt.datetime], series: dict[str, list[float]], unit: str,
               budgets: list[BudgetLine], title: str) -> Path:
    """Write the PNG. `series` maps each key to its spend per bucket (aligned with `buckets`)."""
    try:
        import matplotlib
    except ImportError:
        raise UserError("--plot needs matplotlib: pip install 'gpuplan[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    series = _fold(series)
    fig, ax = plt.subplots(figsize=(PLOT_WIDTH / PLOT_DPI, PLOT_HEIGHT / PLOT_DPI), dpi=PLOT_DPI)
    try:
        x = list(range(len(buckets)))
        bottom = [0.0] * len(buckets)
        for name, values in series.items():
            ax.bar(x, values, bottom=bottom, label=name, width=0.8)
            bottom = [b + v for b, v in zip(bottom, values, strict=True)]
        for line in budgets:
            if line.period == "total":
                cumulative, running = [], 0.0
                for v in bottom:
                    running += v
                    cumulative.append(running)
                twin = ax.twinx()
                twin.plot(x, cumulative, color="black", marker=".", label="cumulative spend")
                twin.axhline(float(line.amount_usd), color="red", linestyle="--",
                             label=budget_label(line))
                twin.set_ylabel("cumulative USD")
                twin.set_ylim(0, max(float(line.amount_usd), running) * 1.1)
                twin.legend(loc="lower left", bbox_to_anchor=(1.08, 0.0), fontsize="small")
            else:
                if not buckets:
                    continue
                steps = [allowance(line, b, unit) for b in buckets]
                # One flat segment across each bar (bars are centred on integers, 0.8 wide).
                ax.step([i - 0.5 for i in range(len(x) + 1)], [*steps, steps[-1]], where="post", color="red",
                        linestyle="--", label=budget_label(line))
        labels = [periods.period_label(b, unit, short=True) for b in buckets]
        stride = max(1, -(-len(labels) // 24))
        ax.set_xticks(x[::stride], labels[::stride], rotation=45, ha="right", fontsize="small")
        ax.set_ylabel(f"USD per {unit}")
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        top = max([*bottom, *(allowance(b, k, unit) for b in budgets if b.period != "total" for k in buckets), 0.0])
        ax.set_ylim(0, top * 1.1 if top > 0 else 1.0)
        if series or budgets:
            ax.legend(loc="upper left", bbox_to_anchor=(1.08, 1.0), fontsize="small")
        fig.subplots_adjust(bottom=0.2, right=0.74)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(path, format="png", dpi=PLOT_DPI)
        except OSError as exc:
            # A path the user chose that cannot be written is their input, not a crash.
            raise UserError(f"--plot: cannot write {path}: {exc.strerror or exc}") from exc
    finally:
        plt.close(fig)
    return path





def _fold(series: dict[str, list[float]]) -> dict[str, list[float]]:
    """Keep the MAX_SERIES - 1 biggest keys and sum the rest into `other`, so the legend stays readable."""
    if len(series) <= MAX_SERIES:
        return series
    ranked = sorted(series, key=lambda k: -sum(series[k]))
    keep = {k: series[k] for k in ranked[: MAX_SERIES - 1]}
    rest = [series[k] for k in ranked[MAX_SERIES - 1:]]
    keep["other"] = [sum(vals) for vals in zip(*rest, strict=True)]
    return keep


def budget_label(line: BudgetLine) -> str:
    """The legend entry of a budget line with its real amount: `$0.05/month`, not `$0/month` (cents below $100,
    whole dollars above, as the CLI shows money)."""
    amount = Decimal(line.amount_usd)
    shown = f"${amount:,.2f}" if amount < 100 else f"${amount:,.0f}"
    per = " total" if line.period == "total" else f"/{line.period}"
    return f"budget {line.name} ({shown}{per})"
