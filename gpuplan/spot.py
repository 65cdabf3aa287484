"""After a spot interruption: relaunch the run from its checkpoint, a bounded number of times, within its budget.

Called by the watch step (gpuplan.watch.refresh_run) when a live run's machine comes back PREEMPTED. A relaunch
needs a checkpoint dir in the spec (otherwise the work is lost and a relaunch would start over, so the run ends
`failed: preempted`), fewer than MAX_RELAUNCHES earlier relaunches, spend below the budget and time below
max_hours, and the spec's secrets in the watcher's environment. The machines of the interrupted generation are
terminated (a multi-node job cannot go on without a node), their rows are marked superseded (the settling of the
run then looks only at the current generation), and the new machines go through the same failover as a launch,
with a new generation number so EC2's idempotency token differs. Every decision is an Event.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from decimal import Decimal
from typing import Any

from gpuplan.providers.base import InstanceState, Provider, ProviderError

log = logging.getLogger(__name__)

MAX_RELAUNCHES = 3
SUPERSEDED = "superseded"  # Instance.state of a machine replaced by a relaunch (its cost still counts)


def current_instances(run: Any) -> list[Any]:
    """The run's instance rows of the current generation (rows replaced by a relaunch are left out)."""
    return [i for i in run.instances if i.state != SUPERSEDED]


def relaunch_count(run: Any) -> int:
    return sum(1 for e in run.events if e.kind == "relaunch")


def why_not_relaunch(run: Any, spec: Any, now: dt.datetime) -> str | None:
    """The reason a preempted run may not be relaunched, or None when it may."""
    from gpuplan.runs import elapsed_hours, run_cost

    if spec.checkpoint is None or not spec.checkpoint.dir:
        return "no checkpoint dir in the spec: a relaunch would start over"
    done = relaunch_count(run)
    if done >= MAX_RELAUNCHES:
        return f"already relaunched {done} time(s) (limit {MAX_RELAUNCHES})"
    if run.budget_usd is not None and run_cost(run, now) >= Decimal(run.budget_usd):
        return f"budget: ${run_cost(run, now):.4f} of ${Decimal(run.budget_usd):.2f} spent"
    hours = elapsed_hours(run, now)
    if run.max_hours is not None and hours is not None and hours >= run.max_hours:
        return f"max_hours: ran {hours:.4g} h of {run.max_hours:g} h"
    return None


def relaunch_after_preemption(session: Any, run: Any, provider: Provider, now: dt.datetime) -> bool:
    """Relaunch `run` if allowed; True when new machines are running (the run stays live)."""
    from gpuplan.jobs.spec import parse_spec
    from gpuplan.launch import LaunchPlan, Offer, build_request, read_secrets, start_instances
    from gpuplan.runs import record_event
    from gpuplan.store.models import Instance as InstanceRow

    spec = parse_spec(run.spec_text, source=f"run {run.id}")
    reason = why_not_relaunch(run, spec, now)
    if reason is None:
        try:
            secrets = read_secrets(spec)
        except Exception as exc:  # a missing secret: the watcher's environment is not the launcher's
            reason = f"cannot relaunch: {exc}"
    if reason is not None:
        record_event(session, run, "relaunch_skipped", reason)
        return False

    current = current_instances(run)
    still_up = [i for i in current if i.terminated_at is None]
    if still_up:  # the other nodes of an interrupted multi-node job
        provider.terminate([i.provider_instance_id for i in still_up])
        from gpuplan.runs import close_instance

        for row in still_up:
            close_instance(row, InstanceState.TERMINATED, now)
    generation = relaunch_count(run) + 1
    price = next((i.price_per_hour for i in current if i.price_per_hour is not None), None)
    offer = Offer(provider=run.provider, cloud=run.cloud or provider.cloud, instance_type=run.instance_type,
                  region=run.region, zone=None, gpu=run.gpu, gpus_per_node=int(run.gpus_per_node or 0),
                  nodes=run.nodes, spot=run.spot, price_per_hour=price)
    plan = LaunchPlan(spec=spec, spec_text=run.spec_text, source_dir=None, offer=offer, estimate=None)
    request = build_request(plan, run.id, run.run_dir or "", secrets)
    request = dataclasses.replace(
        request, env={**request.env, "GPUPLAN_RELAUNCH": str(generation)},
        options={**request.options, "generation": generation})
    try:
        instances = start_instances(provider, request)
    except ProviderError as exc:
        record_event(session, run, "relaunch_failed", str(exc), generation=generation, code=exc.code)
        return False
    for row in current:
        row.state = SUPERSEDED
    for inst in instances:
        run.instances.append(InstanceRow(
            provider=provider.name, provider_instance_id=inst.instance_id, cloud=inst.cloud or provider.cloud,
            region=inst.region, zone=inst.zone, instance_type=inst.instance_type, gpu=inst.gpu,
            gpu_count=inst.gpu_count, spot=inst.spot, node_rank=inst.node_rank,
            price_per_hour=inst.price_per_hour if inst.price_per_hour is not None else (price or Decimal(0)),
            min_billed_seconds=provider.min_billed_seconds, state=inst.state, launched_at=inst.launched_at or now))
    if instances:
        run.zone, run.region = instances[0].zone or run.zone, instances[0].region or run.region
    record_event(session, run, "relaunch", f"spot interruption: relaunch {generation} of at most {MAX_RELAUNCHES} "
                 f"from checkpoint {spec.checkpoint.dir}", generation=generation,
                 instances=[i.instance_id for i in instances])
    return True
