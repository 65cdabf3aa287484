"""`gpuplan plan` as a user runs it: flags or a job spec, JSON contract, --explain, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.clihelp import run_cli

KEYS = ["cloud", "region", "instance_type", "gpu", "gpus_per_node", "nodes", "spot", "price_per_hour",
        "est_hours", "est_cost_usd", "fits", "reason"]


def test_json_options_sorted_by_cost_with_the_documented_keys() -> None:
    result = run_cli("plan", "--model", "llama-2-7b", "--tokens", "140B", "--no-spot", "--limit", "0", "--json")
    assert result.exit_code == 0, result.stderr
    rows = result.json()
    assert len(rows) > 50
    assert list(rows[0])[: len(KEYS)] == KEYS
    costs = [r["est_cost_usd"] for r in rows]
    assert costs == sorted(costs)
    assert all(r["fits"] and r["reason"] is None and r["spot"] is False for r in rows)
    assert "cheapest" in rows[0]["tags"]
    for row in rows[:5]:
        assert row["est_cost_usd"] == pytest.approx(row["price_per_hour"] * row["est_hours"], abs=0.01)


def test_filters_deadline_and_budget() -> None:
    result = run_cli("plan", "--params", "7B", "--tokens", "140B", "--gpu", "H100,A100-80GB", "--cloud", "aws",
                     "--region", "us-*", "--deadline", "72h", "--budget", "60000", "--json", "--limit", "0")
    rows = result.json()
    assert rows, result.stderr
    assert {r["gpu"] for r in rows} <= {"H100", "A100-80GB"}
    assert {r["cloud"] for r in rows} == {"aws"} and all(r["region"].startswith("us-") for r in rows)
    assert all(r["est_hours"] <= 72 and r["est_cost_usd"] <= 60000 for r in rows)


def test_explain_lists_dropped_options_with_reasons() -> None:
    result = run_cli("plan", "--params", "70B", "--tokens", "1T", "--gpu", "T4,L4", "--max-nodes", "2",
                     "--explain", "--json", "--limit", "0")
    assert result.exit_code == 0, result.stderr
    rows = result.json()
    assert rows and all(not r["fits"] or r["reason"] for r in rows)
    reasons = {r["reason"] for r in rows}
    # T4 has no bf16: plan falls back to fp16 as estimate and bench do (issue 24), so T4 is dropped for memory.
    assert not any("cannot run bf16" in r for r in reasons)
    assert any("does not fit" in r for r in reasons)
    assert {r["gpu"] for r in rows if "does not fit" in r["reason"]} >= {"T4"}
    human = run_cli("plan", "--params", "70B", "--tokens", "1T", "--gpu", "T4,L4", "--max-nodes", "2", "--explain")
    assert human.exit_code == 0
    assert "nothing fits" in human.stderr and "dropped" in human.stdout


def test_job_spec_drives_the_plan(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(
        "name: llama\ncommand: torchrun train.py\n"
        "resources:\n  gpu: H100\n  clouds: [aws]\n  spot: true\n"
        "workload:\n  model: llama-2-7b\n  tokens: 20B\n  sharding: zero3\n"
        "limits:\n  budget_usd: 50000\n  deadline: 48h\n"
        "checkpoint:\n  dir: /ckpt\n  interval: 30m\n"
    )
    result = run_cli("plan", str(spec), "--json")
    assert result.exit_code == 0, result.stderr
    rows = result.json()
    assert rows
    assert all(r["gpu"] == "H100" and r["cloud"] == "aws" and r["spot"] for r in rows)
    assert all(r["est_hours"] <= 48 and r["est_cost_usd"] <= 50000 for r in rows)
    assert all(r["interruption_stretch"] > 1 for r in rows)


def test_a_spec_that_states_the_layout_is_planned_with_the_config_model(tmp_path: Path) -> None:
    """The spec's tp/pp/pp_schedule/recompute/tp_overlap/interconnect reach the estimate as estimate's flags do:
    plan's speed for that shape is the one `estimate` gives with the same flags."""
    spec = tmp_path / "job.yaml"
    layout = ("  tp: 8\n  pp: 2\n  pp_schedule: interleaved\n  recompute: selective\n  tp_overlap: true\n"
              "  interconnect: efa-p5\n")
    head = "name: x\ncommand: torchrun train.py\nresources:\n  gpu: H100\n  clouds: [aws]\n  nodes: 8\n"
    spec.write_text(head + "workload:\n  model: llama-2-70b\n  tokens: 20B\n  sharding: zero1\n" + layout)
    rows = run_cli("plan", str(spec), "--json", "--no-spot").json()
    assert rows and all(r["mfu_source"] == "model" for r in rows)
    same = run_cli("estimate", "--model", "llama-2-70b", "--tokens", "20B", "--gpu", "H100", "--gpus", "64",
                   "--sharding", "zero1", "--tp", "8", "--pp", "2", "--pp-schedule", "interleaved", "--recompute",
                   "selective", "--tp-overlap", "--interconnect", "efa-p5", "--json").json()
    assert rows[0]["tokens_per_s_per_gpu"] == pytest.approx(same["tokens_per_s_per_gpu"])
    # Without the layout the same one model answers, with the default layout (issue 33: no second model).
    spec.write_text(head + "workload:\n  model: llama-2-70b\n  tokens: 20B\n  sharding: fsdp\n"
                    "  activation_checkpointing: true\n")
    plain = run_cli("plan", str(spec), "--json", "--no-spot").json()
    assert plain and all(r["mfu_source"] == "model" for r in plain)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--params", "7B", "--tokens", "1B", "--gpu", "XYZ"], "unknown GPU"),
        (["--params", "7B", "--tokens", "1B", "--cloud", "oracle"], "unknown cloud"),
        (["--params", "7B", "--tokens", "1B", "--deadline", "soon"], "--deadline"),
        (["--params", "7B", "--tokens", "1B", "--deadline", "-3h"], "--deadline"),
        (["--params", "7B", "--tokens", "1B", "--budget", "-5"], "--budget"),
        (["--params", "7B", "--tokens", "1B", "--region", "us-[east"], "region"),
        (["--params", "7B", "--tokens", "1B", "--region", "mars-*"], "--region: 'mars-*' matches no region"),
        (["--params", "-7B", "--tokens", "1B"], "--params"),
        (["--tokens", "1B"], "which model"),
        (["--params", "7B", "--tokens", "1B", "--throughput", "3000"], "one --gpu"),
    ],
)
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = run_cli("plan", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr


def test_a_spec_region_that_matches_nothing_is_named(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: 'true'\nresources: {regions: [us-est-*]}\n"
                    "workload:\n  params: 1B\n  tokens: 1B\n")
    result = run_cli("plan", str(spec))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {spec}: resources.regions: 'us-est-*' matches no region")


def test_spec_and_flags_conflict(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: x\ncommand: true\nworkload:\n  params: 1B\n  tokens: 1B\n")
    result = run_cli("plan", str(spec), "--params", "7B")
    assert result.exit_code == 2 and "not both" in result.stderr


def test_plan_falls_back_to_fp16_like_estimate() -> None:
    """Issue 24: V100 with bf16 is planned in fp16, with the same note estimate prints."""
    result = run_cli("plan", "--params", "1B", "--tokens", "10B", "--gpu", "V100", "--json", "--limit", "1")
    assert result.exit_code == 0, result.stderr
    assert result.json() and result.json()[0]["gpu"].startswith("V100")
    assert "has no bf16: fp16" in result.stderr
