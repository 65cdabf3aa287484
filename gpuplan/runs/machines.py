"""A run's machines in the books: instance rows recorded, closed, stopped, and their shipped outputs."""

from __future__ import annotations

import datetime as dt
import logging
import os
from collections.abc import Iterable
from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.providers.base import Instance as ProviderInstance
from gpuplan.providers.base import InstanceState, Provider
from gpuplan.providers.outputs import node_dir, read_exit_record
from gpuplan.runs.events import EventKind, record_event
from gpuplan.runs.payloads import MachinesData
from gpuplan.store.models import InstanceRow, Run
from gpuplan.store.types import utcnow
from gpuplan.testpoint import pause_point

if TYPE_CHECKING:
    from sqlalchemy.orm import Session


def record_instances(session: Session, run: Run, provider: Provider, instances: Iterable[ProviderInstance], *,
                     default_price: Decimal | None, now: dt.datetime) -> list[InstanceRow]:
    """Add an Instance row per machine the run does not have yet; returns the rows added (each inserted already).

    Price: the provider's, else `default_price` (the placement's), else 0 (unknown: the cost undercounts).
    Billing starts at the provider's launch time, else `now`.

    Each row is inserted under a savepoint: another process may record the same machine between our look at
    `run.instances` and our insert (two adopters at once). The unique index then refuses our row; only that
    insert is undone, the other process's row is read into `run.instances`, and the machine is not in the
    returned list, so the caller records no second event for it. Anything else the caller has pending is
    flushed first and kept.
    """
    from sqlalchemy.exc import IntegrityError

    from gpuplan.store.models import InstanceRow
    from gpuplan.store.savepoint import savepoint

    known = {row.provider_instance_id for row in run.instances}
    added = []
    for inst in instances:
        if inst.instance_id in known:
            continue
        known.add(inst.instance_id)
        price = inst.price_per_hour if inst.price_per_hour is not None else default_price
        row = InstanceRow(
            provider=provider.name, provider_instance_id=inst.instance_id, cloud=inst.cloud or provider.cloud,
            region=inst.region, zone=inst.zone, instance_type=inst.instance_type, gpu=inst.gpu,
            gpu_count=inst.gpu_count, spot=inst.spot, node_rank=inst.node_rank,
            price_per_hour=price if price is not None else Decimal(0),
            min_billed_seconds=provider.min_billed_seconds, state=inst.state,
            launched_at=inst.launched_at or inst.created_at or now)
        try:
            with savepoint(session):
                run.instances.append(row)
                session.flush()
        except IntegrityError:
            if recorded_row(session, run.id, provider.name, inst.instance_id) is None:
                raise  # refused for another reason than "already recorded"
            session.expire(run, ["instances"])  # reload it with the row the other process committed
            continue
        added.append(row)
    return added


def recorded_row(session: Session, run_id: str, provider_name: str, instance_id: str) -> InstanceRow | None:
    """The run's row for the machine, as committed (by this process or another), or None."""
    from sqlalchemy import select

    from gpuplan.store.models import InstanceRow

    return session.scalars(select(InstanceRow).where(
        InstanceRow.run_id == run_id, InstanceRow.provider == provider_name,
        InstanceRow.provider_instance_id == instance_id)).one_or_none()


def close_instance(instance: InstanceRow, state: str, at: dt.datetime | None) -> None:
    """Mark an instance row ended (billing stops at `at`)."""
    instance.state = state
    if instance.terminated_at is None:
        instance.terminated_at = max(at or utcnow(), instance.launched_at)


def fetch_outputs(provider: Provider, run: Run, described: list[ProviderInstance]) -> None:
    """Bring what the machines shipped (log, metrics, exit record) into the run folder, then give each machine
    the exit code its record holds: a cloud learns how a job ended only from what the job itself reported."""
    if not run.run_dir:
        return
    for inst in described:
        try:
            provider.fetch_outputs(inst, run.run_dir)
        except Exception as exc:  # best effort: never fail a watch step (or a status) on a copy
            log.warning("cannot fetch the outputs of %s (%s): %s", run.id, inst.instance_id, exc)
        if inst.exit_code is None:
            record = read_exit_record(run.run_dir, inst.node_rank)
            if record is not None:
                inst.exit_code = int(record["exit_code"])
                if record.get("reason") == "max_hours":
                    inst.state_reason = "max_hours"
                if inst.exit_code and inst.failure_cause is None:
                    inst.failure_cause = _shipped_setup_cause(run.run_dir, inst.node_rank, inst.exit_code)


def _shipped_setup_cause(run_dir: str, rank: int, code: int) -> str | None:
    """"setup failed (exit N)" when the node's shipped log says its `setup:` failed (gpuplan.jobs.setup_step): a
    cloud machine reports only its exit code, the log says which part of the job ended it."""
    from gpuplan.jobs.setup_step import setup_cause

    path = node_dir(run_dir, rank) / "job.log"
    try:
        with open(path, "rb") as fh:
            fh.seek(max(0, fh.seek(0, os.SEEK_END) - 65536))  # the tail, as the local runner reads it
            return setup_cause(code, fh.read().decode(errors="replace"))
    except OSError:
        return None


def stop_instances(session: Session, run: Run, provider: Provider, now: dt.datetime) -> None:
    """Terminate the run's open machines and close their rows at the time they really ended."""
    open_rows = [i for i in run.instances if i.terminated_at is None]
    if not open_rows:
        return
    pause_point("teardown")
    provider.include_regions([i.region for i in open_rows])
    provider.terminate([i.provider_instance_id for i in open_rows])
    ended = {i.instance_id: i for i in provider.describe([i.provider_instance_id for i in open_rows])}
    fetch_outputs(provider, run, list(ended.values()))  # the last log lines and metrics the machines shipped
    for row in open_rows:
        inst = ended.get(row.provider_instance_id)
        if inst is None or inst.state in InstanceState.GONE:
            close_instance(row, inst.state if inst else InstanceState.TERMINATED,
                           (inst.ended_at if inst else None) or now)
        else:
            row.state = inst.state
    record_event(session, run, EventKind.TERMINATED, f"{len(open_rows)} instance(s) terminated",
                 MachinesData(tuple(i.provider_instance_id for i in open_rows)))


log = logging.getLogger(__name__)


SUPERSEDED = "superseded"  # Instance.state of a machine replaced by a relaunch (its cost still counts)


def current_instances(run: Run) -> list[InstanceRow]:
    """The run's instance rows of the current generation (rows replaced by a relaunch are left out)."""
    return [i for i in run.instances if i.state != SUPERSEDED]
