"""Dollars: the cheapest catalog offers for the estimate's exact setup, and the adapter launch uses."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuplan.catalog import Catalog
from gpuplan.estimating.estimate import Hardware, Workload, estimate
from gpuplan.estimating.from_job import estimate_for_job
from gpuplan.hardware.gpus import resolve_gpu
from gpuplan.planning.estimate_cost import cheapest_offers

from support.clihelp import run_cli


def test_cost_is_price_times_nodes_times_hours_from_the_shipped_catalog() -> None:
    result = estimate(Workload(params=7 * 10**9, tokens=10**11, sharding="zero3"),
                      Hardware(resolve_gpu("H100"), gpus=16))
    rows = cheapest_offers(result, Catalog.load(None).select(gpus={"H100"}), limit=50)
    assert rows, "the shipped snapshot has H100 offers"
    totals = [r["total_usd"] for r in rows]
    assert totals == sorted(totals)
    for row in rows:
        assert row["gpus_per_node"] == 8 and row["nodes"] == 2
        expected = row["price_per_hour"] * 2 * Decimal(str(result.wall_hours))
        assert row["total_usd"] == pytest.approx(expected, abs=Decimal("0.01"))
    assert {r["spot"] for r in rows} == {True, False}
    assert len({(r["cloud"], r["instance_type"], r["spot"]) for r in rows}) == len(rows)  # cheapest region each


def test_cli_cost_and_no_cost_when_it_does_not_fit() -> None:
    data = run_cli("estimate", "--model", "gpt2", "--tokens", "10B", "--gpu", "A10G", "--json").json()
    assert data["cost"] and data["cost"][0]["cloud"] == "aws"
    assert set(data["cost"][0]) == {"cloud", "instance_type", "region", "gpus_per_node", "nodes", "spot",
                                    "price_per_hour", "total_usd"}
    assert data["cost"][0]["total_usd"] <= data["cost"][-1]["total_usd"]
    too_big = run_cli("estimate", "--params", "70B", "--tokens", "1T", "--gpu", "L4", "--gpus", "4", "--json").json()
    assert too_big["fits"] is False and too_big["cost"] == []
    consumer = run_cli("estimate", "--model", "gpt2", "--tokens", "1B", "--gpu", "RTX4090", "--json").json()
    assert consumer["cost"] == []  # no cloud in the catalog rents RTX 4090s


def test_estimate_for_job_reads_the_job_spec_workload() -> None:
    from gpuplan.jobs.spec import WorkloadSpec as JobWorkload

    job = JobWorkload(model="gpt2", tokens="10B", seq_len=1024, sharding="zero2")
    est = estimate_for_job(job, gpu="A100-80GB", gpus_per_node=8, nodes=2)
    assert est.gpus == 16 and est.nodes == 2 and est.seq_len == 1024 and est.sharding == "zero2"
    assert est.mfu_source == "model" and est.wall_hours > 0
    measured = estimate_for_job(JobWorkload(params="1B", tokens="1B", throughput=1000.0), gpu="L4",
                                gpus_per_node=1, nodes=1)
    assert measured.mfu_source == "user" and measured.wall_hours == pytest.approx(1e9 / 1000 / 3600)
    with pytest.raises(ValueError):
        estimate_for_job(JobWorkload(params="1B"), gpu="L4", gpus_per_node=1, nodes=1)
