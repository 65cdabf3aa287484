"""Launch planning: the planner picks a cloud offer within the spec, and the estimate prices it."""

from __future__ import annotations

from decimal import Decimal

import pytest
from gpuplan.jobs.spec import parse_spec

from gpuplan.errors import UserError
from gpuplan.launch import LaunchPlan, estimate_run, planned_offer

SPEC = """\
name: llama
image: img:1
command: python train.py
resources: {gpu: "H100:8", regions: ["us-*"]}
workload: {model: llama-2-7b, tokens: 20B, seq_len: 4096, sharding: zero3}
"""


def test_planner_picks_an_on_demand_aws_offer_within_the_spec() -> None:
    spec = parse_spec(SPEC)
    offer = planned_offer(spec, "aws", "aws")
    assert offer is not None
    assert offer.cloud == "aws" and offer.gpu == "H100" and offer.gpus_per_node == 8 and not offer.spot
    assert offer.instance_type and offer.region and offer.region.startswith("us-")
    assert offer.price_per_hour is not None and offer.price_per_hour > 0
    est = estimate_run(spec, offer)
    assert est is not None and est.hours > 0 and est.source.startswith("estimate")
    expected = Decimal(str(est.hours)) * offer.price_per_hour * offer.nodes
    assert est.cost_usd == pytest.approx(expected, rel=Decimal("1e-6"))
    plan = LaunchPlan(spec=spec, spec_text=SPEC, source_dir=None, offer=offer, estimate=est)
    assert plan.as_dict()["instance_type"] == offer.instance_type


def test_spot_only_when_the_spec_asks() -> None:
    offer = planned_offer(parse_spec(SPEC.replace('regions: ["us-*"]', 'regions: ["us-*"], spot: true')),
                          "aws", "aws")
    assert offer is not None and offer.spot


def test_nothing_fits_is_a_user_error_with_reasons() -> None:
    spec = parse_spec(SPEC + "limits: {budget_usd: 1}\n")
    with pytest.raises(UserError, match="no aws offer fits llama"):
        planned_offer(spec, "aws", "aws")


def test_no_workload_no_plan() -> None:
    spec = parse_spec("name: x\ncommand: a\nworkload: {seq_len: 128}\n")
    assert planned_offer(spec, "gcp", "gcp") is None
