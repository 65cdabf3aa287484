"""The planner ranks real offers from the shipped catalog by the job's total cost within the constraints."""

from __future__ import annotations

import itertools
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.catalog.catalog import Catalog
from gpuplan.estimating.architecture import preset
from gpuplan.estimating.estimate import Hardware, Workload, estimate
from gpuplan.hardware.gpus import resolve_gpu
from gpuplan.planning.planner import Constraints, SpotModel, plan

AUTO = ("none", "zero1", "zero2", "zero3")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load("sqlite:////nonexistent/none.db")


def llama7b(tokens: int = 140 * 10**9, **kwargs) -> Workload:  # type: ignore[no-untyped-def]
    arch = preset("llama-2-7b")
    kwargs.setdefault("sharding", "zero3")
    kwargs.setdefault("activation_checkpointing", True)
    return Workload(params=arch.param_count(), tokens=tokens, architecture=arch, seq_len=4096, **kwargs)


def test_ranked_by_total_cost_and_cost_is_hours_x_price_x_nodes(catalog: Catalog) -> None:
    result = plan(llama7b(), catalog.select(), constraints=Constraints(spot=False))
    assert len(result.options) > 20
    costs = [o.est_cost_usd for o in result.options]
    assert costs == sorted(costs)
    for option in result.options[:10]:
        assert option.fits and option.reason is None and not option.spot
        hours = Decimal(str(option.est_hours))
        assert abs(option.est_cost_usd - option.price_per_hour * hours) <= Decimal("0.01")
    # The cheapest job is not simply the cheapest hourly price.
    by_hourly = min(result.options, key=lambda o: o.price_per_hour)
    assert by_hourly.est_cost_usd >= result.options[0].est_cost_usd
    assert "cheapest" in result.options[0].tags


def test_estimate_matches_the_estimator_for_the_chosen_shape(catalog: Catalog) -> None:
    workload = llama7b()
    option = plan(workload, catalog.select(gpus={"H100"}, clouds={"aws"}),
                  constraints=Constraints(spot=False)).options[0]
    hardware = Hardware(resolve_gpu("H100"), gpus=int(option.gpus_per_node) * option.nodes, nodes=option.nodes,
                        gpus_per_node=int(option.gpus_per_node))
    assert option.est_hours == pytest.approx(estimate(workload, hardware).wall_hours)


def test_a_model_that_needs_several_nodes(catalog: Catalog) -> None:
    arch = preset("llama-2-70b")
    workload = Workload(params=arch.param_count(), tokens=10**11, architecture=arch, seq_len=4096,
                        sharding="zero3", activation_checkpointing=True)
    result = plan(workload, catalog.select(gpus={"A100-40GB"}), constraints=Constraints(spot=False))
    assert result.options, [o.reason for o in result.rejected][:5]
    assert all(o.nodes * o.gpus_per_node * 40 >= 70 * 16 / 1.2 for o in result.options)  # ZeRO-3 spreads ~16 B/param
    assert result.options[0].nodes > 1


def test_a_nodes_constraint_plans_exactly_that_many_nodes(catalog: Catalog) -> None:
    offers = [o for o in catalog.select(gpus={"H100"}, clouds={"aws"}) if o.gpu_count == 8]
    fewest = plan(llama7b(), offers, constraints=Constraints(spot=False))
    assert {o.nodes for o in fewest.options} == {1}
    two = plan(llama7b(), offers, constraints=Constraints(spot=False, nodes=2))
    assert two.options and {o.nodes for o in two.options} == {2}
    assert two.options[0].est_hours < fewest.options[0].est_hours
    # 70B with ZeRO-3 needs more than one 8 x A100-40GB node: one node exactly is refused with the reason.
    arch = preset("llama-2-70b")
    big = Workload(params=arch.param_count(), tokens=10**11, architecture=arch, seq_len=4096, sharding="zero3",
                   activation_checkpointing=True)
    one = plan(big, catalog.select(gpus={"A100-40GB"}, clouds={"aws"}), constraints=Constraints(spot=False, nodes=1))
    assert not one.options
    assert any("does not fit on 1 nodes" in (o.reason or "") for o in one.rejected)


