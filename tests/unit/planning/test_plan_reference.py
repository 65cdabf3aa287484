"""The planner's shortcuts change nothing (issue 33 item 4): every option it keeps or explains is the option that
pricing its offer alone, the slow way, gives.

`plan` shares work between offers (one estimate per GPU shape, node count and network; one timing per instance
type, market and count; the deadline misses of a type counted once) and the estimator memoises pure functions
(gpuplan.estimating.memos). The reference here shares nothing: for each option it empties every memo, estimates
that offer's shape with `estimate` (searching the fewest GPUs itself), stretches it for spot, adds the start-up and
prices it with `job_cost`, and builds the Option field by field. The plan must match it exactly (floats and
Decimals bit for bit), and be ranked by its exact cost.
"""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from gpuplan.catalog.catalog import Catalog
from gpuplan.catalog.offer import Offer
from gpuplan.estimating import memos
from gpuplan.estimating.architecture import preset
from gpuplan.estimating.estimate import Estimate, Hardware, Workload, estimate
from gpuplan.estimating.job_hours import job_hours
from gpuplan.hardware.gpus import resolve_gpu
from gpuplan.hardware.networks import inter_node_gbps
from gpuplan.planning.job_cost import job_cost
from gpuplan.planning.planner import Constraints, Option, SpotModel, plan

AUTO = ("none", "zero1", "zero2", "zero3")
STARTUP = {"aws": 300.0, "gcp": 240.0, "azure": 420.0}
MINIMUM = {"aws": 60, "gcp": 60, "azure": 0}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load("sqlite:////nonexistent/none.db")


def _workload(name: str, tokens: int, **kwargs: object) -> Workload:
    arch = preset(name)
    return Workload(arch.param_count(), tokens, arch, seq_len=4096, **kwargs)  # type: ignore[arg-type]


def _reference(option: Option, offer: Offer, workload: Workload, spot_model: SpotModel) -> Option:
    """`option` recomputed from its offer alone, with every memo empty."""
    memos.forget()
    gpu, per_node, nodes = resolve_gpu(option.gpu), int(option.gpus_per_node), option.nodes
    sharded = workload if option.sharding == workload.sharding else replace(workload, sharding=option.sharding)
    hardware = Hardware(gpu, gpus=per_node * nodes, nodes=nodes, gpus_per_node=per_node,
                        network_gbps=inter_node_gbps(offer.instance_type, nodes))
    est: Estimate = estimate(sharded, hardware)
    stretch = spot_model.stretch(offer.cloud, nodes) if option.spot else None
    hours = job_hours(est.wall_hours, startup_s=STARTUP[offer.cloud], stretch=stretch)
    price = offer.price(option.spot)
    assert price is not None
    cost = job_cost(price, nodes, hours.total, min_billed_seconds=MINIMUM[offer.cloud])
    return Option(offer.cloud, offer.region, offer.zone, offer.instance_type, offer.gpu, offer.gpu_count, nodes,
                  option.spot, price * nodes, hours.total, cost, est.fits, reason=option.reason,
                  sharding=option.sharding, tokens_per_s_per_gpu=est.tokens_per_s_per_gpu, mfu=est.mfu,
                  mfu_source=est.mfu_source, scaling_efficiency=est.scaling_efficiency,
                  interruption_stretch=stretch, tags=option.tags, hours=hours)


@pytest.mark.parametrize(("workload", "constraints"), [
    # The bench's three workloads on the whole catalog: one node count per offer in both markets; every count with
    # a deadline (the misses skipped once per type); multi-node ZeRO-3 (each instance type's own network).
    (_workload("llama-2-7b", 140 * 10**9), Constraints()),
    (_workload("llama-2-7b", 140 * 10**9), Constraints(deadline_hours=72, budget_usd=Decimal(60_000))),
    (_workload("llama-2-70b", 2 * 10**12, sharding="zero3", activation_checkpointing=True), Constraints()),
], ids=["7b-auto", "7b-deadline-budget", "70b-zero3"])
def test_every_option_is_what_pricing_its_offer_alone_gives(catalog: Catalog, workload: Workload,
                                                            constraints: Constraints) -> None:
    offers = catalog.select()
    spot_model = SpotModel()
    memos.forget()
    result = plan(workload, offers, constraints=constraints, shardings=AUTO if workload.sharding == "none" else None,
                  spot_model=spot_model, startup_s=STARTUP, min_billed_seconds=MINIMUM)
    # A GCP n1 host takes several GPUs: the GPU and its count tell its offers apart.
    by_place = {(o.cloud, o.region, o.zone, o.instance_type, o.gpu, o.gpu_count): o for o in offers}
    priced = [o for o in result.rejected if o.est_cost_usd is not None]
    assert len(result.options) > 100  # and the dropped ones with a cost: spot without progress, deadline, budget
    for option in [*result.options, *priced]:
        offer = by_place[(option.cloud, option.region, option.zone, option.instance_type, option.gpu,
                          option.gpus_per_node)]
        assert option == _reference(option, offer, workload, spot_model), option
    # Ranked by the exact cost, then time and place (gpuplan.planning.job_cost).
    keys = [(o.est_cost_usd, o.est_hours, o.cloud, o.region, o.instance_type) for o in result.options]
    assert keys == sorted(keys)  # type: ignore[type-var]
    if constraints.deadline_hours is not None:  # both limits explained on priced options
        reasons = " ".join(o.reason or "" for o in priced)
        assert "past the 72 h deadline" in reasons and "budget" in reasons
