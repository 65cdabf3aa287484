"""Reserve a launch's most possible spend against its budgets, in the one transaction that records the run.

Without this, each launch checked the budgets on its own and concurrent launches each saw the money the others
were about to spend as free: three $7 jobs under a $20 budget all passed the gate and spent $33. Now the gate,
the machine fail-safe and the Run row are one unit of work under a lock every launch takes:

- SQLite: `BEGIN IMMEDIATE` takes the database's write lock before the first read, so a second launch waits
  (busy timeout) until the first has committed its run and its reservation, then reads them
  (https://www.sqlite.org/lang_transaction.html, "IMMEDIATE causes the database connection to start a new
  write immediately, without waiting for a write statement").
- PostgreSQL: `SELECT ... FOR UPDATE` on every budget row (in id order, so two launches cannot deadlock); a
  second launch blocks on the first budget row until the first commits, and its later statements, under READ
  COMMITTED, see the committed run (https://www.postgresql.org/docs/current/explicit-locking.html#LOCKING-ROWS).

Inside the lock: the budget gate (the estimate must fit in what is free: amount - spent - reserved), the fail-safe
(the tightest of the run's caps, a covering budget's cap being what is free of it), and the reservation: the
fail-safe hours x price x nodes (at least the provider's minimum billing), stored on the run
(`runs.reserved_usd`). The machines' own timer is then worked out from that reservation
(gpuplan.launching.failsafe_store.run_inputs), so what the machines can spend is exactly what was reserved.
A refused launch rolls back: nothing is recorded. A run's reservation stops counting once the run ended
(gpuplan.books.budgets.reserved: only live runs hold one), which releases what it did not spend.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal
from typing import TYPE_CHECKING

from gpuplan.books.budgets import Violation, gate_launch, record_override
from gpuplan.jobs.processes import start_ticks
from gpuplan.launching.failsafe import FailSafe
from gpuplan.launching.failsafe_store import check, for_plan
from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.record import add_run, new_run
from gpuplan.runs.events import EventKind, record_event
from gpuplan.store.types import utcnow

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.db import Store

MICRO = Decimal("0.000001")


@dataclass(frozen=True)
class Reservation:
    """A recorded run and what it reserved (None: no cap bounds its spend, or its price is unknown)."""

    run_id: str
    reserved_usd: Decimal | None
    failsafe: FailSafe
    overridden: tuple[Violation, ...] = ()


def lock_budgets(session: Session) -> None:
    """Take the launch lock for the rest of `session`'s transaction (see the module docstring).

    On SQLite this must be the session's first statement: pysqlite opens its own (deferred) transaction only
    before a write, so an explicit BEGIN IMMEDIATE is the transaction the session then commits."""
    from gpuplan.store.models import Budget

    connection = session.connection()
    if connection.dialect.name == "sqlite":
        connection.exec_driver_sql("BEGIN IMMEDIATE")
    else:
        session.query(Budget.id).order_by(Budget.id).with_for_update().all()


def reservation_usd(fs: FailSafe, min_billed_seconds: int) -> Decimal | None:
    """The most machines under this fail-safe can spend: its hours (at least the minimum billing) x burn rate."""
    burn = fs.burn_usd_per_hour
    if fs.hours is None or burn is None:
        return None
    hours = max(Decimal(repr(fs.hours)), Decimal(min_billed_seconds) / Decimal(3600))
    # To the micro-dollar the books keep: the hours are a float (a budget's $30 left at $3600/h comes back as
    # 29.99999999999 h-dollars), and the nearest micro-dollar is the amount the cap meant.
    return (hours * burn).quantize(MICRO, rounding=ROUND_HALF_EVEN)


def reserve_and_record(store: Store, plan: LaunchPlan, *, min_billed_seconds: int, force: bool,
                       schedule_id: int | None = None) -> Reservation:
    """Gate, fail-safe and Run row in one locked transaction; BudgetRefused / UserError (exit 2) record nothing.

    The launcher's host, pid and start time go on the row, so a run its launcher left behind (killed before the
    launch plan was written) is known to be orphaned at once (gpuplan.supervise.adopt.launcher_alive)."""
    with store.session() as session:
        lock_budgets(session)
        now = utcnow()
        overridden = gate_launch(session, project=plan.spec.project, cloud=plan.offer.cloud,
                                 est_cost_usd=plan.estimate.cost_usd if plan.estimate is not None else None,
                                 now=now, force=force)
        fs = check(for_plan(session, plan, min_billed_seconds=min_billed_seconds, now=now, force=force))
        run = new_run(plan, now=now, schedule_id=schedule_id)
        run.reserved_usd = reservation_usd(fs, min_billed_seconds)
        run.launcher_host, run.launcher_pid, run.launcher_started = launcher_identity()
        add_run(session, run, plan)
        if overridden:
            record_override(session, overridden, run.id, now)
        if plan.cpu_fallback:
            record_event(session, run, EventKind.CPU_FALLBACK, plan.cpu_fallback)
        run_id = str(run.id)
        reserved = run.reserved_usd
    return Reservation(run_id, reserved, fs, tuple(overridden))


def launcher_identity() -> tuple[str, int, int | None]:
    """This process as a run's launcher: host name, pid, start time in clock ticks since boot."""
    return socket.gethostname(), os.getpid(), start_ticks(os.getpid())
