"""Orchestration of `gpuplan launch`: spec -> estimate -> offer -> Run row (pending) -> provider.launch -> rows.

The order is the promise of DESIGN.md: the Run row and its `launch_plan` event are committed BEFORE any
provider call, so a crash between the two leaves a recorded run whose machines `gpuplan stop`, `status`/`watch`
and `reconcile` find and adopt (the run id is the provider's idempotency token and tag; gpuplan.launcher and
gpuplan.adopt), never an unknown machine. The single provider call lives in `start_instances`, the one place a cloud
provider can wrap with zone/region/offer failover.

Secrets: values are read from the caller's environment here and travel only inside the LaunchRequest; the
Run row stores the spec text, which names secrets but never holds their values.
"""

from __future__ import annotations

import datetime as dt
import getpass
import json
import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

from gpuplan.errors import UserError
from gpuplan.failover import Attempt, AttemptCallback, Placement
from gpuplan.job_hours import job_hours
from gpuplan.jobs.spec import JobSpec, spec_hash
from gpuplan.limits import MONEY_LIMIT, within
from gpuplan.providers.base import Instance, LaunchRequest, Provider, ProviderError

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Offer:
    """Where the run goes: the machine type, place and price chosen for it."""

    provider: str
    cloud: str
    instance_type: str | None = None
    region: str | None = None
    zone: str | None = None
    gpu: str | None = None
    gpus_per_node: int = 0
    nodes: int = 1
    spot: bool = False
    price_per_hour: Decimal | None = None  # per node

    @property
    def total_price_per_hour(self) -> Decimal | None:
        return None if self.price_per_hour is None else self.price_per_hour * self.nodes


@dataclass(frozen=True)
class RunEstimate:
    """The estimate recorded with the run (kept for estimate-vs-actual)."""

    hours: float
    tokens_per_s: float | None
    cost_usd: Decimal | None
    source: str
    params: int | None = None
    detail: Mapping[str, Any] = field(default_factory=dict)
    # `hours` = startup_s / 3600 + the throughput's time for the tokens + on spot the expected interruptions
    # (gpuplan.job_hours; gpuplan.startup says why and how for the start-up).
    startup_s: float = 0.0
    startup_source: str | None = None
    startup_detail: str | None = None

    @property
    def interruption_hours(self) -> float:
        """Hours of `hours` expected to be lost to spot interruptions (0 on demand), so the one-line estimate
        can say where its time goes beyond compute and start-up."""
        breakdown = self.detail.get("hours") or {}
        return float(breakdown.get("interruption_hours") or 0.0)

    @property
    def mfu_source(self) -> str | None:
        """Which throughput the estimate used ("user", "bench", "calibrated", "default"), when known."""
        value = self.detail.get("mfu_source")
        return None if value is None else str(value)


@dataclass(frozen=True)
class LaunchPlan:
    """Everything decided before anything is recorded or started; `gpuplan launch --dry-run` prints this."""

    spec: JobSpec
    spec_text: str
    source_dir: str | None
    offer: Offer
    estimate: RunEstimate | None

    def as_dict(self) -> dict[str, Any]:
        est = self.estimate
        return {
            "name": self.spec.name,
            "provider": self.offer.provider,
            "cloud": self.offer.cloud,
            "instance_type": self.offer.instance_type,
            "region": self.offer.region,
            "gpu": self.offer.gpu,
            "gpus_per_node": self.offer.gpus_per_node,
            "nodes": self.offer.nodes,
            "spot": self.offer.spot,
            "price_per_hour": self.offer.total_price_per_hour,
            "est_hours": round(est.hours, 6) if est else None,
            "est_cost_usd": est.cost_usd if est else None,
            "est_tokens_per_s": est.tokens_per_s if est else None,
            "estimate_source": est.source if est else None,
            "mfu_source": est.mfu_source if est else None,
            "startup_s": round(est.startup_s, 3) if est else None,
            "startup_source": est.startup_source if est else None,
            "startup_detail": est.startup_detail if est else None,
            "hours": est.detail.get("hours") if est else None,  # compute + start-up + interruptions, as plan's
            "max_hours": self.spec.limits.max_hours,
            "budget_usd": self.spec.limits.budget_usd,
        }


