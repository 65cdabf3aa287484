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
from gpuplan.estimating.job_hours import HoursBreakdown
from gpuplan.hardware.gpus import GpuSpec, resolve_gpu
from gpuplan.hardware.networks import inter_node_gbps
from gpuplan.planning.count_timing import CountTiming, count_timing
from gpuplan.planning.job_cost import cost_of_billed

DEFAULT_RESTART_HOURS = 0.25  # provisioning a new node + pulling the image + loading the checkpoint
DEFAULT_CHECKPOINT_HOURS = 1.0
MAX_USEFUL_FRACTION_LOST = 0.9  # beyond this an interrupted job makes no useful progress


def default_interruption_rates() -> dict[str, float]:
    """Spot interruptions per node-hour per cloud, as each provider declares them with its sources
    (`Provider.spot_interruptions_per_hour`: AWS 1/20, GCP 1/12, Azure's eviction rate, ...). No cloud publishes a
    rate for GPU spot capacity, so these are conservative round figures; `--interruption-rate` overrides them and
    the planner's output states which rate it used."""
    from gpuplan.providers.registry import catalog_providers

    return {cloud: cls.spot_interruptions_per_hour for cloud, cls in catalog_providers().items()
            if cls.spot_interruptions_per_hour is not None}


@dataclass(frozen=True)
class SpotModel:
    """Expected interruption overhead: each interruption loses half a checkpoint interval plus a restart, or,
    where past relaunches measured it (gpuplan.runs.interruption_loss), the mean work they lost."""

    interruptions_per_hour: dict[str, float] = field(default_factory=default_interruption_rates)
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


@dataclass(frozen=True, slots=True)
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
    shapes = _Shapes(workload, constraints, tuple(shardings or (workload.sharding,)))
    timings = _Timings(spot_model or SpotModel(), throughput_for or (lambda _gpu: None), startup_s or {},
                       min_billed_seconds or {})
    markets = [False, True] if constraints.spot is None else [constraints.spot]
    deadline = constraints.deadline_hours
    max_price = constraints.max_price_per_hour
    kept: list[Option] = []
    rejected: list[Option] = []
    for spot in markets:
        for offer in _cheapest_zone(offers, spot):
            price = offer.price(spot)
            assert price is not None  # _cheapest_zone keeps only offers priced in this market
            shape = shapes.of(offer.gpu, offer.gpu_count)
            if isinstance(shape, _Refusal):
                rejected.append(Option(offer.cloud, offer.region, offer.zone, offer.instance_type, offer.gpu,
                                       offer.gpu_count, shape.nodes, spot, price, None, None, False,
                                       reason=shape.reason))
                continue
            # Price node counts from the fewest that fit upwards. Without a deadline the first one that passes is
            # the cheapest (scaling efficiency < 1: more nodes only cost more). With one, the first that meets it
            # is the cheapest on time and the larger ones are faster, for the Pareto front. Each offer that never
            # passes is explained once, by its last attempt (the most nodes tried, or the first limit it broke).
            last_rejected: tuple[int, CountTiming, str] | None = None  # built as an Option once, at the end
            passed = False
            last = len(shape.counts) - 1
            row = timings.row(offer, shape, spot)
            # Without a price limit the counts that only miss the deadline are the same for every offer of the type.
            start = timings.leading_misses(row, offer, shape, spot, deadline) \
                if deadline is not None and max_price is None else 0
            for index in range(start, last + 1):
                nodes = shape.counts[index]
                timing = row.timings[index] or timings.fill(row, index, offer, shape, spot)
                total_price = price * nodes
                if index < last and deadline is not None and timing.misses_deadline_only(deadline) and \
                        (max_price is None or total_price <= max_price):
                    continue  # a deadline miss before the last count: rejected, and never the one explained
                reason = timing.reason
                if reason is None:  # it runs: priced, then held against the limits
                    assert timing.billed is not None and timing.hours is not None
                    cost = cost_of_billed(total_price, 1, timing.billed)
                    reason = _constraint_violation(total_price, timing.hours.total, cost, constraints)
                if reason is None:
                    kept.append(_option(offer, spot, nodes, total_price, cost, timing, shape.workload.sharding))
                    passed = True
                    if deadline is None:
                        break
                    continue
                last_rejected = (nodes, timing, reason)
                if timing.reason is None and "deadline" not in reason:
                    break  # price and total cost only grow with more nodes
            if not passed and last_rejected is not None:
                nodes, timing, reason = last_rejected
                total_price = price * nodes
                rejected.append(_option(offer, spot, nodes, total_price,
                                        None if timing.billed is None else cost_of_billed(total_price, 1,
                                                                                          timing.billed),
                                        timing, shape.workload.sharding, reason))

    kept.sort(key=lambda o: (o.est_cost_usd or Decimal(0), o.est_hours or 0.0, o.cloud, o.region, o.instance_type))
    rejected.sort(key=lambda o: (o.cloud, o.instance_type, o.region, o.spot, o.nodes))
    return _tagged(PlanResult(tuple(kept), tuple(rejected)))