def test_deadline_buys_more_gpus(catalog: Catalog) -> None:
    offers = catalog.select(gpus={"H100"}, clouds={"aws"})
    relaxed = plan(llama7b(), offers, constraints=Constraints(spot=False)).options[0]
    tight = plan(llama7b(), offers, constraints=Constraints(spot=False,
                                                            deadline_hours=relaxed.est_hours / 3)).options[0]
    assert tight.nodes * tight.gpus_per_node > relaxed.nodes * relaxed.gpus_per_node
    assert tight.est_hours <= relaxed.est_hours / 3
    assert tight.est_cost_usd > relaxed.est_cost_usd  # scaling is not free


def test_impossible_deadline_is_an_answer_with_reasons(catalog: Catalog) -> None:
    offers = catalog.select(gpus={"A10G", "L4"})
    result = plan(llama7b(), offers, constraints=Constraints(deadline_hours=1, max_nodes=4))
    assert result.options == ()
    assert result.rejected and all(o.reason for o in result.rejected)
    assert any("deadline" in (o.reason or "") for o in result.rejected)


def test_budget_and_price_limits(catalog: Catalog) -> None:
    offers = catalog.select(gpus={"H100", "A100-80GB"})
    free = plan(llama7b(), offers, constraints=Constraints(spot=False))
    cap = free.options[3].est_cost_usd
    capped = plan(llama7b(), offers, constraints=Constraints(spot=False, budget_usd=cap))
    assert all(o.est_cost_usd <= cap for o in capped.options)
    assert any("budget" in (o.reason or "") for o in capped.rejected)
    limited = plan(llama7b(), offers, constraints=Constraints(spot=False, max_price_per_hour=Decimal(40)))
    assert all(o.price_per_hour <= 40 for o in limited.options)


def test_spot_pays_for_interruptions() -> None:
    model = SpotModel(interruptions_per_hour={"aws": 0.05}, restart_hours=0.25, checkpoint_hours=1.0)
    # Each interruption loses 0.5 h of work + 0.25 h restart; 0.05/h x 0.75 h = 3.75 % of the time is lost.
    assert model.stretch("aws", 1) == pytest.approx(1 / (1 - 0.0375))
    assert model.stretch("aws", 4) == pytest.approx(1 / (1 - 0.15))
    assert model.stretch("aws", 100) is None


def test_spot_options_are_stretched(catalog: Catalog) -> None:
    result = plan(llama7b(), catalog.select(gpus={"H100"}, clouds={"aws"}), constraints=Constraints(spot=True))
    assert result.options and all(o.spot for o in result.options)
    assert all(o.interruption_stretch and o.interruption_stretch > 1 for o in result.options)


def test_nothing_fits_says_why(catalog: Catalog) -> None:
    workload = Workload(params=10**12, tokens=10**9)
    result = plan(workload, catalog.select(gpus={"T4"}), constraints=Constraints(max_nodes=2))
    assert result.options == ()
    assert all("does not fit" in (o.reason or "") or "cannot" in (o.reason or "") for o in result.rejected)


def test_fractional_gpus_are_rejected_with_a_reason(catalog: Catalog) -> None:
    result = plan(Workload(params=10**8, tokens=10**9), catalog.select(gpus={"L4"}, clouds={"aws"}))
    assert any("fraction" in (o.reason or "") for o in result.rejected)


def test_pareto_front_is_cost_time_optimal(catalog: Catalog) -> None:
    result = plan(llama7b(), catalog.select(), constraints=Constraints(spot=False, deadline_hours=500))
    front = result.pareto()
    assert front[0] is result.options[0]
    for a, b in itertools.pairwise(front):
        assert b.est_cost_usd >= a.est_cost_usd and b.est_hours < a.est_hours
    assert "fastest" in front[-1].tags


