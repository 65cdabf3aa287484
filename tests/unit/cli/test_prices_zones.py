"""`gpuplan prices` and zones: the regular zone ranks first, the Local Zone is labelled; GB filter; GPU names."""

from __future__ import annotations

from support.clihelp import run_cli, run_subprocess


def test_h100_spot_ranks_the_regular_zone_and_labels_the_local_zone() -> None:
    result = run_subprocess("prices", "--gpu", "H100", "--cloud", "aws", "--spot", "--region", "us-east-1")
    assert result.exit_code == 0, result.stderr
    first = result.stdout.splitlines()[2].split()
    assert first[:4] == ["aws", "us-east-1", "use1-az6", "p5.48xlarge"] and "17.629" in first
    assert "use1-atl2-az1" not in result.stdout
    assert "p5.48xlarge in use1-atl2-az1 (local-zone of us-east-1) at $10.240/h; --zones all" in result.stderr
    every = run_cli("prices", "--gpu", "H100", "--cloud", "aws", "--spot", "--region", "us-east-1", "--zones", "all")
    assert "use1-atl2-az1 (local-zone)" in every.stdout and "use1-az6" in every.stdout
    local = run_cli("prices", "--gpu", "H100", "--cloud", "aws", "--spot", "--zones", "local", "--json")
    assert {r["zone_type"] for r in local.json()} == {"local-zone"}


def test_min_gpu_memory_compares_vendor_gb() -> None:
    l4 = run_cli("prices", "--gpu", "L4", "--min-gpu-memory", "24", "--cloud", "aws", "--json", "--limit", "0")
    assert l4.exit_code == 0 and l4.json() and {r["gpu_memory_gb"] for r in l4.json()} == {24}
    l40s = run_cli("prices", "--gpu", "L40S", "--min-gpu-memory", "48", "--json", "--limit", "0")
    assert {r["cloud"] for r in l40s.json()} >= {"aws"}


def test_a_gpu_no_cloud_rents_is_an_answer() -> None:
    result = run_cli("prices", "--gpu", "RTX 4090")
    assert result.exit_code == 0 and result.stdout == ""
    assert "no cloud in the catalog (aws, gcp, azure) rents RTX4090" in result.stderr and "unknown" not in result.stderr
    assert run_cli("prices", "--gpu", "RTX 4090", "--json").json() == []


def test_a100_means_the_same_part_in_prices_estimate_and_plan() -> None:
    prices = run_cli("prices", "--gpu", "A100", "--json", "--limit", "0").json()
    assert {r["gpu"] for r in prices} == {"A100-40GB"}
    estimate = run_cli("estimate", "--params", "1B", "--tokens", "1B", "--gpu", "A100", "--gpus", "8", "--json")
    assert estimate.exit_code == 0, estimate.stderr
    assert estimate.json()["gpu"] == "A100-40GB"
    plan = run_cli("plan", "--params", "1B", "--tokens", "1B", "--gpu", "A100", "--json", "--limit", "0")
    assert plan.exit_code == 0, plan.stderr
    assert {r["gpu"] for r in plan.json()} == {"A100-40GB"}


def test_a_spec_naming_a100_plans_the_same_part(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = tmp_path / "job.yaml"
    spec.write_text("name: a100\ncommand: python train.py\nresources: {gpu: \"A100:8\", clouds: [aws]}\n"
                    "workload: {params: 1B, tokens: 1B}\n")
    plan = run_cli("plan", str(spec), "--json", "--limit", "0")
    assert plan.exit_code == 0, plan.stderr
    assert plan.json() and {(r["gpu"], r["gpus_per_node"]) for r in plan.json()} == {("A100-40GB", 8)}


def test_estimate_costs_use_regular_zone_prices() -> None:
    result = run_cli("estimate", "--model", "llama-2-7b", "--tokens", "200B", "--gpu", "H100", "--gpus", "16",
                     "--sharding", "zero3", "--global-batch", "512", "--json")
    assert result.exit_code == 0, result.stderr
    aws_spot = [c for c in result.json()["cost"] if c["cloud"] == "aws" and c["spot"]]
    assert aws_spot and all(c["price_per_hour"] != 10.2397 for c in aws_spot)  # not Atlanta's Local Zone


def test_plan_says_no_cloud_rents_a_consumer_gpu() -> None:
    result = run_cli("plan", "--params", "1B", "--tokens", "1B", "--gpu", "RTX 4090")
    assert result.exit_code == 0
    assert "no cloud in the catalog (aws, gcp, azure) rents RTX4090" in result.stderr
    assert "unknown GPU" not in result.stderr