@dataclass(frozen=True)
class _Refusal:
    """Why no option of a GPU shape can run, and the node count its explanation names."""

    reason: str
    nodes: int = 1


@dataclass(frozen=True)
class _Shape:
    """A GPU shape the workload fits on: its spec, GPUs per node, the fewest GPUs (and the sharding that fits on
    them), the workload with that sharding and the node counts worth pricing."""

    gpu: GpuSpec
    per_node: int
    need: int
    workload: Workload
    counts: tuple[int, ...]


class _Shapes:
    """Each GPU shape (the catalog's GPU name, GPUs per node) judged once per plan: whether it can run the workload
    and on how many GPUs at least (fewest_gpus, once per GPU and GPUs per node), not once per offer."""

    def __init__(self, workload: Workload, constraints: Constraints, strategies: tuple[str, ...]) -> None:
        self.workload = workload
        self.constraints = constraints
        self.strategies = strategies
        self.shapes: dict[tuple[str, float], _Shape | _Refusal] = {}
        self.needed: dict[tuple[str, int], tuple[int, str] | None] = {}
        self.sharded: dict[str, Workload] = {}

    def of(self, gpu_name: str, gpu_count: float) -> _Shape | _Refusal:
        key = (gpu_name, gpu_count)
        if key not in self.shapes:
            self.shapes[key] = self._judge(gpu_name, gpu_count)
        return self.shapes[key]

    def _judge(self, gpu_name: str, gpu_count: float) -> _Shape | _Refusal:
        workload, constraints = self.workload, self.constraints
        try:
            gpu = resolve_gpu(gpu_name)
        except ValueError:
            return _Refusal(f"no specification for GPU {gpu_name}")
        if gpu_count < 1 or gpu_count != int(gpu_count):
            return _Refusal(f"a fraction of a GPU ({gpu_count:g}) cannot train")
        per_node = int(gpu_count)
        if gpu.peak_tflops(precision_for(gpu, workload.precision)[0]) is None:
            return _Refusal(f"{gpu.name} cannot run {workload.precision}")
        most_nodes = constraints.nodes or constraints.max_nodes
        need_key = (gpu.name, per_node)
        if need_key not in self.needed:
            self.needed[need_key] = fewest_gpus(workload, gpu, per_node, per_node * most_nodes, self.strategies)
        found = self.needed[need_key]
        if found is None:
            return _Refusal(f"does not fit on {most_nodes} nodes of {per_node} x {gpu.name}", most_nodes)
        need, sharding = found
        if sharding not in self.sharded:  # one Workload per strategy, not one per offer (replace validates)
            self.sharded[sharding] = workload if sharding == workload.sharding else replace(workload,
                                                                                           sharding=sharding)
        counts = [constraints.nodes] if constraints.nodes else _node_counts(need, per_node, constraints.max_nodes)
        return _Shape(gpu, per_node, need, self.sharded[sharding], tuple(counts))


@dataclass(slots=True)
class _Row:
    """One instance type in one market within one plan: its timing at each node count of its shape (None: not
    timed yet) and, with a deadline, how many of the first counts only miss it (None: not counted yet)."""

    timings: list[CountTiming | None]
    leading_misses: int | None = None


