"""Record a run before any cloud call: the Run row (pending) and its `created` event."""

from __future__ import annotations

import datetime as dt
import getpass
import json
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpuplan.errors import UserError
from gpuplan.jobs.spec import JobSpec, spec_hash
from gpuplan.launching.estimate import spec_params
from gpuplan.launching.offer import LaunchPlan
from gpuplan.runs.events import EventKind
from gpuplan.runs.payloads import CreatedData

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.db import Store
    from gpuplan.store.models import Run


def read_secrets(spec: JobSpec, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret values from the launching environment; a missing one is an error naming it (never a value)."""
    environ = os.environ if environ is None else environ
    missing = [name for name in spec.secrets if name not in environ]
    if missing:
        raise UserError(f"secret{'s' if len(missing) > 1 else ''} {', '.join(missing)} not set in the environment "
                        "(secrets are read from the environment at launch)")
    return {name: environ[name] for name in spec.secrets}


def record_run(store: Store, plan: LaunchPlan, *, now: dt.datetime | None = None, schedule_id: int | None = None,
               run_id: str | None = None) -> str:
    """Commit the Run row (state pending) and its `created` event; returns the run id. No provider call here."""
    from gpuplan.store.types import utcnow

    now = now or utcnow()
    run = new_run(plan, now=now, schedule_id=schedule_id, run_id=run_id)
    with store.session() as session:
        add_run(session, run, plan)
    return str(run.id)


def new_run(plan: LaunchPlan, *, now: dt.datetime, schedule_id: int | None = None, run_id: str | None = None) -> Run:
    """The Run row of a launch (state pending), not yet added to a session; a passed deadline is refused."""
    from gpuplan.paths import runs_dir
    from gpuplan.store.models import Run, RunState

    spec, offer, est = plan.spec, plan.offer, plan.estimate
    deadline_at = spec.limits.deadline_at(now)
    if deadline_at is not None and deadline_at <= now:
        raise UserError(f"the deadline {deadline_at.isoformat()} has already passed")
    kwargs: dict[str, Any] = {"id": run_id} if run_id else {}
    run = Run(
        **kwargs, name=spec.name, project=spec.project, user=_user(), provider=offer.provider,
        state=RunState.PENDING, spec_text=plan.spec_text, spec_hash=spec_hash(plan.spec_text), created_at=now,
        cloud=offer.cloud, region=offer.region, zone=offer.zone, instance_type=offer.instance_type, gpu=offer.gpu,
        gpus_per_node=float(offer.gpus_per_node), nodes=offer.nodes, spot=offer.spot,
        params=est.params if est else spec_params(spec),
        total_tokens=spec.workload.total_tokens if spec.workload else None,
        est_hours=est.hours if est else None, est_cost_usd=est.cost_usd if est else None,
        est_tokens_per_s=est.tokens_per_s if est else None,
        estimate_json=json.dumps({"source": est.source, **dict(est.detail)}, default=str) if est else None,
        budget_usd=spec.limits.budget_usd, max_hours=spec.limits.max_hours, deadline_at=deadline_at,
        schedule_id=schedule_id,
    )
    run.run_dir = str(runs_dir() / run.id)
    return run


def add_run(session: Session, run: Run, plan: LaunchPlan) -> None:
    """Add the Run row and its `created` event to `session` (committed with the caller's unit of work)."""
    from gpuplan.runs.events import record_event

    spec, offer, est = plan.spec, plan.offer, plan.estimate
    session.add(run)
    session.flush()
    record_event(session, run, EventKind.CREATED, f"launch of {spec.name} on {offer.provider} recorded",
                 CreatedData(provider=offer.provider, instance_type=offer.instance_type, region=offer.region,
                             nodes=offer.nodes, est_hours=est.hours if est else None))


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None
