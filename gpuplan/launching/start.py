"""Start a recorded run's machines and record what came back: the one step of a launch a crash can split.

The crash window, told once here (other modules point to it): a launch is Run row committed -> `launch_plan`
event committed (where machines may appear, and the fail-safe they will carry) -> provider call -> Instance rows
committed. The provider call and the commit after it cannot be one transaction, so a process killed in between
leaves machines the rows do not know. What makes that recoverable is written before the call: the run id (every
machine carries it as a tag and as the provider's idempotency token) and the `launch_plan` event (the provider,
every region/zone/instance type the failover may try and its price there, and the host and pid of the launching
process). A later `gpuplan stop`, `status`/`watch` or `reconcile` reads that event and adopts the machines
(gpuplan.supervise.adopt), so no machine is ever unknown; a spot relaunch keeps the same promise because it goes
through the very
same step (`start_machines` with a `Generation`: gpuplan.supervise.relaunch).

Recording is idempotent: a machine already recorded for the run (adopted by another process meanwhile) is not
recorded twice, even when two processes record it at the same instant (the unique index on the machine's id in
its run refuses the second row; gpuplan.runs.machines.record_instances); and if the run was stopped while its
machines were starting, they are terminated at once.

One start path: a launch and a relaunch both call `start_machines` (request -> placements -> fail-safe -> launch
plan -> provider call with every failover attempt recorded -> machine rows -> the run's zone, region and instance
type -> the fail-safe the machines carry). A relaunch is a start with a `Generation`: its number (in the launch
plan and EC2's idempotency token), the env the job reads (GPUPLAN_RELAUNCH) and the rows it supersedes. The
single provider call lives in `start_instances`: directly where the provider has one place, else through
failover over zones, regions and the catalog's next offers. Secrets travel only inside the LaunchRequest; the Run
row stores the spec text, which names secrets but never holds their values.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.errors import UserError
from gpuplan.launching.code_upload import ship_code
from gpuplan.launching.failover import AttemptCallback, Placement
from gpuplan.launching.launch_plan import add_launch_plan, placements_for_launch
from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.run_storage import storage_options
from gpuplan.providers.base import Instance, LaunchRequest, Provider
from gpuplan.runs.events import EventKind
from gpuplan.runs.machines import SUPERSEDED, record_instances
from gpuplan.runs.payloads import LaunchFailedData, MachinesData
from gpuplan.testpoint import pause_point

if TYPE_CHECKING:
    from sqlalchemy.orm import Session

    from gpuplan.store.db import Store
    from gpuplan.store.models import InstanceRow, Run

from gpuplan.launching.failover import Attempt
from gpuplan.providers.base import ProviderError


def build_request(plan: LaunchPlan, run_id: str, run_dir: str, secrets: Mapping[str, str]) -> LaunchRequest:
    """The provider's view of the run (secrets included: it must never be logged or stored).

    Its max_hours is the spec's; the machines get the fail-safe instead (the tightest of every cap), set by
    gpuplan.launching.failsafe_store.PlacedFailSafe.request once the placements are known.
    """
    spec, offer = plan.spec, plan.offer
    labels = {str(k): str(v) for k, v in spec.labels.items()}
    return LaunchRequest(
        run_id=run_id, name=spec.name, command=spec.shell_script, run_dir=run_dir, project=spec.project,
        instance_type=offer.instance_type, region=offer.region, zones=(offer.zone,) if offer.zone else (),
        gpu=offer.gpu, gpus_per_node=offer.gpus_per_node, nodes=offer.nodes, spot=offer.spot,
        price_per_hour=offer.price_per_hour, max_hours=spec.limits.max_hours, image=spec.image,
        runtime=spec.runtime, workdir=spec.workdir, env=dict(spec.env), secrets=dict(secrets), labels=labels,
        options={"argv": spec.argv, "source_dir": plan.source_dir,
                 "checkpoint_dir": spec.checkpoint.dir if spec.checkpoint else None,
                 **storage_options(spec, run_id, offer.spot),
                 "regions": list(spec.resources.regions), "zones": list(spec.resources.zones),
                 "gpu_candidates": list(spec.resources.gpu_candidates),
                 "max_price_per_hour": spec.resources.max_price_per_hour,
                 "larger_machines": spec.resources.larger_machines,
                 "image_archs": sorted(plan.image_arch.catalog_archs) if plan.image_arch else None},
    )


def start_instances(provider: Provider, request: LaunchRequest, on_attempt: AttemptCallback | None = None, *,
                    placements: Sequence[Placement] | None = None) -> list[Instance]:
    """The one provider call that starts machines: local directly; every other provider through failover over
    zones, regions and the catalog's next offers (gpuplan.launching.placements), each attempt reported to `on_attempt`.
    `placements`: the ones already recorded in the run's `launch_plan` event (gpuplan.launching.start)."""
    if not provider.tries_placements:
        return provider.launch(request)
    from gpuplan.launching.placements import start_with_failover

    return start_with_failover(provider, request, on_attempt=on_attempt, placements=placements).instances


