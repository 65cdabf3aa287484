"""The planner: every offer x node count, estimated and priced, ranked by the total cost of the job.

Pure computation on dataclasses (no I/O): the CLI loads the catalog and resolves throughput, then calls
`plan(...)`. Cost is what the *job* costs (hours x price x nodes), not the hourly price, so a dearer but faster
GPU can win. Estimates depend only on (GPU, GPUs per node, nodes), never on region or price, so they are
computed once per such shape and shared by every offer of that shape: planning over the whole shipped catalog
is a few hundred estimates at most.

Spot: an offer's spot price is discounted by the expected cost of interruptions (see SpotModel): work lost since
the last checkpoint plus the restart time, for every interruption the job is expected to see.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from gpuplan.catalog.offer import Offer
from gpuplan.estimating.configured import precision_for
from gpuplan.estimating.defaults import fewest_gpus
from gpuplan.estimating.estimate import Estimate, Hardware, Throughput, Workload, estimate
from gpuplan.estimating.job_hours import HoursBreakdown, job_hours
from gpuplan.hardware.gpus import GpuSpec, resolve_gpu
from gpuplan.limits import within
from gpuplan.planning.job_cost import job_cost

# Spot interruption assumptions (interruptions per node-hour). Neither cloud publishes a rate for GPU spot
# capacity; these are conservative round figures from public measurements:
# - AWS: the Spot Instance Advisor buckets interruption frequency per month; GPU families (p3/p4d/p5, g5) sit
#   mostly in the ">20%" bucket, i.e. roughly one interruption per 1-3 weeks per instance for steady pools, and
#   much more often in scarce ones. "Can't Be Late" (Wu et al., NSDI 2024, AWS GPU spot traces) reports spot
#   GPU lifetimes of a few hours to about a day. We take a mean time between interruptions of 20 h.
# - GCP: Spot VMs have no maximum runtime but are preempted more readily than AWS spot in the same traces and
#   in SkyPilot's published measurements; we take 12 h.
# Both are overridable (`--interruption-rate`); the planner's output states which rate it used.
DEFAULT_INTERRUPTIONS_PER_HOUR = {"aws": 1 / 20, "gcp": 1 / 12}
DEFAULT_RESTART_HOURS = 0.25  # provisioning a new node + pulling the image + loading the checkpoint
DEFAULT_CHECKPOINT_HOURS = 1.0
MAX_USEFUL_FRACTION_LOST = 0.9  # beyond this an interrupted job makes no useful progress


@dataclass(frozen=True)
class SpotModel:
    """Expected interruption overhead: each interruption loses half a checkpoint interval plus a restart, or,
    where past relaunches measured it (gpuplan.runs.interruption_loss), the mean work they lost."""

    interruptions_per_hour: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_INTERRUPTIONS_PER_HOUR))
    restart_hours: float = DEFAULT_RESTART_HOURS
    checkpoint_hours: float = DEFAULT_CHECKPOINT_HOURS
    measured_loss_hours: float | None = None

    @property
    def lost_hours(self) -> float:
        """Work lost per interruption: measured when known, else half a checkpoint interval."""
        return self.measured_loss_hours if self.measured_loss_hours is not None else self.checkpoint_hours / 2

    def rate(self, cloud: str) -> float:
        return self.interruptions_per_hour.get(cloud, max(self.interruptions_per_hour.values(), default=0.0))

    def stretch(self, cloud: str, nodes: int) -> float | None:
        """Wall-time multiplier from interruptions (renewal argument), or None if the job cannot progress.

        Any node's interruption stops the whole job, so the job sees `rate x nodes` interruptions per hour, each
        costing `lost_hours + restart` hours: wall = useful / (1 - rate x nodes x loss).
        """
        lost_fraction = self.rate(cloud) * nodes * (self.lost_hours + self.restart_hours)
        if lost_fraction >= MAX_USEFUL_FRACTION_LOST:
            return None
        return 1 / (1 - lost_fraction)


@dataclass(frozen=True)
class Constraints:
    """What the user allows: the planner drops (and with --explain, explains) every option outside these."""

    deadline_hours: float | None = None
    budget_usd: Decimal | None = None
    spot: bool | None = None  # True: spot only, False: on-demand only, None: both
    max_price_per_hour: Decimal | None = None  # for all nodes together
    max_nodes: int = 64
    # Exactly this many nodes (a job spec's `resources.nodes`: its command may rely on the world size), even
    # when fewer would fit; None: the fewest that fit, more for a deadline.
    nodes: int | None = None


@dataclass(frozen=True)
class Option:
    """One way to run the job: an instance type in a region, a node count, a market — and what it costs."""

    cloud: str
    region: str
    zone: str | None
    instance_type: str
    gpu: str
    gpus_per_node: float
    nodes: int
    spot: bool
    price_per_hour: Decimal | None  # all nodes together
    est_hours: float | None
    est_cost_usd: Decimal | None
    fits: bool
    reason: str | None = None
    sharding: str = "none"
    tokens_per_s_per_gpu: float | None = None
    mfu: float | None = None
    mfu_source: str | None = None
    scaling_efficiency: float | None = None
    interruption_stretch: float | None = None
    tags: tuple[str, ...] = ()
    hours: HoursBreakdown | None = None  # est_hours = hours.total (gpuplan.estimating.job_hours, the same as launch's)

    @property
    def ok(self) -> bool:
        return self.reason is None

    def as_json(self) -> dict[str, object]:
        """The documented JSON keys first, then the explanation."""
        return {
            "cloud": self.cloud, "region": self.region, "instance_type": self.instance_type, "gpu": self.gpu,
            "gpus_per_node": self.gpus_per_node, "nodes": self.nodes, "spot": self.spot,
            "price_per_hour": self.price_per_hour, "est_hours": self.est_hours, "est_cost_usd": self.est_cost_usd,
            "fits": self.fits, "reason": self.reason, "zone": self.zone, "sharding": self.sharding,
            "tokens_per_s_per_gpu": self.tokens_per_s_per_gpu, "mfu": self.mfu, "mfu_source": self.mfu_source,
            "scaling_efficiency": self.scaling_efficiency, "interruption_stretch": self.interruption_stretch,
            "tags": list(self.tags), "hours": self.hours.as_dict() if self.hours else None,
        }


@dataclass(frozen=True)
class PlanResult:
    """Options that pass every constraint, cheapest first, then the rejected ones with their reasons."""

    options: tuple[Option, ...]
    rejected: tuple[Option, ...]

    @property
    def cheapest(self) -> Option | None:
        return self.options[0] if self.options else None

    @property
    def fastest(self) -> Option | None:
        return min(self.options, key=lambda o: (o.est_hours or math.inf, o.est_cost_usd or 0), default=None)

    def pareto(self) -> tuple[Option, ...]:
        """Options no other option beats on both cost and time."""
        front: list[Option] = []
        best_hours = math.inf
        for option in self.options:  # sorted by cost: keep each that is faster than every cheaper one
            if option.est_hours is not None and option.est_hours < best_hours:
                front.append(option)
                best_hours = option.est_hours
        return tuple(front)


ThroughputFor = Callable[[GpuSpec], Throughput | None]


def _cheapest_zone(offers: Iterable[Offer], spot: bool) -> list[Offer]:
    """One offer per (cloud, region, instance type) for this market: its cheapest zone."""
    best: dict[tuple[str, str, str], Offer] = {}
    for offer in offers:
        price = offer.price(spot)
        if price is None:
            continue
        key = (offer.cloud, offer.region, offer.instance_type)
        current = best.get(key)
        if current is None or price < (current.price(spot) or price):
            best[key] = offer
    return list(best.values())


def _node_counts(needed_gpus: int, per_node: int, max_nodes: int) -> list[int]:
    """The node counts worth pricing: the fewest that fit, then doubling (faster, for deadlines)."""
    first = max(1, math.ceil(needed_gpus / per_node))
    counts = []
    nodes = first
    while nodes <= max_nodes:
        counts.append(nodes)
        nodes *= 2
    return counts


def plan(
    workload: Workload,
    offers: Sequence[Offer],
    *,
    constraints: Constraints | None = None,
    throughput_for: ThroughputFor | None = None,
    spot_model: SpotModel | None = None,
    shardings: Sequence[str] | None = None,
    startup_s: Mapping[str, float] | None = None,
    min_billed_seconds: Mapping[str, int] | None = None,
) -> PlanResult:
    """Rank every (offer, node count, market) by the job's estimated total cost within the constraints.

    `shardings`: the strategies the planner may choose from per GPU shape (e.g. none, zero1, zero2, zero3 for
    `--sharding auto`); it takes the one that fits on the fewest GPUs, the least sharded on a tie. Default: the
    workload's own. `startup_s`: each cloud's start-up allowance in seconds (gpuplan.calibration.startup), added to
    every option's hours as `gpuplan launch` adds it (gpuplan.estimating.job_hours); none given: no start-up.
    `min_billed_seconds`: each cloud's billing minimum (the provider's); options are ranked and tagged on the exact
    cost (gpuplan.planning.job_cost), never on a rounded one.
    """
    constraints = constraints or Constraints()
    spot_model = spot_model or SpotModel()
    throughput_for = throughput_for or (lambda _gpu: None)
    markets = [False, True] if constraints.spot is None else [constraints.spot]
    estimates: dict[tuple[str, int, int, str], Estimate | str] = {}
    needed: dict[tuple[str, int], tuple[int, str] | None] = {}
    strategies = tuple(shardings or (workload.sharding,))
    gpu_specs: dict[str, GpuSpec | None] = {}
    kept: list[Option] = []
    rejected: list[Option] = []

    def spec_of(name: str) -> GpuSpec | None:
        if name not in gpu_specs:
            try:
                gpu_specs[name] = resolve_gpu(name)
            except ValueError:
                gpu_specs[name] = None
        return gpu_specs[name]

    for spot in markets:
        for offer in _cheapest_zone(offers, spot):
            base = Option(offer.cloud, offer.region, offer.zone, offer.instance_type, offer.gpu, offer.gpu_count,
                          1, spot, offer.price(spot), None, None, False)
            gpu = spec_of(offer.gpu)
            if gpu is None:
                rejected.append(replace(base, reason=f"no specification for GPU {offer.gpu}"))
                continue
            if offer.gpu_count < 1 or offer.gpu_count != int(offer.gpu_count):
                rejected.append(replace(base, reason=f"a fraction of a GPU ({offer.gpu_count:g}) cannot train"))
                continue
            per_node = int(offer.gpu_count)
            if gpu.peak_tflops(precision_for(gpu, workload.precision)[0]) is None:
                rejected.append(replace(base, reason=f"{gpu.name} cannot run {workload.precision}"))
                continue
            need_key = (gpu.name, per_node)
            most_nodes = constraints.nodes or constraints.max_nodes
            if need_key not in needed:
                needed[need_key] = fewest_gpus(workload, gpu, per_node, per_node * most_nodes, strategies)
            if needed[need_key] is None:
                rejected.append(replace(base, nodes=most_nodes, reason=f"does not fit on {most_nodes} nodes of "
                                                                       f"{per_node} x {gpu.name}"))
                continue
            need, sharding = needed[need_key]  # type: ignore[misc]
            sharded = workload if sharding == workload.sharding else replace(workload, sharding=sharding)
            # Price node counts from the fewest that fit upwards. Without a deadline the first one that passes is
            # the cheapest (scaling efficiency < 1: more nodes only cost more). With one, the first that meets it
            # is the cheapest on time and the larger ones are faster, for the Pareto front. Each offer that never
            # passes is explained once, by its last attempt (the most nodes tried, or the first limit it broke).
            last_rejected: Option | None = None
            passed = False
            counts = [constraints.nodes] if constraints.nodes else _node_counts(need, per_node,
                                                                                constraints.max_nodes)
            for nodes in counts:
                option = _priced_option(offer, gpu, sharded, nodes, per_node, spot, estimates, throughput_for,
                                        spot_model, (startup_s or {}).get(offer.cloud, 0.0),
                                        (min_billed_seconds or {}).get(offer.cloud, 0))
                reason = option.reason or _constraint_violation(option, constraints)
                if reason is None:
                    kept.append(option)
                    passed = True
                    if constraints.deadline_hours is None:
                        break
                    continue
                last_rejected = option if option.reason else replace(option, reason=reason)
                if option.reason is None and "deadline" not in reason:
                    break  # price and total cost only grow with more nodes
            if not passed and last_rejected is not None:
                rejected.append(last_rejected)

    kept.sort(key=lambda o: (o.est_cost_usd or Decimal(0), o.est_hours or 0.0, o.cloud, o.region, o.instance_type))
    rejected.sort(key=lambda o: (o.cloud, o.instance_type, o.region, o.spot, o.nodes))
    return _tagged(PlanResult(tuple(kept), tuple(rejected)))


def _priced_option(offer: Offer, gpu: GpuSpec, workload: Workload, nodes: int, per_node: int, spot: bool,
                   estimates: dict[tuple[str, int, int, str], Estimate | str], throughput_for: ThroughputFor,
                   spot_model: SpotModel, startup_s: float = 0.0, min_billed_seconds: int = 0) -> Option:
    """The option for `nodes` of this offer: estimated (once per shape), priced, spot-stretched."""
    key = (gpu.name, per_node, nodes, workload.sharding)
    if key not in estimates:
        try:
            hardware = Hardware(gpu, gpus=per_node * nodes, nodes=nodes, gpus_per_node=per_node)
            estimates[key] = estimate(workload, hardware, throughput_for(gpu))
        except ValueError as exc:
            estimates[key] = str(exc)
    est = estimates[key]
    price = offer.price(spot)
    assert price is not None
    total_price = price * nodes
    common = (offer.cloud, offer.region, offer.zone, offer.instance_type, offer.gpu, offer.gpu_count, nodes, spot,
              total_price)
    if isinstance(est, str):
        return Option(*common, None, None, False, reason=est, sharding=workload.sharding)
    stretch = None
    reason = None if est.fits else (est.fit_hint or "does not fit in GPU memory")
    if spot:
        stretch = spot_model.stretch(offer.cloud, nodes)
        if stretch is None:
            reason = f"spot interruptions on {nodes} nodes leave no progress"
    breakdown = job_hours(est.wall_hours, startup_s=startup_s, stretch=stretch)
    hours = breakdown.total
    if not within("hours", hours):  # 1e18 tokens of a 1e15-parameter model: finite, but no plan
        return Option(*common, hours, None, False, reason=f"takes {hours:.3g} h, more than 100 years",
                      sharding=workload.sharding, hours=breakdown)
    cost = job_cost(total_price, 1, hours, min_billed_seconds=min_billed_seconds)  # exact: rounded for display only
    return Option(*common, hours, cost, est.fits, reason=reason, sharding=workload.sharding,
                  tokens_per_s_per_gpu=est.tokens_per_s_per_gpu, mfu=est.mfu, mfu_source=est.mfu_source,
                  scaling_efficiency=est.scaling_efficiency, interruption_stretch=stretch, hours=breakdown)


def _constraint_violation(option: Option, constraints: Constraints) -> str | None:
    if constraints.max_price_per_hour is not None and option.price_per_hour is not None \
            and option.price_per_hour > constraints.max_price_per_hour:
        return f"${option.price_per_hour:,.2f}/h is above the limit ${constraints.max_price_per_hour:,.2f}/h"
    if constraints.deadline_hours is not None and option.est_hours is not None \
            and option.est_hours > constraints.deadline_hours:
        return f"takes {option.est_hours:,.1f} h, past the {constraints.deadline_hours:g} h deadline"
    if constraints.budget_usd is not None and option.est_cost_usd is not None \
            and option.est_cost_usd > constraints.budget_usd:
        return f"costs ${option.est_cost_usd:,.2f}, over the ${constraints.budget_usd:,.2f} budget"
    return None


def _tagged(result: PlanResult) -> PlanResult:
    """Mark the cheapest, the fastest and the Pareto front (cost vs time) among the kept options."""
    if not result.options:
        return result
    cheapest, fastest = result.cheapest, result.fastest
    front = {id(o) for o in result.pareto()}
    tagged = []
    for option in result.options:
        tags = []
        if option is cheapest:
            tags.append("cheapest")
        if option is fastest:
            tags.append("fastest")
        if id(option) in front:
            tags.append("pareto")
        tagged.append(replace(option, tags=tuple(tags)) if tags else option)
    return PlanResult(tuple(tagged), result.rejected)
