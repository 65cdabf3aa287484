"""`gpuplan report`: spend from the ledger shaped into a table, CSV, JSON, Markdown or HTML (pandas inside).

The dollars come from gpuplan.books.ledger (SQL does the heavy aggregation, edge-straddling instances are cut
exactly); this module only decides the grouping, shapes the result with pandas and renders it. Money stays
Decimal end to end: the TOTAL line is the Decimal sum of the rows, which is the sum of the instance rows.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpuplan.books import ledger, periods
from gpuplan.errors import UserError

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

BY_CHOICES = (*periods.TIME_UNITS, *ledger.KEY_COLUMNS)
FORMATS = ("table", "csv", "json", "markdown", "html")


@dataclass(frozen=True)
class ReportRequest:
    """What the user asked for: window [since, until), grouping, filters and the clock."""

    now: dt.datetime
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    unit: str | None = None
    key: str | None = None
    project: str | None = None
    clouds: tuple[str, ...] | None = None

    @property
    def scope(self) -> ledger.Scope:
        return ledger.Scope(self.project, self.clouds)


def parse_by(values: tuple[str, ...]) -> tuple[str | None, str | None]:
    """`--by` may name one time unit and any keys (`--by month --by project`, `--by gpu,cloud`).

    Several keys group by their combination (a compound key "gpu+cloud", one column each). Without --by a
    report is by month.
    """
    unit = None
    keys: list[str] = []
    for value in (v.strip() for raw in values for v in raw.split(",") if v.strip()):
        if value in periods.TIME_UNITS:
            if unit is not None:
                raise UserError(f"--by: give at most one of {', '.join(periods.TIME_UNITS)}")
            unit = value
        elif value in ledger.KEY_COLUMNS:
            if value in keys:
                raise UserError(f"--by: {value} is given twice")
            keys.append(value)
        else:
            raise UserError(f"--by: unknown grouping {value!r} (choose from {', '.join(BY_CHOICES)})")
    if unit is None and not keys:
        unit = "month"
    return unit, ledger.KEY_JOIN.join(keys) or None


def build(conn: Any, request: ReportRequest) -> ledger.Spend:
    if request.since is not None and request.until is not None and request.since >= request.until:
        raise UserError("--since must be before --until")
    return ledger.spend(conn, now=request.now, since=request.since, until=request.until, unit=request.unit,
                        key=request.key, scope=request.scope)


def columns(request: ReportRequest) -> list[str]:
    return [c for c in (request.unit,) if c] + ledger.key_names(request.key) + ["instances", "billed_hours",
                                                                               "cost_usd"]


def records(result: ledger.Spend, request: ReportRequest) -> list[list[Any]]:
    """One list per group in `columns` order: labels, instance count, billed hours and cost (exact Decimals)."""
    out = []
    for row in result.rows:
        period = periods.period_label(row.period, request.unit)
        labels = [period] if request.unit else []
        labels += ledger.key_values(request.key, row.key)
        out.append([*labels, row.instances, (row.billed_seconds / 3600).quantize(Decimal("0.000001")), row.cost])
    return out


def to_json(result: ledger.Spend, request: ReportRequest) -> dict[str, Any]:
    """Stable keys: window, grouping, rows (with `period` start and label, `key`), totals."""
    return {
        "since": request.since,
        "until": request.until,
        "now": request.now,
        "by": [b for b in (request.unit,) if b] + ledger.key_names(request.key),
        "filters": {"project": request.project, "clouds": list(request.clouds) if request.clouds else None},
        "rows": [
            {
                "period": row.period,
                "period_label": periods.period_label(row.period, request.unit),
                "key": " / ".join(ledger.key_values(request.key, row.key)) if request.key else None,
                "keys": dict(zip(ledger.key_names(request.key), ledger.key_values(request.key, row.key),
                                 strict=True)),
                "instances": row.instances,
                "billed_hours": row.billed_seconds / 3600,
                "cost_usd": row.cost,
            }
            for row in result.rows
        ],
        "total": {"cost_usd": result.total_cost, "billed_hours": result.total_seconds / 3600,
                  "instances": result.instances},
    }


def render(result: ledger.Spend, request: ReportRequest, fmt: str) -> str:
    """CSV, Markdown or HTML text (the rich table and JSON are printed by the command).

    Only HTML goes through pandas: importing pandas costs more than the whole query on a big ledger, and the
    other formats are a few lines of text.
    """
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(columns(request))
        writer.writerows([*r[:-2], f"{r[-2]:.6f}", f"{r[-1]:.6f}"] for r in records(result, request))
        return out.getvalue()
    head, rows = table_rows(result, request)
    if fmt == "markdown":
        numeric = ("instances", "billed_hours", "cost_usd")
        lines = ["| " + " | ".join(head) + " |",
                 "| " + " | ".join("---:" if c in numeric else "---" for c in head) + " |"]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines) + "\n"
    if fmt == "html":
        import pandas as pd

        shown = pd.DataFrame(rows, columns=head)
        return str(shown.to_html(index=False, border=0, classes="gpuplan-report", justify="left")) + "\n"
    raise ValueError(fmt)


def table_rows(result: ledger.Spend, request: ReportRequest) -> tuple[list[str], list[list[str]]]:
    """Money as $1,234.56 and hours with 2 decimals, plus a TOTAL line (the sum of the exact Decimals)."""
    head = columns(request)
    rows = [[*map(str, r[:-3]), str(r[-3]), _hours_cell(r[-2]), f"${r[-1]:,.2f}"] for r in records(result, request)]
    labels = len(head) - 3  # there is always at least one grouping column (--by defaults to month)
    total = ["TOTAL", *[""] * (labels - 1), str(result.instances), _hours_cell(result.total_seconds / 3600),
             f"${result.total_cost:,.2f}"]
    return head, [*rows, total]


def _hours_cell(hours: Decimal) -> str:
    """Billed hours, in hours, whatever the size: `1,234.50`, and four decimals under an hour (`0.0078` for
    28 s), so the column reads in one unit and sums by eye; CSV and JSON keep the exact number."""
    if hours >= 1 or hours == 0:
        return f"{hours:,.2f}"
    return f"{hours:.4f}" if hours >= Decimal("0.0001") else "<0.0001"


def auto_unit(span: tuple[dt.datetime, dt.datetime]) -> str:
    """A time unit that gives a readable number of bars for a span: day up to ~6 weeks, week to ~6 months."""
    start, end = span
    days = (end - start).days
    if days <= 45:
        return "day"
    if days <= 190:
        return "week"
    return "month"


def data_span(conn: Any, request: ReportRequest) -> tuple[dt.datetime, dt.datetime]:
    """The window to plot: --since/--until, or the first launch to now."""
    from sqlalchemy import func, select

    from gpuplan.store.models import InstanceRow

    start = request.since
    if start is None:
        start = conn.execute(select(func.min(InstanceRow.launched_at))).scalar() or request.now
    end = request.until or request.now
    return start, max(end, start)


def plot_data(conn: Any, request: ReportRequest) -> tuple[list[dt.datetime], dict[str, list[float]], str]:
    """Buckets (every one in the window, gaps included), spend per key per bucket, and the time unit."""
    start, end = data_span(conn, request)
    unit = request.unit or auto_unit((start, end))
    result = ledger.spend(conn, now=request.now, since=request.since, until=request.until, unit=unit,
                          key=request.key, scope=request.scope)
    first = periods.floor(start, unit)
    buckets = [first, *periods.edges_between(first, end, unit)]
    for row in result.rows:  # a bucket beyond the span (a launch after --now) still gets its bar
        if row.period is not None and row.period not in buckets:
            buckets.append(row.period)
    buckets.sort()
    import pandas as pd

    # Pivot with pandas: one column per key, one row per bucket, gaps filled with zero dollars.
    df = pd.DataFrame([(row.period, " / ".join(ledger.key_values(request.key, row.key)) if request.key else "spend",
                        float(row.cost))
                       for row in result.rows], columns=["period", "series", "cost"])
    table = df.pivot_table(index="period", columns="series", values="cost", aggfunc="sum", fill_value=0.0)
    table = table.reindex(buckets, fill_value=0.0)
    ranked = sorted(table.columns, key=lambda name: -float(table[name].sum()))  # biggest at the bottom
    series = {str(name): [float(v) for v in table[name]] for name in ranked}
    return buckets, series, unit


def matching_budgets(session: Session, request: ReportRequest) -> list[Any]:
    """Budgets whose scope is the report's scope (same project filter, same clouds): their line is meaningful."""
    from gpuplan.books import budgets

    wanted = sorted(request.clouds) if request.clouds else None
    return [b for b in budgets.list_budgets(session)
            if b.project == request.project and budgets.parse_clouds(b.clouds) == wanted]
