"""`gpuplan report --quoted` (spot quoted vs billed) and `report --bill` (books vs AWS Cost Explorer)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from gpuplan.cli.context import AppContext
from gpuplan.cli.output import emit_json, note, print_table
from gpuplan.errors import UserError


def _money(value: Decimal | None) -> str:
    return "-" if value is None else f"{value:,.2f}"


def show_quoted(app: AppContext, *, since: dt.datetime | None, until: dt.datetime | None, project: str | None,
                clouds: tuple[str, ...] | None, as_json: bool) -> None:
    """Per spot run: quoted at launch vs billed from the spot price history."""
    from gpuplan.books.quoted import quoted_vs_billed

    with app.store.session() as session:
        rows = quoted_vs_billed(session, since=since, until=until, project=project, clouds=clouds)
    if as_json:
        emit_json([r.as_json() for r in rows])
        return
    if not rows:
        note("no spot run billed from a price history yet (a spot run is billed when it settles)")
        return
    print_table(["run", "name", "cloud", "machines", "quoted $", "billed $", "difference $", "source"],
                [[r.run_id, r.name, r.cloud or "-", str(r.machines), _money(r.quoted), _money(r.billed),
                  f"{r.difference:+,.2f}", "; ".join(sorted(r.sources))] for r in rows],
                title="Spot runs: quoted at launch vs billed",
                justify_right=("machines", "quoted $", "billed $", "difference $"))


def show_bill(app: AppContext, *, since: dt.datetime | None, until: dt.datetime | None, unit: str | None,
              project: str | None, now: dt.datetime, as_json: bool, ce: Any = None) -> None:
    """Books vs AWS Cost Explorer per run and period (gpuplan.books.cloud_bill)."""
    from gpuplan.books import cloud_bill

    unit = unit or "month"
    if unit not in cloud_bill.GRANULARITY:
        raise UserError(f"--bill groups by month or day, not {unit}")
    start = (since or now.replace(day=1)).date()
    end = (until.date() if until else now.date() + dt.timedelta(days=1))
    if start >= end:
        raise UserError("--since must be before --until")
    bill = cloud_bill.read_bill(ce, start, end, unit)
    with app.store.session() as session:
        books = cloud_bill.books_by_run(session, start, end, unit, now, project)
    rows = cloud_bill.compare(books, bill)
    if project is not None:
        rows = [r for r in rows if any(key[1] == r.run_id for key in books)]
    if as_json:
        emit_json({"since": start.isoformat(), "until": end.isoformat(), "by": unit,
                   "rows": [r.as_json() for r in rows], "untagged_usd": cloud_bill.untagged_total(bill)})
        return
    print_table(["period", "run", "books $", "bill $", "difference $", "status"],
                [[r.period.isoformat(), r.run_id, _money(r.books), _money(r.bill),
                  "-" if r.difference is None else f"{r.difference:+,.2f}",
                  r.as_json()["status"]] for r in rows],
                title=f"Books vs AWS bill (Cost Explorer, {cloud_bill.METRIC}) {start} to {end}",
                justify_right=("books $", "bill $", "difference $"))
    if any(r.bill is None for r in rows):
        note("'not in yet': Cost Explorer has no cost for that run and period yet (its data lags up to a day)")
    note(f"untagged AWS cost in the window (not started by gpuplan): ${cloud_bill.untagged_total(bill):,.2f}")
