"""Quoted vs billed: what each spot run was quoted at launch and what it cost at the prices the cloud charged.

The billed figures are the `spot_billed` events gpuplan.supervise.spot_bill writes when a spot run settles (one per
machine, with the quoted and the billed cost); the instance rows already carry the billed price, so the spend
report is the billed one and this is the difference.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpuplan.runs.events import EventKind, payload
from gpuplan.runs.payloads import SpotBilledData
from gpuplan.store.models import Event, Run


@dataclass
class QuotedBilled:
    """One run's spot machines: quoted at launch, billed from the price history, and the sources used."""

    run_id: str
    name: str
    cloud: str | None
    machines: int = 0
    quoted: Decimal = Decimal(0)
    billed: Decimal = Decimal(0)
    sources: set[str] = field(default_factory=set)

    @property
    def difference(self) -> Decimal:
        return self.billed - self.quoted

    def as_json(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "name": self.name, "cloud": self.cloud, "machines": self.machines,
                "quoted_usd": self.quoted, "billed_usd": self.billed, "difference_usd": self.difference,
                "sources": sorted(self.sources)}


def quoted_vs_billed(session: Session, *, since: dt.datetime | None = None, until: dt.datetime | None = None,
                     project: str | None = None, clouds: tuple[str, ...] | None = None) -> list[QuotedBilled]:
    """Per run with billed spot machines (runs created in [since, until), of `project` and `clouds`)."""
    query = (select(Run, Event).join(Event, Event.run_id == Run.id)
             .where(Event.kind == EventKind.SPOT_BILLED).order_by(Run.created_at, Run.id, Event.id))
    if since is not None:
        query = query.where(Run.created_at >= since)
    if until is not None:
        query = query.where(Run.created_at < until)
    if project is not None:
        query = query.where(Run.project == project)
    if clouds:
        query = query.where(Run.cloud.in_(clouds))
    out: dict[str, QuotedBilled] = {}
    for run, event in session.execute(query).all():
        data = payload(event, SpotBilledData) or SpotBilledData()
        row = out.setdefault(run.id, QuotedBilled(run.id, run.name, run.cloud))
        row.machines += 1
        row.quoted += data.quoted_cost_usd or Decimal(0)
        row.billed += data.billed_cost_usd or Decimal(0)
        if data.source:
            row.sources.add(data.source)
    return list(out.values())


def summary_line(rows: list[QuotedBilled]) -> str | None:
    """One line for the spend report: the spot difference in its window, or None when there is none."""
    if not rows:
        return None
    quoted = sum((r.quoted for r in rows), Decimal(0))
    billed = sum((r.billed for r in rows), Decimal(0))
    machines = sum(r.machines for r in rows)
    return (f"spot as billed: {machines} machine(s) of {len(rows)} run(s) quoted ${quoted:,.2f} at launch, billed "
            f"${billed:,.2f} at the spot price history ({billed - quoted:+,.2f}); `gpuplan report --quoted` lists them")
