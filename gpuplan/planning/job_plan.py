"""Plan one job: a job spec or a workload, the user's limits, the price catalog and the stored measurements, in;
the planner's ranked and dropped options, out.

`gpuplan plan` and the dashboard's plan explorer parse their input into a PlanRequest and call `plan_job`, which
does everything else: reads the spec (gpuplan.jobs.foreign, so a SkyPilot/dstack task plans as `launch` would
run it), merges the command line's limits over the spec's and the config file's defaults, loads the catalog,
resolves the throughput per GPU type (user > bench > calibrated > default, as `estimate` does), adds each cloud's
start-up allowance and billing minimum, and calls gpuplan.planning.planner.plan. The CLI only renders the answer.
"Nothing fits" is an answer with reasons, not an error.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.catalog.catalog import Catalog
from gpuplan.errors import UserError
from gpuplan.estimating.defaults import AUTO_SHARDINGS
from gpuplan.estimating.estimate import Throughput, Workload
from gpuplan.hardware.gpus import GpuSpec
from gpuplan.planning.planner import Constraints, PlanResult, SpotModel

if TYPE_CHECKING:
    from gpuplan.jobs.spec import JobSpec


@dataclass(frozen=True)
class PlanRequest:
    """What to plan, as the user gave it: a job spec, or a workload built from flags, and the limits.

    Text fields (`gpu_text`, `cloud_text`, `region_text`) are the command line's comma lists, resolved here
    against the catalog's names; None means "from the spec, else the config file's [defaults], else all".
    """

    spec_path: Path | None = None
    workload: Workload | None = None  # the flags' workload; None when spec_path gives it
    tokens_per_s: float | None = None  # --throughput: tokens/s per GPU (one GPU type only)
    mfu: float | None = None
    gpu_text: str | None = None
    cloud_text: str | None = None
    region_text: str | None = None
    spot: bool | None = None
    deadline_hours: float | None = None
    budget_usd: Decimal | None = None
    max_price_per_hour: Decimal | None = None
    max_nodes: int = 64
    auto_shard: bool = True
    interruption_rate: float | None = None
    checkpoint_hours: float | None = None


@dataclass(frozen=True)
class PlanAnswer:
    """What the planner computed: the workload and constraints it planned for, the spot model, the ranked and
    dropped options, the catalog whose prices it used, and warnings for the user (GPUs no cloud rents)."""

    workload: Workload
    constraints: Constraints
    spot_model: SpotModel
    result: PlanResult
    catalog: Catalog
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class SpecLimits:
    """What a job spec says about where and how its job may run, in the planner's terms (None: not said)."""

    gpus: frozenset[str] | None = None
    clouds: tuple[str, ...] | None = None
    regions: tuple[str, ...] | None = None
    spot: bool | None = None
    nodes: int | None = None  # stated outright: plan exactly this many, as launch starts
    gpus_per_node: int | None = None
    max_price_per_hour: Decimal | None = None
    zones: tuple[str, ...] = ()
    budget_usd: Decimal | None = None
    deadline_hours: float | None = None
    checkpoint_hours: float | None = None