# ---------------------------------------------------------------------------------------------- planning


def provider_for(name: str) -> Provider:
    """The provider registered as `name`, configured from the user's config file (gpuplan.config)."""
    from gpuplan.config import make_provider

    return make_provider(name)


def choose_offer(spec: JobSpec, provider: Provider, *, db_url: str | None = None) -> Offer:
    """The offer for this spec on this provider.

    Local: this machine at its configured price. AWS/GCP: with a workload to plan from, the planner's option of
    lowest total job cost within the spec's resources and limits (`planned_offer`); otherwise the cheapest
    catalog offer for the spec's GPU within its regions and price cap. Either way the start tries the next
    offers on a capacity error (gpuplan.cloudlaunch). Others (Slurm's charge-back, plugins): the spec as asked.
    """
    res = spec.resources
    price = getattr(provider, "price_per_hour", None)
    if provider.name == "local":
        return Offer(provider="local", cloud="local", instance_type="localhost", region="local",
                     gpu=res.gpu, gpus_per_node=res.gpus_per_node or (1 if res.gpu else 0), nodes=res.nodes,
                     spot=False, price_per_hour=Decimal(str(price)) if price is not None else Decimal(0))
    region = next((r for r in res.regions if "*" not in r and "?" not in r), None)
    gpus_per_node = res.gpus_per_node or (1 if res.gpu else 0)
    from gpuplan.catalog import KNOWN_CLOUDS

    if provider.cloud in KNOWN_CLOUDS and spec.workload is not None and spec.workload.total_tokens is not None:
        planned = planned_offer(spec, provider.name, provider.cloud, db_url=db_url)
        if planned is not None:
            return planned
    if res.gpu and provider.cloud in KNOWN_CLOUDS:
        # The cheapest catalog offer for the GPU within the spec's regions and price cap (gpuplan.cloudlaunch
        # tries the others, in order, if this one has no capacity).
        from gpuplan.cloudlaunch import ranked_choices

        choices = ranked_choices(provider.cloud, res.gpu, gpus_per_node, spot=res.spot, regions=res.regions,
                                 max_price=res.max_price_per_hour, db_url=db_url)
        if not choices:
            raise UserError(f"no {provider.cloud} offer in the catalog for {gpus_per_node} x {res.gpu}"
                            + (f" in {', '.join(res.regions)}" if res.regions else "")
                            + (f" under ${res.max_price_per_hour}/h" if res.max_price_per_hour else "")
                            + " (see `gpuplan prices`)")
        best = choices[0]
        return Offer(provider=provider.name, cloud=provider.cloud, instance_type=best.instance_type,
                     region=best.region, gpu=res.gpu, gpus_per_node=int(best.gpu_count), nodes=res.nodes,
                     spot=res.spot, price_per_hour=best.price_per_hour)
    # Providers with a configured rate rather than a catalog (Slurm's internal charge-back) quote it per node.
    charge = getattr(provider, "charge_per_hour", None)
    return Offer(provider=provider.name, cloud=provider.cloud, region=region, gpu=res.gpu,
                 gpus_per_node=gpus_per_node, nodes=res.nodes, spot=res.spot,
                 price_per_hour=charge(gpus_per_node, 1) if callable(charge) else None)


