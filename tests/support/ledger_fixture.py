"""A hand-built ledger whose every dollar is worked out by hand in the comments (shared by the books tests).

NOW = 2026-12-10 12:00 UTC.
- r-1 (nlp, alice, aws H100 on-demand $98.32/h): 2026-10-31 22:00 -> 2026-11-01 02:00, 4 h = $393.28,
  split $196.64 October / $196.64 November.
- r-2 (nlp, alice, gcp A100 *spot* $1.10/h, 60 s minimum): a 10 s instance on Nov 15 billed 60 s = $0.018333;
  a 50 s instance 2026-11-30 23:59:30 -> 12-01 00:00:20 billed 60 s = $0.018333, whose 10 s top-up belongs
  to the start: November gets 10 + 30 s = $0.012222, December 20 s = $0.006111.
- r-3 (vision, bob, aws g5.xlarge on-demand $1.006/h): running since 2026-12-01 00:00, 228 h at NOW = $229.368.
- r-4 (no project, local, $0/h, no minimum): 1 h on Nov 20 = $0.
Months: Oct $196.64, Nov $196.670555, Dec $229.374111; total $622.684666.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

from gpuplan.store.db import Store
from gpuplan.store.models import InstanceRow, Run

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 12, 10, 12, tzinfo=UTC)
NOW_TEXT = "2026-12-10T12:00:00Z"

MONTHS = {"2026-10": Decimal("196.64"), "2026-11": Decimal("196.670555"), "2026-12": Decimal("229.374111")}
TOTAL = Decimal("622.684666")
PROJECTS = {"nlp": Decimal("393.316666"), "vision": Decimal("229.368"), "(none)": Decimal("0")}
NOVEMBER = Decimal("196.670555")


def t(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def seed(url: str) -> list[InstanceRow]:
    """Write the ledger into the database at `url`; returns the instance rows (detached)."""
    store = Store.open(url)
    rows: list[InstanceRow] = []
    try:
        with store.session() as s:
            def run(run_id: str, **kw: object) -> Run:
                r = Run(id=run_id, spec_text="", spec_hash="", **kw)
                s.add(r)
                s.flush()
                return r

            def inst(r: Run, price: str, start: dt.datetime, end: dt.datetime | None, *, cloud: str = "aws",
                     gpu: str | None = "H100", itype: str | None = "p5.48xlarge", spot: bool = False,
                     minimum: int = 60) -> None:
                row = InstanceRow(run_id=r.id, provider=cloud, provider_instance_id=f"i-{r.id}-{len(rows)}",
                               cloud=cloud, gpu=gpu, instance_type=itype, spot=spot,
                               price_per_hour=Decimal(price), min_billed_seconds=minimum, launched_at=start,
                               terminated_at=end, state="running" if end is None else "terminated")
                s.add(row)
                rows.append(row)

            r1 = run("r-1", name="pretrain", provider="aws", project="nlp", user="alice", cloud="aws",
                     gpu="H100", state="succeeded", started_at=t(2026, 10, 31, 22), ended_at=t(2026, 11, 1, 2),
                     est_hours=3.2, est_cost_usd=Decimal("314.62"))
            inst(r1, "98.32", t(2026, 10, 31, 22), t(2026, 11, 1, 2))
            r2 = run("r-2", name="sweep", provider="gcp", project="nlp", user="alice", cloud="gcp", gpu="A100",
                     state="failed", started_at=t(2026, 11, 15, 10), ended_at=t(2026, 12, 1, 0, 0, 20))
            inst(r2, "1.10", t(2026, 11, 15, 10), t(2026, 11, 15, 10, 0, 10), cloud="gcp", gpu="A100",
                 itype="a2-highgpu-1g", spot=True)
            inst(r2, "1.10", t(2026, 11, 30, 23, 59, 30), t(2026, 12, 1, 0, 0, 20), cloud="gcp", gpu="A100",
                 itype="a2-highgpu-1g", spot=True)
            r3 = run("r-3", name="finetune", provider="aws", project="vision", user="bob", cloud="aws", gpu="A10G",
                     state="running", started_at=t(2026, 12, 1), est_hours=300.0, est_cost_usd=Decimal("301.80"))
            inst(r3, "1.006", t(2026, 12, 1), None, gpu="A10G", itype="g5.xlarge")
            r4 = run("r-4", name="smoke", provider="local", cloud="local", state="succeeded",
                     started_at=t(2026, 11, 20), ended_at=t(2026, 11, 20, 1), est_hours=1.25,
                     est_cost_usd=Decimal("0"))
            inst(r4, "0", t(2026, 11, 20), t(2026, 11, 20, 1), cloud="local", gpu=None, itype=None, minimum=0)
    finally:
        store.close()
    return rows


def record_run(run_id: str, state: str, *, provider: str = "aws", region: str = "us-east-1") -> None:
    """A bare Run row in the test's database ($GPUPLAN_DB): a run the books know, with no machine recorded."""
    import os

    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        s.add(Run(id=run_id, name="rec", provider=provider, state=state, spec_text="name: rec", spec_hash="x",
                  cloud=provider, region=region))
        s.commit()
    store.close()