@dataclass(frozen=True)
class Generation:
    """Which start of a run this is: 0 the launch, N the Nth spot relaunch. A relaunch's number goes into its
    launch plan and the provider's idempotency token, its job reads it as GPUPLAN_RELAUNCH, and the machines of
    the interrupted generation (`superseded`) are marked so once the new ones are recorded."""

    number: int = 0
    superseded: Sequence[InstanceRow] = field(default_factory=tuple)

    def apply(self, request: LaunchRequest) -> LaunchRequest:
        if not self.number:
            return request
        return dataclasses.replace(request, env={**request.env, "GPUPLAN_RELAUNCH": str(self.number)},
                                   options={**request.options, "generation": self.number})

    @property
    def recorded(self) -> int | None:
        """The generation the launch plan, attempt and fail-safe events of this start carry (None: the launch)."""
        return self.number or None


class FailSafeRefused(UserError):
    """No time is left under the run's caps to start machines: nothing was started (the `failsafe` event says
    which cap)."""


def start_machines(session: Session, run: Run, provider: Provider, request: LaunchRequest, *,
                   price: Decimal | None, now: dt.datetime, generation: Generation = Generation(),
                   before_call: Callable[[LaunchRequest], None] | None = None) -> list[Instance]:
    """The one start path of a recorded run (a launch, or a relaunch with its `generation`): placements ->
    fail-safe -> launch plan (committed before the provider call: the crash window, above) -> the provider call,
    each failover attempt recorded as it happens -> machine rows (the superseded ones marked) -> the run's zone,
    region and instance type (failover may have moved it) -> the fail-safe the machines carry.

    `before_call(request)` runs once the fail-safe is set, before the plan is recorded (a launch ships its code).
    Raises FailSafeRefused (nothing started; the refusing `failsafe` event added) and ProviderError (the caller
    records the failure its way). The caller commits what follows.
    """
    from gpuplan.launching import failsafe_store
    from gpuplan.runs.events import record_event

    placements = placements_for_launch(provider, request)
    placed = failsafe_store.placed(failsafe_store.run_inputs(
        session, run, price_per_hour=price, nodes=request.nodes, min_billed_seconds=provider.min_billed_seconds,
        now=now), placements)
    if placed.refused:
        failsafe_store.record_failsafe(session, run, placed.chosen, generation.recorded)
        raise FailSafeRefused(failsafe_store.refusal(placed.chosen))
    request = generation.apply(placed.request(request))
    if before_call is not None:
        before_call(request)
    add_launch_plan(session, run, provider, placed.placements, placed, generation.recorded)
    session.commit()
    pause_point("relaunch_planned" if generation.number else "recorded")

    def on_attempt(attempt: Attempt) -> None:
        p = attempt.placement
        record_event(session, run, EventKind.LAUNCH_ATTEMPT,
                     f"attempt {attempt.number}: {p.provider} {p.where} {p.instance_type or ''}: "
                     f"{attempt.outcome}" + (f" ({attempt.code})" if attempt.code else "")
                     + (f"; blocks {attempt.blocked}" if attempt.blocked else ""),
                     attempt.as_payload(generation.recorded))
        session.commit()

    instances = start_instances(provider, request, on_attempt, placements=placed.placements)
    pause_point("relaunched" if generation.number else "launched")
    from gpuplan.store.types import utcnow

    try:
        session.refresh(run)  # another process may have stopped the run, or adopted its machines, meanwhile
        for row in generation.superseded:
            row.state = SUPERSEDED
        record_instances(session, run, provider, instances, default_price=price, now=utcnow())
        if instances:  # failover may have moved the run to another zone, region or instance type
            run.zone = instances[0].zone or run.zone
            run.region = instances[0].region or run.region
            run.instance_type = instances[0].instance_type or run.instance_type
        started_at = next((i.price_per_hour for i in instances if i.price_per_hour is not None), price)
        failsafe_store.record_failsafe(session, run, placed.started(started_at), generation.recorded)
        session.flush()  # a full disk shows here, while the machines can still be ended (below)
    except Exception as exc:
        _end_unrecorded(provider, instances, exc)
        raise
    return instances