def planned_offer(spec: JobSpec, provider_name: str, cloud: str, *, db_url: str | None = None) -> Offer | None:
    """The cheapest planner option on `cloud` that respects the spec; None when the workload cannot be planned.

    The spec's `resources` narrow the search (gpu, gpus_per_node, regions, spot: true -> spot only, otherwise
    on-demand only, so nobody gets spot without asking; exactly the spec's nodes, which its command may rely on)
    and its limits
    bound it (budget, max_price_per_hour, deadline). Nothing that fits is a UserError carrying the planner's
    first reasons, so `gpuplan plan job.yaml --explain` can tell the rest.
    """
    from gpuplan.catalog.catalog import Catalog
    from gpuplan.catalog.gpu_names import compile_region_patterns, resolve_gpus
    from gpuplan.estimate import workload_from_job
    from gpuplan.plan import Constraints, plan

    res, limits = spec.resources, spec.limits
    try:
        workload, own = workload_from_job(spec.workload)
    except ValueError:
        return None
    deadline_hours = None
    if limits.deadline is not None:
        at = limits.deadline_at(dt.datetime.now(dt.timezone.utc))
        assert at is not None
        deadline_hours = (at - dt.datetime.now(dt.timezone.utc)).total_seconds() / 3600
    constraints = Constraints(
        deadline_hours=deadline_hours, budget_usd=limits.budget_usd, spot=bool(res.spot),
        max_price_per_hour=res.max_price_per_hour, nodes=res.nodes,
    )
    catalog = Catalog.load(db_url, (cloud,))
    offers = catalog.select(gpus=resolve_gpus(res.gpu) if res.gpu else None, clouds=(cloud,),
                            regions=compile_region_patterns(",".join(res.regions)) if res.regions else None)
    from gpuplan.startup import startup_allowance

    result = plan(workload, offers, constraints=constraints, throughput_for=lambda _gpu: own,
                  spot_model=spot_model_for(spec), startup_s={cloud: startup_allowance(provider_name, db_url).seconds})
    wanted = [o for o in result.options
              if (res.gpus_per_node is None or o.gpus_per_node == res.gpus_per_node)
              and o.nodes == res.nodes]
    if not wanted:
        reasons = sorted({o.reason for o in result.rejected if o.reason})[:3]
        raise UserError(f"no {cloud} offer fits {spec.name}"
                        + (f": {'; '.join(reasons)}" if reasons else " within its resources and limits")
                        + f" (see `gpuplan plan JOB.yaml --cloud {cloud} --explain`)")
    best = wanted[0]
    price = best.price_per_hour / best.nodes if best.price_per_hour is not None else None
    return Offer(provider=provider_name, cloud=cloud, instance_type=best.instance_type, region=best.region,
                 zone=best.zone, gpu=best.gpu, gpus_per_node=int(best.gpus_per_node), nodes=best.nodes,
                 spot=best.spot, price_per_hour=price)


def spot_model_for(spec: JobSpec) -> Any:
    """The planner's spot interruption model with the spec's checkpoint interval (plan and launch share it)."""
    from gpuplan.plan import DEFAULT_CHECKPOINT_HOURS, SpotModel

    interval = spec.checkpoint.interval if spec.checkpoint and spec.checkpoint.interval else None
    return SpotModel(checkpoint_hours=interval or DEFAULT_CHECKPOINT_HOURS)