def plan_job(request: PlanRequest, db_url: str | None) -> PlanAnswer:
    """Plan the job `request` describes against the catalog and measurements of the store at `db_url`.

    UserError (one line) for what the user must change: a spec and flags both given, a spec without a workload,
    --max-nodes below the spec's nodes, a region that matches nothing, --throughput for several GPU types.
    """
    from gpuplan.catalog.gpu_names import (
        compile_region_patterns,
        not_rented_message,
        rented,
        resolve_clouds,
        resolve_gpus,
    )
    from gpuplan.catalog.zones import keep_offer, standard_zone
    from gpuplan.planning.job_cost import billing_minimums
    from gpuplan.planning.planner import plan
    from gpuplan.providers.registry import catalog_clouds
    from gpuplan.runs.interruption_loss import measured_loss

    known = catalog_clouds()
    workload, own_throughput, spec = _workload(request)
    gpus = resolve_gpus(request.gpu_text) if request.gpu_text else spec.gpus
    clouds = resolve_clouds(request.cloud_text, known) if request.cloud_text else \
        spec.clouds or _default_clouds(known) or known
    regions = compile_region_patterns(request.region_text) if request.region_text else \
        spec.regions or _default_regions()
    if spec.nodes and request.max_nodes < spec.nodes:
        raise UserError(f"--max-nodes {request.max_nodes} is below the spec's resources.nodes {spec.nodes}")
    constraints = Constraints(
        deadline_hours=request.deadline_hours if request.deadline_hours is not None else spec.deadline_hours,
        budget_usd=request.budget_usd if request.budget_usd is not None else spec.budget_usd,
        spot=request.spot if request.spot is not None else spec.spot,
        max_price_per_hour=request.max_price_per_hour if request.max_price_per_hour is not None
        else spec.max_price_per_hour,
        max_nodes=request.max_nodes,
        nodes=spec.nodes,
    )
    measured = measured_loss(db_url)
    spot_model = spot_model_for(request.interruption_rate, request.checkpoint_hours or spec.checkpoint_hours,
                                measured.hours if measured is not None else None)
    shardings = AUTO_SHARDINGS if request.auto_shard and workload.sharding == "none" else None

    catalog = Catalog.load(db_url, clouds)
    if request.region_text or spec.regions:  # [defaults] regions name every cloud's: some match none here
        catalog.check_regions(regions, "--region" if request.region_text else
                              f"{request.spec_path}: resources.regions")
    warnings = []
    if gpus is not None and not all(rented(g) for g in gpus):
        warnings.append(not_rented_message({g for g in gpus if not rented(g)}, clouds))
    # Every zone type: keep_offer below applies the launch's rule (named Local Zones only).
    offers = catalog.select(gpus=gpus, regions=regions, zones="all")
    if spec.gpus_per_node:
        offers = [o for o in offers if o.gpu_count == spec.gpus_per_node]
    # What a launch would use without being told: no AWS Local/Wavelength Zone unless the spec names it
    # (gpuplan.catalog.zones; the launch also leaves out regions the account has not enabled, which plan cannot
    # know without asking the cloud).
    offers = [o for o in offers if keep_offer(o.region, o.zone, standard=standard_zone, named=spec.zones)]
    throughput_for = _throughput_resolver(db_url, workload, request, own_throughput, gpus)
    from gpuplan.calibration.startup import startup_allowance

    # Each cloud's start-up allowance, as `gpuplan launch` adds it to the run's hours (gpuplan.estimating.job_hours).
    startup_s = {cloud: startup_allowance(cloud, db_url).seconds for cloud in {o.cloud for o in offers}}
    result = plan(workload, offers, constraints=constraints, throughput_for=throughput_for,
                  spot_model=spot_model, shardings=shardings, startup_s=startup_s,
                  min_billed_seconds=billing_minimums(o.cloud for o in offers))
    return PlanAnswer(workload, constraints, spot_model, result, catalog, tuple(warnings))


def spot_model_for(rate: float | None, checkpoint_hours: float | None,
                   measured_loss_hours: float | None = None) -> SpotModel:
    """The spot model: `rate` interruptions per node-hour on every cloud (None: each cloud's default), work lost
    per interruption measured when past relaunches recorded it, else half of `checkpoint_hours` (default 1 h)."""
    defaults = SpotModel()  # each cloud's rate and the checkpoint interval the planner assumes
    rates = {cloud: rate for cloud in defaults.interruptions_per_hour} if rate is not None else \
        defaults.interruptions_per_hour
    return SpotModel(interruptions_per_hour=rates, checkpoint_hours=checkpoint_hours or defaults.checkpoint_hours,
                     measured_loss_hours=measured_loss_hours)


def _workload(request: PlanRequest) -> tuple[Workload, Throughput | None, SpecLimits]:
    """(Workload, the spec's own throughput, what the spec says about resources and limits)."""
    if request.spec_path is None:
        if request.workload is None:
            raise UserError("give a job spec or the model and work (--params, --tokens, ...)")
        return request.workload, None, SpecLimits()
    if request.workload is not None:
        raise UserError("give a job spec or model/work flags (--params, --tokens, ...), not both")
    from gpuplan.estimating.from_job import workload_from_job
    from gpuplan.jobs.foreign import load_job

    spec_path = request.spec_path
    spec = load_job(spec_path).spec  # a gpuplan spec, or a SkyPilot/dstack task as launch reads it
    if spec.workload is None:
        raise UserError(f"{spec_path}: the spec has no workload section (model or params, tokens) to plan from")
    try:
        workload, own = workload_from_job(spec.workload)
    except ValueError as exc:
        raise UserError(f"{spec_path}: {exc}") from exc
    return workload, own, spec_limits(spec_path, spec)