def test_auto_sharding_picks_the_least_sharding_that_fits_on_fewest_gpus(catalog: Catalog) -> None:
    offers = catalog.select(gpus={"H100"}, clouds={"aws"})
    plain = plan(llama7b(sharding="none", tp=1, pp=1), offers, constraints=Constraints(spot=False))
    assert plain.options == ()  # 16 B/param for 6.7B params is more than 80 GB: data parallel alone cannot fit
    auto = plan(llama7b(sharding="none", tp=1, pp=1), offers, constraints=Constraints(spot=False), shardings=AUTO)
    assert auto.options and auto.options[0].sharding in ("zero1", "zero2", "zero3")


@given(st.integers(min_value=1, max_value=16), st.integers(min_value=0, max_value=300))
def test_valid_gpu_counts_without_listing_them(per_node: int, max_gpus: int) -> None:
    """min_gpus searches the counts a cloud can give (1..per node, then whole nodes) by index, not by a list."""
    from gpuplan.estimating.counts import count_of_counts as _count_of_counts
    from gpuplan.estimating.counts import valid_count as _valid_count

    expected = list(range(1, min(per_node, max_gpus) + 1))
    expected += [n * per_node for n in range(2, max_gpus // per_node + 1)]
    assert [_valid_count(i, per_node) for i in range(_count_of_counts(per_node, max_gpus))] == expected


def test_a_deadline_plan_keeps_and_explains_what_pricing_every_node_count_would(catalog: Catalog) -> None:
    """The planner skips building an option for a node count that only misses the deadline (issue 33 item 4: most
    of a deadline plan's attempts): what it keeps and the attempt it explains must be what pricing every count gives.
    Reference: each offer priced alone at each count in the same order, keeping the counts that meet the
    deadline and explaining the last one tried."""
    offers = catalog.select(gpus={"L4", "A10G", "H100"}, clouds={"aws"})
    workload = llama7b(sharding="zero1", activation_checkpointing=False)
    constraints = Constraints(deadline_hours=72, spot=False)
    result = plan(workload, offers, constraints=constraints)
    expected_kept: set[tuple[str, str, int]] = set()
    expected_explained: set[tuple[str, str, int]] = set()
    for offer in {(o.region, o.instance_type): o for o in offers if o.price(False) is not None}.values():
        alone = plan(workload, [offer], constraints=Constraints(spot=False, nodes=None, max_nodes=64))
        if not alone.options:
            continue
        first = alone.options[0].nodes
        counts = [first * 2**k for k in range(8) if first * 2**k <= 64]
        met = []
        last = None
        for nodes in counts:
            one = plan(workload, [offer], constraints=Constraints(spot=False, nodes=nodes)).options
            assert one, (offer.instance_type, nodes)
            last = nodes
            if one[0].est_hours <= 72:
                met.append(nodes)
        expected_kept |= {(offer.region, offer.instance_type, n) for n in met}
        if not met and last is not None:
            expected_explained.add((offer.region, offer.instance_type, last))
    kept = {(o.region, o.instance_type, o.nodes) for o in result.options}
    explained = {(o.region, o.instance_type, o.nodes) for o in result.rejected if "deadline" in (o.reason or "")}
    assert kept == expected_kept and kept
    assert explained == expected_explained and explained  # some offers miss the deadline at every count


def test_estimate_takes_the_fewest_gpus_the_planner_already_found() -> None:
    """plan searches the fewest GPUs once per GPU shape and hands it to estimate for every node count it prices
    (issue 33 item 4: estimate searched it again per count, most of a plan's time); the answer is the same."""
    workload = llama7b(sharding="zero1", activation_checkpointing=False)
    hardware = Hardware(resolve_gpu("L4"), gpus=16, nodes=2, gpus_per_node=8)
    searched = estimate(workload, hardware)
    given_count = estimate(workload, hardware, known_min_gpus=searched.min_gpus)
    assert searched.min_gpus is not None and given_count == searched
