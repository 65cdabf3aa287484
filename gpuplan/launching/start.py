"""Start a recorded run's machines and record what came back: the one step of a launch a crash can split.

The crash window, told once here (other modules point to it): a launch is Run row committed -> `launch_plan`
event committed (where machines may appear, and the fail-safe they will carry) -> provider call -> Instance rows
committed. The provider call and the commit after it cannot be one transaction, so a process killed in between
leaves machines the rows do not know. What makes that recoverable is written before the call: the run id (every
machine carries it as a tag and as the provider's idempotency token) and the `launch_plan` event (the provider,
every region/zone/instance type the failover may try and its price there, and the host and pid of the launching
process). A later `gpuplan stop`, `status`/`watch` or `reconcile` reads that event and adopts the machines
(gpuplan.supervise.adopt), so no machine is ever unknown; a spot relaunch keeps the same promise with its own
plan (gpuplan.supervise.relaunch).

Recording is idempotent: a machine already recorded for the run (adopted by another process meanwhile) is not
recorded twice, even when two processes record it at the same instant (the unique index on the machine's id in
its run refuses the second row; gpuplan.runs.machines.record_instances); and if the run was stopped while its
machines were starting, they are terminated at once.

The single provider call lives in `start_instances`: directly where the provider has one place, else through
failover over zones, regions and the catalog's next offers. Secrets travel only inside the LaunchRequest; the Run
row stores the spec text, which names secrets but never holds their values.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.launching.code_upload import ship_code
from gpuplan.launching.failover import AttemptCallback, Placement
from gpuplan.launching.launch_plan import placements_for_launch, record_launch_plan
from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.run_storage import storage_options
from gpuplan.providers.base import Instance, LaunchRequest, Provider
from gpuplan.runs.events import EventKind
from gpuplan.runs.machines import record_instances
from gpuplan.testpoint import pause_point

if TYPE_CHECKING:
    from gpuplan.launching.failsafe_store import PlacedFailSafe
    from gpuplan.store.db import Store
from collections.abc import Mapping

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
                 **storage_options(spec, run_id, offer.cloud, offer.spot),
                 "regions": list(spec.resources.regions), "zones": list(spec.resources.zones),
                 "gpu_candidates": list(spec.resources.gpu_candidates),
                 "max_price_per_hour": spec.resources.max_price_per_hour},
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


def launch_recorded_run(store: Store, run_id: str, plan: LaunchPlan, provider: Provider,
                        secrets: Mapping[str, str]) -> list[Instance]:
    """Start an already recorded run: provisioning -> fail-safe -> launch plan -> provider.launch -> instance rows
    -> running (gpuplan.launching.start does the last three as one step a crash cannot make unknowable).

    The machines' own timer is the fail-safe (gpuplan.launching.failsafe) worked out now, for each failover placement at
    its own price, written into the launch plan before the provider call (so a launch killed before the next
    record still tells which cap set the timer) and recorded as a `failsafe` event once the machines started;
    a cap with no time left fails the run before any provider call (UserError), and placements too dear to leave
    any time are not tried.
    A provider error marks the run failed with the provider's (secret-free) message and is raised again.
    """
    from gpuplan.launching import failsafe_store as failsafe_inputs
    from gpuplan.launching.launch_plan import placements_for_launch
    from gpuplan.launching.start import start_and_record
    from gpuplan.runs.events import record_event
    from gpuplan.runs.records import set_state
    from gpuplan.store.models import Run, RunState
    from gpuplan.store.types import utcnow

    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None, run_id
        run_dir = run.run_dir or ""
        set_state(session, run, RunState.PROVISIONING)
        record_event(session, run, EventKind.LAUNCHING, f"asking {provider.name} for {plan.offer.nodes} node(s)")
    request = build_request(plan, run_id, run_dir, secrets)
    placements = placements_for_launch(provider, request)
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None, run_id
        inputs = failsafe_inputs.run_inputs(session, run, price_per_hour=plan.offer.price_per_hour,
                                            nodes=plan.offer.nodes, min_billed_seconds=provider.min_billed_seconds,
                                            now=utcnow())
        placed = failsafe_inputs.placed(inputs, placements)
        if placed.refused:
            failsafe_inputs.record_failsafe(session, run, placed.chosen)
            set_state(session, run, RunState.FAILED, failsafe_inputs.refusal(placed.chosen))
    failsafe_inputs.check_placed(placed)
    request = placed.request(request)

    def on_attempt(attempt: Attempt) -> None:
        with store.session() as session:
            run = session.get(Run, run_id)
            assert run is not None
            p = attempt.placement
            record_event(session, run, EventKind.LAUNCH_ATTEMPT,
                         f"attempt {attempt.number}: {p.provider} {p.where} {p.instance_type or ''}: "
                         f"{attempt.outcome}" + (f" ({attempt.code})" if attempt.code else "")
                         + (f"; blocks {attempt.blocked}" if attempt.blocked else ""),
                         **{("why" if k == "message" else k): v for k, v in attempt.as_dict().items()})

    try:
        ship_code(plan, request, provider)
        instances = start_and_record(store, run_id, provider, request, default_price=plan.offer.price_per_hour,
                                     on_attempt=on_attempt, placements=placed.placements, failsafe=placed)
    except ProviderError as exc:
        with store.session() as session:
            run = session.get(Run, run_id)
            assert run is not None
            record_event(session, run, EventKind.LAUNCH_FAILED, str(exc), error=type(exc).__name__, code=exc.code)
            set_state(session, run, RunState.FAILED, f"launch failed: {exc}")
        raise
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        price = next((i.price_per_hour for i in instances if i.price_per_hour is not None),
                     plan.offer.price_per_hour)
        failsafe_inputs.record_failsafe(session, run, placed.started(price))
    return instances



def start_and_record(store: Store, run_id: str, provider: Provider, request: LaunchRequest, *,
                     default_price: Decimal | None, on_attempt: AttemptCallback | None = None,
                     placements: Sequence[Placement] | None = None,
                     failsafe: PlacedFailSafe | None = None) -> list[Instance]:
    """Record the launch plan, start the machines, record them, and move the run to running.

    `placements`: the ones the caller already worked out for `request` (the fail-safe is priced on them);
    `failsafe`: the timer `request` gives the machines, written into the launch plan.
    Provider errors propagate (the caller records the failure). A run stopped while this was starting its
    machines gets them terminated here, so a stop during a launch never leaves one running.
    """
    from gpuplan.launching.start import start_instances
    from gpuplan.runs.events import record_event
    from gpuplan.runs.records import set_state
    from gpuplan.store.models import Run, RunState
    from gpuplan.store.types import utcnow

    if placements is None:
        placements = placements_for_launch(provider, request)
    record_launch_plan(store, run_id, provider, placements, failsafe)
    pause_point("recorded")
    instances = start_instances(provider, request, on_attempt, placements=placements)
    pause_point("launched")
    now = utcnow()
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        record_instances(session, run, provider, instances, default_price=default_price, now=now)
        if instances:  # failover may have moved the run to another zone, region or instance type
            run.zone = instances[0].zone or run.zone
            run.region = instances[0].region or run.region
            run.instance_type = instances[0].instance_type or run.instance_type
        record_event(session, run, EventKind.LAUNCHED, f"{len(instances)} instance(s) started",
                     instances=[i.instance_id for i in instances])
        set_state(session, run, RunState.RUNNING, at=min((i.launched_at for i in instances if i.launched_at),
                                                         default=now))
        if run.state in RunState.FINAL and any(row.terminated_at is None for row in run.instances):
            session.commit()
            from gpuplan.runs.machines import stop_instances

            stop_instances(session, run, provider, utcnow())
    return instances