def launch_recorded_run(store: Store, run_id: str, plan: LaunchPlan, provider: Provider,
                        secrets: Mapping[str, str]) -> list[Instance]:
    """Start an already recorded run: provisioning -> `start_machines` -> launched, running.

    The machines' own timer is the fail-safe (gpuplan.launching.failsafe) worked out for each failover placement
    at its own price; a cap with no time left fails the run before any provider call (UserError), and placements
    too dear to leave any time are not tried. A provider error marks the run failed with the provider's
    (secret-free) message and is raised again. A run stopped while this was starting its machines gets them
    terminated here, so a stop during a launch never leaves one running.
    """
    from gpuplan.runs.events import record_event
    from gpuplan.runs.records import set_state
    from gpuplan.store.models import Run, RunState
    from gpuplan.store.types import utcnow

    instances: list[Instance] = []
    try:
        with store.session() as session:
            run = session.get(Run, run_id)
            assert run is not None, run_id
            set_state(session, run, RunState.PROVISIONING)
            record_event(session, run, EventKind.LAUNCHING,
                         f"asking {provider.name} for {plan.offer.nodes} node(s)")
            session.commit()
            request = build_request(plan, run_id, run.run_dir or "", secrets)
            try:
                instances = start_machines(session, run, provider, request, price=plan.offer.price_per_hour,
                                           now=utcnow(),
                                           before_call=lambda placed: ship_code(plan, placed, provider))
            except FailSafeRefused as exc:
                set_state(session, run, RunState.FAILED, str(exc))
                session.commit()
                raise
            except ProviderError as exc:
                record_event(session, run, EventKind.LAUNCH_FAILED, str(exc),
                             LaunchFailedData(error=type(exc).__name__, code=exc.code))
                set_state(session, run, RunState.FAILED, f"launch failed: {exc}")
                session.commit()
                raise
            now = utcnow()
            record_event(session, run, EventKind.LAUNCHED, f"{len(instances)} instance(s) started",
                         MachinesData(tuple(i.instance_id for i in instances)))
            set_state(session, run, RunState.RUNNING, at=min((i.launched_at for i in instances if i.launched_at),
                                                             default=now))
            if run.state in RunState.FINAL and any(row.terminated_at is None for row in run.instances):
                session.commit()
                from gpuplan.runs.machines import stop_instances

                stop_instances(session, run, provider, utcnow())
    except Exception as exc:
        if instances:  # started, and the books could not take them (the commit above failed)
            _end_unrecorded(provider, instances, exc)
        raise
    return instances


def _end_unrecorded(provider: Provider, instances: Sequence[Instance], exc: Exception) -> None:
    """The machines started but the books could not record them (a full disk, a database gone): a machine the
    books do not hold must not run on, so they are terminated now. The run keeps its launch plan, so the next
    `status`/`reconcile` adopts them, ended, and bills the seconds they ran (gpuplan.supervise.adopt)."""
    import logging

    try:
        provider.terminate([i.instance_id for i in instances])
    except Exception as stop_exc:  # the original error is the one to report; say this one too
        logging.getLogger(__name__).error("could not terminate the machines the books could not record (%s): %s",
                                          exc, stop_exc)
        return
    add_note = getattr(exc, "add_note", None)
    if add_note is not None:
        add_note("the machines that had started were terminated")