def estimate_run(spec: JobSpec, offer: Offer, *, db_url: str | None = None) -> RunEstimate | None:
    """Estimated wall time and cost, or None when the spec has no workload to estimate from.

    Preference: the workload's own measured `throughput` (tokens/s per GPU, or per node for a CPU job), then
    for a CPU job on this machine a CPU bench of the model here (gpuplan.localbench), then the estimator
    (gpuplan.estimate). Wall time = the provider's start-up allowance (gpuplan.startup: measured from its
    finished runs, else a documented default) + tokens / throughput, + on spot the expected interruptions:
    the breakdown `gpuplan plan` uses too (gpuplan.job_hours). Cost = hours x the offer's price for all nodes
    (start-up is billed too).
    """
    workload = spec.workload
    if workload is None or workload.total_tokens is None:
        return None
    tokens = workload.total_tokens
    params = _params(spec)
    result: RunEstimate | None = None
    if workload.throughput:
        workers = max(offer.gpus_per_node, 1) * offer.nodes
        rate = workload.throughput * workers
        result = RunEstimate(hours=tokens / rate / 3600, tokens_per_s=rate, cost_usd=None,
                             source="workload.throughput", params=params, detail={"mfu_source": "user"})
    else:
        result = _estimate_from_cpu_bench(spec, offer, params, db_url) or \
            _estimate_with_estimator(spec, offer, params, db_url)
    if result is None:
        return None
    from gpuplan.startup import startup_allowance

    startup = startup_allowance(offer.provider, db_url)
    stretch = spot_model_for(spec).stretch(offer.cloud, offer.nodes) if offer.spot else None
    breakdown = job_hours(result.hours, startup_s=startup.seconds, stretch=stretch)
    hours = breakdown.total
    if not within("hours", hours):
        raise UserError(f"{spec.name} would take {hours:.3g} h on {offer.nodes} x {offer.gpu or 'CPU'} "
                        f"({result.source}): more than 100 years; check the workload's tokens and model")
    total_price = offer.total_price_per_hour
    cost = None if total_price is None else (total_price * Decimal(str(hours))).quantize(Decimal("0.000001"))
    if cost is not None and cost >= MONEY_LIMIT:  # the Money column could not record it
        raise UserError(f"{spec.name} would cost ${cost:,.0f}, more than the books can hold; check the workload")
    detail = {**dict(result.detail), "run_hours": result.hours, **startup.as_dict(), "hours": breakdown.as_dict()}
    return RunEstimate(hours=hours, tokens_per_s=result.tokens_per_s, cost_usd=cost, source=result.source,
                       params=result.params or params, detail=detail, startup_s=startup.seconds,
                       startup_source=startup.source, startup_detail=startup.detail)


def _estimate_from_cpu_bench(spec: JobSpec, offer: Offer, params: int | None,
                             db_url: str | None) -> RunEstimate | None:
    """A CPU job on this machine (local provider, no GPU): the throughput of a CPU bench of its model here.

    None when it is not such a job, the workload names no architecture, or no bench matches (gpuplan.localbench
    says what must match).
    """
    workload = spec.workload
    if offer.provider != "local" or offer.gpu or workload is None or db_url is None:
        return None
    from gpuplan.estimate import workload_from_job
    from gpuplan.localbench import cpu_throughput

    try:
        shaped, _ = workload_from_job(workload)
    except ValueError:
        return None
    if shaped.architecture is None:
        return None
    found = cpu_throughput(db_url, signature=shaped.architecture.signature(), precision=shaped.precision,
                           seq_len=shaped.seq_len, micro_batch=workload.micro_batch)
    if found is None or found.tokens_per_s_per_gpu is None:
        return None
    # Local nodes are processes on this one machine, which the bench measured: the machine's rate is the job's.
    rate = found.tokens_per_s_per_gpu
    return RunEstimate(hours=shaped.tokens / rate / 3600, tokens_per_s=rate, cost_usd=None,
                       source=f"measured: {found.detail}", params=params or shaped.params,
                       detail={"mfu_source": "bench", "mfu_ref": found.ref, "tokens_per_s_source": found.detail})


def _params(spec: JobSpec) -> int | None:
    workload = spec.workload
    if workload is None:
        return None
    if workload.params:
        return workload.params
    try:
        from gpuplan.architecture import load_hf_config, preset

        if workload.model:
            return preset(workload.model).param_count()
        if workload.model_config_path:
            return load_hf_config(workload.model_config_path).param_count()
    except ValueError:
        return None
    return None