def spec_limits(spec_path: Path, spec: JobSpec) -> SpecLimits:
    """The spec's resources, limits and checkpoint interval as the planner's constraints."""
    from gpuplan.catalog.gpu_names import compile_region_patterns, resolve_clouds, resolve_gpus
    from gpuplan.providers.registry import catalog_clouds, load_provider_class

    res, limits = spec.resources, spec.limits
    gpus = None
    if res.gpu:  # every candidate GPU (`gpu: [A100:8, H100:8]`), or the one
        gpus = resolve_gpus(",".join(c.rpartition(":")[0] for c in res.gpu_candidates) or res.gpu)
    priced = [c for c in res.clouds if load_provider_class(c).priced_by_catalog]  # not this machine, a cluster
    deadline_hours = None
    if isinstance(limits.deadline, dt.datetime):
        deadline_hours = (limits.deadline - dt.datetime.now(dt.timezone.utc)).total_seconds() / 3600
        if deadline_hours <= 0:
            raise UserError(f"{spec_path}: the deadline {limits.deadline.isoformat()} has already passed")
    elif limits.deadline is not None:
        deadline_hours = float(limits.deadline)
    return SpecLimits(
        gpus=gpus,
        clouds=resolve_clouds(",".join(priced), catalog_clouds()) if priced else None,
        regions=compile_region_patterns(",".join(res.regions)) if res.regions else None,
        spot=True if res.spot else None,
        # What the spec states outright is what `launch` will start: plan exactly that shape, not the fewest nodes.
        nodes=res.nodes if "nodes" in res.model_fields_set else None,
        # Candidates of different GPU counts: each plans its own.
        gpus_per_node=res.gpus_per_node if res.gpus_per_node and len(
            {c.rpartition(":")[2] for c in res.gpu_candidates}) <= 1 else None,
        max_price_per_hour=Decimal(res.max_price_per_hour) if res.max_price_per_hour is not None else None,
        zones=tuple(res.zones or ()),
        budget_usd=Decimal(limits.budget_usd) if limits.budget_usd is not None else None,
        deadline_hours=deadline_hours,
        checkpoint_hours=float(spec.checkpoint.interval) if spec.checkpoint is not None and
        spec.checkpoint.interval else None,
    )


def _default_clouds(known: tuple[str, ...]) -> tuple[str, ...] | None:
    """`[defaults] clouds` of the config file, the ones with prices (`known`: local and slurm have no catalog)."""
    from gpuplan.catalog.gpu_names import resolve_clouds
    from gpuplan.config import default_setting

    value = default_setting("clouds")
    priced = [c for c in value if c in known] if isinstance(value, list) else []
    return resolve_clouds(",".join(priced), known) if priced else None


def _default_regions() -> tuple[str, ...] | None:
    """`[defaults] regions` of the config file (globs)."""
    from gpuplan.catalog.gpu_names import compile_region_patterns
    from gpuplan.config import default_setting

    value = default_setting("regions")
    return compile_region_patterns(",".join(value)) if isinstance(value, list) and value else None


def _throughput_resolver(db_url: str | None, workload: Workload, request: PlanRequest, own: Throughput | None,
                         gpus: frozenset[str] | None) -> Callable[[GpuSpec], Throughput | None]:
    """throughput_for(gpu): the spec's own number, else the user's flags, else a bench or calibration for that
    GPU, else None (the step model)."""
    from gpuplan.calibration.throughput import LookupKey, resolve_throughput, store_lookups

    if request.tokens_per_s is not None and (gpus is None or len(gpus) != 1):
        raise UserError("--throughput is tokens/s on one GPU type: give exactly one --gpu (or use --mfu)")
    lookups = store_lookups(db_url)
    cache: dict[str, Throughput | None] = {}

    def throughput_for(gpu: GpuSpec) -> Throughput | None:
        if own is not None:
            return own
        if gpu.name not in cache:
            key = LookupKey(gpu=gpu.name, params=workload.params, precision=workload.precision,
                            seq_len=workload.seq_len, architecture=workload.architecture)
            try:
                cache[gpu.name] = resolve_throughput(tokens_per_s=request.tokens_per_s, mfu=request.mfu, key=key,
                                                     lookups=lookups)
            except ValueError as exc:
                raise UserError(str(exc)) from exc
        return cache[gpu.name]

    return throughput_for
