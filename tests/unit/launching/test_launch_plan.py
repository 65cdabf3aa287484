"""Launch planning: the planner picks a cloud offer within the spec, and the estimate prices it."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.choose import planned_offer
from gpuplan.launching.estimate import estimate_run
from gpuplan.launching.offer import LaunchPlan

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


def test_the_specs_node_count_is_honoured_even_when_fewer_would_fit() -> None:
    one = planned_offer(parse_spec(SPEC), "aws", "aws")
    spec = parse_spec(SPEC.replace('regions: ["us-*"]', 'regions: ["us-*"], nodes: 2'))
    two = planned_offer(spec, "aws", "aws")
    assert one is not None and one.nodes == 1
    assert two is not None and two.nodes == 2 and two.gpus_per_node == 8
    est_one, est_two = estimate_run(parse_spec(SPEC), one), estimate_run(spec, two)
    assert est_one is not None and est_two is not None and est_two.hours < est_one.hours


def test_launch_dry_run_starts_the_nodes_the_spec_asks_for(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from support.clihelp import run_cli

    path = tmp_path / "job.yaml"
    path.write_text(SPEC.replace('regions: ["us-*"]', 'regions: ["us-*"], nodes: 2'))
    result = run_cli("launch", str(path), "--provider", "aws", "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["nodes"] == 2 and result.json()["gpus_per_node"] == 8
    planned = run_cli("plan", str(path), "--json", "--limit", "0")
    assert planned.exit_code == 0, planned.stderr
    rows = planned.json()
    assert rows and {(r["nodes"], r["gpus_per_node"]) for r in rows} == {(2, 8)}
    capped = run_cli("plan", str(path), "--max-nodes", "1")
    assert capped.exit_code == 2 and "--max-nodes 1 is below the spec's resources.nodes 2" in capped.stderr


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