def _estimate_with_estimator(spec: JobSpec, offer: Offer, params: int | None,
                             db_url: str | None = None) -> RunEstimate | None:
    """The estimator's answer (gpuplan.estimate.estimate_for_job) for the workload on the offer's GPUs.

    Throughput: the workload's own numbers, else a matching `gpuplan bench` record or calibration from the
    store, else the estimator's prior. None when the offer has no GPU (a CPU job on this machine: the estimator
    models GPUs) or the estimator cannot answer (e.g. a precision the GPU lacks): a launch never fails for want
    of an estimate.
    """
    if spec.workload is None or not offer.gpu:
        return None
    from gpuplan.estimate import estimate_for_job, workload_from_job

    try:
        throughput = None
        if db_url is not None:
            from gpuplan.gpus import resolve_gpu
            from gpuplan.throughput import LookupKey, resolve_throughput, store_lookups

            workload, _ = workload_from_job(spec.workload)
            key = LookupKey(gpu=resolve_gpu(offer.gpu).name, params=workload.params, precision=workload.precision,
                            seq_len=workload.seq_len, architecture=workload.architecture)
            throughput = resolve_throughput(tokens_per_s=None, mfu=None, key=key, lookups=store_lookups(db_url))
        est = estimate_for_job(spec.workload, gpu=offer.gpu, gpus_per_node=max(offer.gpus_per_node, 1),
                               nodes=offer.nodes, throughput=throughput)
    except (ValueError, UserError) as exc:
        log.info("no estimate for %s: %s", spec.name, exc)
        return None
    return RunEstimate(hours=float(est.wall_hours), tokens_per_s=est.tokens_per_s_per_gpu * est.gpus,
                       cost_usd=None, source=f"estimate (mfu {est.mfu:.2f}, {est.mfu_source})", params=est.params,
                       detail={"mfu": est.mfu, "mfu_source": est.mfu_source, "mfu_ref": est.mfu_ref,
                               "fits": est.fits,
                               "memory_gb_per_gpu": est.memory_gb_per_gpu.total, "flops": est.flops})


def plan_launch(spec: JobSpec, spec_text: str, *, provider: Provider, source_dir: str | None = None,
                db_url: str | None = None) -> LaunchPlan:
    """Decide the offer and the estimate; nothing is recorded or started. `db_url`: where the price catalog's
    refreshes and the bench/calibration records live (default: the shipped catalog and the prior)."""
    offer = choose_offer(spec, provider, db_url=db_url)
    return LaunchPlan(spec=spec, spec_text=spec_text, source_dir=source_dir, offer=offer,
                      estimate=estimate_run(spec, offer, db_url=db_url))


def read_secrets(spec: JobSpec, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Secret values from the launching environment; a missing one is an error naming it (never a value)."""
    environ = os.environ if environ is None else environ
    missing = [name for name in spec.secrets if name not in environ]
    if missing:
        raise UserError(f"secret{'s' if len(missing) > 1 else ''} {', '.join(missing)} not set in the environment "
                        "(secrets are read from the environment at launch)")
    return {name: environ[name] for name in spec.secrets}


# ---------------------------------------------------------------------------------------------- launching


def record_run(store: Any, plan: LaunchPlan, *, now: dt.datetime | None = None, schedule_id: int | None = None,
               run_id: str | None = None) -> str:
    """Commit the Run row (state pending) and its `created` event; returns the run id. No provider call here."""
    from gpuplan.paths import runs_dir
    from gpuplan.runs import record_event
    from gpuplan.store.models import Run, RunState
    from gpuplan.store.types import utcnow

    now = now or utcnow()
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
        params=est.params if est else _params(spec),
        total_tokens=spec.workload.total_tokens if spec.workload else None,
        est_hours=est.hours if est else None, est_cost_usd=est.cost_usd if est else None,
        est_tokens_per_s=est.tokens_per_s if est else None,
        estimate_json=json.dumps({"source": est.source, **dict(est.detail)}, default=str) if est else None,
        budget_usd=spec.limits.budget_usd, max_hours=spec.limits.max_hours, deadline_at=deadline_at,
        schedule_id=schedule_id,
    )
    run.run_dir = str(runs_dir() / run.id)
    with store.session() as session:
        session.add(run)
        session.flush()
        record_event(session, run, "created", f"launch of {spec.name} on {offer.provider} recorded",
                     provider=offer.provider, instance_type=offer.instance_type, region=offer.region,
                     nodes=offer.nodes, est_hours=est.hours if est else None)
    return run.id


def _user() -> str | None:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return None


def build_request(plan: LaunchPlan, run_id: str, run_dir: str, secrets: Mapping[str, str]) -> LaunchRequest:
    """The provider's view of the run (secrets included: it must never be logged or stored).

    Its max_hours is the spec's; the machines get the fail-safe instead (the tightest of every cap), set by
    gpuplan.failsafe_inputs.PlacedFailSafe.request once the placements are known.
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
                 "regions": list(spec.resources.regions),
                 "max_price_per_hour": spec.resources.max_price_per_hour},
    )