class _Timings:
    """Each (instance type, market, node count) estimated and timed once per plan (gpuplan.planning.count_timing),
    and each (GPU shape, node count, sharding, network) estimated once: the estimate is the same for every type
    with that network."""

    def __init__(self, spot_model: SpotModel, throughput_for: ThroughputFor, startup_s: Mapping[str, float],
                 min_billed_seconds: Mapping[str, int]) -> None:
        self.spot_model = spot_model
        self.throughput_for = throughput_for
        self.startup_s = startup_s
        self.min_billed_seconds = min_billed_seconds
        self.estimates: dict[tuple[str, int, int, str, float | None], Estimate | str] = {}
        self.rows: dict[tuple[str, str, str, float, bool], _Row] = {}

    def row(self, offer: Offer, shape: _Shape, spot: bool) -> _Row:
        """The timings of this offer's instance type in this market."""
        key = (offer.cloud, offer.instance_type, offer.gpu, offer.gpu_count, spot)
        found = self.rows.get(key)
        if found is None:
            found = self.rows[key] = _Row([None] * len(shape.counts))
        return found

    def leading_misses(self, row: _Row, offer: Offer, shape: _Shape, spot: bool, deadline: float) -> int:
        """How many counts before the last, from the fewest, only miss `deadline` (CountTiming.misses_deadline_only):
        without a price limit the planner skips them for every offer of this type and market."""
        if row.leading_misses is None:
            count = 0
            while count < len(row.timings) - 1 and (row.timings[count] or self.fill(row, count, offer, shape, spot)
                                                    ).misses_deadline_only(deadline):
                count += 1
            row.leading_misses = count
        return row.leading_misses

    def fill(self, row: _Row, index: int, offer: Offer, shape: _Shape, spot: bool) -> CountTiming:
        """Time the `index`th node count of the shape for this offer's type and market, into `row`."""
        nodes = shape.counts[index]
        network = inter_node_gbps(offer.instance_type, nodes)  # the network this type's nodes really have
        timing = count_timing(
            self._estimate(shape, nodes, network), spot=spot, nodes=nodes,
            stretch=self.spot_model.stretch(offer.cloud, nodes) if spot else None,
            startup_s=self.startup_s.get(offer.cloud, 0.0),
            min_billed_seconds=self.min_billed_seconds.get(offer.cloud, 0))
        row.timings[index] = timing
        return timing

    def _estimate(self, shape: _Shape, nodes: int, network: float | None) -> Estimate | str:
        """The estimate for `nodes` nodes of this GPU shape (or why there is none). plan found the fewest GPUs
        once per shape; estimate need not search them again (`known_min_gpus`)."""
        gpu, per_node, workload = shape.gpu, shape.per_node, shape.workload
        key = (gpu.name, per_node, nodes, workload.sharding, network)
        if key not in self.estimates:
            try:
                hardware = Hardware(gpu, gpus=per_node * nodes, nodes=nodes, gpus_per_node=per_node,
                                    network_gbps=network)
                self.estimates[key] = estimate(workload, hardware, self.throughput_for(gpu),
                                               known_min_gpus=shape.need)
            except ValueError as exc:
                self.estimates[key] = str(exc)
        return self.estimates[key]


def _option(offer: Offer, spot: bool, nodes: int, total_price: Decimal, cost: Decimal | None, timing: CountTiming,
            sharding: str, reason: str | None = None) -> Option:
    """The option for `nodes` of this offer from its count's timing; `reason`: why it is dropped (default: the
    timing's own)."""
    common = (offer.cloud, offer.region, offer.zone, offer.instance_type, offer.gpu, offer.gpu_count, nodes, spot,
              total_price)
    why = reason or timing.reason
    est, hours = timing.estimate, timing.hours
    if isinstance(est, str) or hours is None:
        return Option(*common, None, None, False, reason=why, sharding=sharding)
    if cost is None:  # past the sane hours limit
        return Option(*common, hours.total, None, False, reason=why, sharding=sharding, hours=hours)
    return Option(*common, hours.total, cost, est.fits, reason=why, sharding=sharding,
                  tokens_per_s_per_gpu=est.tokens_per_s_per_gpu, mfu=est.mfu, mfu_source=est.mfu_source,
                  scaling_efficiency=est.scaling_efficiency, interruption_stretch=timing.stretch, hours=hours)


def _constraint_violation(price_per_hour: Decimal | None, est_hours: float | None, est_cost_usd: Decimal | None,
                          constraints: Constraints) -> str | None:
    if constraints.max_price_per_hour is not None and price_per_hour is not None \
            and price_per_hour > constraints.max_price_per_hour:
        return f"${price_per_hour:,.2f}/h is above the limit ${constraints.max_price_per_hour:,.2f}/h"
    if constraints.deadline_hours is not None and est_hours is not None \
            and est_hours > constraints.deadline_hours:
        return f"takes {est_hours:,.1f} h, past the {constraints.deadline_hours:g} h deadline"
    if constraints.budget_usd is not None and est_cost_usd is not None \
            and est_cost_usd > constraints.budget_usd:
        return f"costs ${est_cost_usd:,.2f}, over the ${constraints.budget_usd:,.2f} budget"
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