def start_instances(provider: Provider, request: LaunchRequest, on_attempt: AttemptCallback | None = None, *,
                    placements: Sequence[Placement] | None = None) -> list[Instance]:
    """The one provider call that starts machines: local directly; every other provider through failover over
    zones, regions and the catalog's next offers (gpuplan.cloudlaunch), each attempt reported to `on_attempt`.
    `placements`: the ones already recorded in the run's `launch_plan` event (gpuplan.launcher)."""
    if provider.cloud == "local":
        return provider.launch(request)
    from gpuplan.cloudlaunch import start_with_failover

    return start_with_failover(provider, request, on_attempt=on_attempt, placements=placements).instances


def launch_recorded_run(store: Any, run_id: str, plan: LaunchPlan, provider: Provider,
                        secrets: Mapping[str, str]) -> list[Instance]:
    """Start an already recorded run: provisioning -> fail-safe -> launch plan -> provider.launch -> instance rows
    -> running (gpuplan.launcher does the last three as one step a crash cannot make unknowable).

    The machines' own timer is the fail-safe (gpuplan.failsafe) worked out now, for each failover placement at
    its own price, written into the launch plan before the provider call (so a launch killed before the next
    record still tells which cap set the timer) and recorded as a `failsafe` event once the machines started;
    a cap with no time left fails the run before any provider call (UserError), and placements too dear to leave
    any time are not tried.
    A provider error marks the run failed with the provider's (secret-free) message and is raised again.
    """
    from gpuplan import failsafe_inputs
    from gpuplan.launcher import placements_for_launch, start_and_record
    from gpuplan.runs import record_event, set_state
    from gpuplan.store.models import Run, RunState
    from gpuplan.store.types import utcnow

    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None, run_id
        run_dir = run.run_dir or ""
        set_state(session, run, RunState.PROVISIONING)
        record_event(session, run, "launching", f"asking {provider.name} for {plan.offer.nodes} node(s)")
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
            record_event(session, run, "launch_attempt",
                         f"attempt {attempt.number}: {p.provider} {p.where} {p.instance_type or ''}: "
                         f"{attempt.outcome}" + (f" ({attempt.code})" if attempt.code else ""),
                         **{("why" if k == "message" else k): v for k, v in attempt.as_dict().items()})

    try:
        instances = start_and_record(store, run_id, provider, request, default_price=plan.offer.price_per_hour,
                                     on_attempt=on_attempt, placements=placed.placements, failsafe=placed)
    except ProviderError as exc:
        with store.session() as session:
            run = session.get(Run, run_id)
            assert run is not None
            record_event(session, run, "launch_failed", str(exc), error=type(exc).__name__, code=exc.code)
            set_state(session, run, RunState.FAILED, f"launch failed: {exc}")
        raise
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        price = next((i.price_per_hour for i in instances if i.price_per_hour is not None),
                     plan.offer.price_per_hour)
        failsafe_inputs.record_failsafe(session, run, placed.started(price))
    return instances


def launch(store: Any, plan: LaunchPlan, provider: Provider, secrets: Mapping[str, str], *,
           schedule_id: int | None = None) -> str:
    """Record, then start: the whole non-interactive launch (the scheduler calls this too). Returns the run id."""
    run_id = record_run(store, plan, schedule_id=schedule_id)
    launch_recorded_run(store, run_id, plan, provider, secrets)
    return run_id


def source_dir_of(path: str | Path | None) -> str | None:
    return str(Path(path).resolve().parent) if path else None
