"""`gpuplan bench --on ...`: the same bench as a short job through the launch machinery, recorded with its run.

Local and Slurm run for real end to end (real torch steps inside the job); AWS launches on a moto server with
the asked-for instance type (the machine never runs the job there, so the run is capped by its max-hours and
the bench fails clearly); the record-reading path of a cloud run is checked on a run folder holding what
`Provider.fetch_outputs` leaves there (bench.json, or only the job log's result line).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run_cli, run_subprocess

from gpuplan.bench.remote import RESULT_MARKER, job_script, parse_on
from gpuplan.errors import UserError

QUICK = ("--model", "gpt-tiny", "--steps", "3", "--warmup", "1", "--micro-batch", "2", "--seq-len", "64")


def _runs(run_id: str) -> dict:
    result = run_cli("status", run_id, "--json")
    assert result.exit_code == 0, result.stderr
    return result.json()


# ------------------------------------------------------------------------------------------ pure parts


@pytest.mark.parametrize("text, provider, detail", [
    ("aws:p5.48xlarge", "aws", "p5.48xlarge"), ("gcp:a2-highgpu-1g", "gcp", "a2-highgpu-1g"),
    ("slurm", "slurm", None), ("slurm:a100", "slurm", "a100"), ("local", "local", None)])
def test_on_parses(text: str, provider: str, detail: str | None) -> None:
    target = parse_on(text)
    assert (target.provider, target.detail) == (provider, detail)


@pytest.mark.parametrize("text, message", [
    ("azure:nd96", "unknown provider 'azure'"), ("aws:", "PROVIDER[:INSTANCE_TYPE]"),
    ("aws", "needs an instance type"), ("local:big", "takes no instance type"), ("a w s", "PROVIDER")])
def test_bad_on_is_one_line_exit_2(text: str, message: str) -> None:
    with pytest.raises(UserError, match=message.replace("[", r"\[").replace("]", r"\]")):
        parse_on(text)
    result = run_cli("bench", "--on", text, "--steps", "1")
    assert result.exit_code == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and not result.stdout


def test_remote_only_options_need_on() -> None:
    result = run_cli("bench", "--image", "x", "--steps", "1")
    assert result.exit_code == 2 and "--image only apply with --on" in result.stderr


def test_job_script_quotes_everything() -> None:
    script = job_script(["--model", "gpt2; rm -rf /"], "gpuplan==0.1.0 $(evil)")
    assert "'gpt2; rm -rf /'" in script and "'gpuplan==0.1.0 $(evil)'" in script
    assert "--no-save" in script and '"$GPUPLAN_RUN_DIR/bench.json"' in script


def test_unknown_cloud_instance_type_is_exit_2() -> None:
    result = run_cli("bench", "--on", "aws:p99.hugelarge", "--steps", "1")
    assert result.exit_code == 2 and "not in the price catalog" in result.stderr


# ------------------------------------------------------------------------------------------ local, for real


def test_on_local_runs_the_bench_as_a_recorded_run(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    result = run_cli("bench", *QUICK, "--on", "local", "--interval", "0.2", "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    run_id = out["run_id"]
    assert out["id"] >= 1 and out["tokens_per_s"] > 0 and out["device"] == "cpu"
    assert out["model_name"] == "gpt-tiny" and out["steps"] == 3 and out["seq_len"] == 64
    # The run is in the books like any run, with the bench's caps.
    run = _runs(run_id)
    assert run["state"] == "succeeded" and run["provider"] == "local" and run["max_hours"] == 0.5
    assert len(run["instances"]) == 1 and run["instances"][0]["terminated_at"] is not None
    # The job ran the same bench and left its result in the run folder and its log.
    run_dir = Path(run["run_dir"])
    shipped = json.loads((run_dir / "bench.json").read_text())
    assert shipped["tokens_per_s"] == out["tokens_per_s"]
    assert RESULT_MARKER in (run_dir / "node-0" / "job.log").read_text()
    # Recorded once (the job itself saved nothing), with where it came from.
    listed = run_cli("bench", "list", "--json").json()["benchmarks"]
    assert [(b["id"], b["run_id"], b["source"]) for b in listed] == [(out["id"], run_id, "run")]
    table = run_cli("bench", "list")
    assert run_id in table.stdout and "source" in table.stdout


def test_output_writes_the_result_and_no_save_records_nothing(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    target = tmp_path / "r.json"
    result = run_cli("bench", *QUICK, "--no-save", "--output", str(target), "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["id"] is None
    data = json.loads(target.read_text())
    assert data["tokens_per_s"] > 0 and len(target.read_text().splitlines()) == 1
    assert run_cli("bench", "list", "--json").json()["benchmarks"] == []
    local = run_cli("bench", *QUICK, "--json")
    assert run_cli("bench", "list", "--json").json()["benchmarks"][0]["source"] == "local"
    assert local.json()["id"] >= 1


# ------------------------------------------------------------------------------------------ slurm, for real


def test_on_slurm_runs_the_bench_on_the_test_cluster(slurm: object, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("torch")
    for key, value in {**slurm.env(), "GPUPLAN_SLURM_PRICE_PER_NODE_HOUR": "3.60"}.items():  # type: ignore[attr-defined]
        monkeypatch.setenv(key, value)
    result = run_cli("bench", *QUICK, "--on", "slurm", "--interval", "0.3", "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["tokens_per_s"] > 0 and out["device"] == "cpu"
    run = _runs(out["run_id"])
    assert run["provider"] == "slurm" and run["state"] == "succeeded"
    assert run["budget_usd"] == pytest.approx(1.80)  # max-hours x the charge-back rate: a hard cap
    assert run["instances"][0]["instance_id"].isdigit()  # a real Slurm job id
    [bench] = run_cli("bench", "list", "--json").json()["benchmarks"]
    assert bench["run_id"] == out["run_id"] and bench["tokens_per_s"] == out["tokens_per_s"]


# ------------------------------------------------------------------------------------------ aws (moto server)


@pytest.mark.slow
def test_on_aws_launches_the_instance_type_and_caps_it(moto_server: object) -> None:
    import boto3

    result = run_subprocess("bench", *QUICK, "--on", "aws:p5.48xlarge", "--max-hours", "0.001",
                            "--interval", "0.5", timeout=120)
    # moto starts the machine but never runs its boot script: the run hits its max-hours cap and is stopped.
    assert result.exit_code == 1, result.stderr
    assert "bench run r-" in result.stderr and "ended capped" in result.stderr
    assert "p5.48xlarge" in result.stderr
    runs = run_cli("runs", "--json").json()
    [run] = runs["runs"] if isinstance(runs, dict) else runs
    detail = _runs(run["run_id"])
    assert detail["instance_type"] == "p5.48xlarge" and detail["state"] == "capped"
    assert float(detail["budget_usd"]) > 0
    region = detail["region"]
    ec2 = boto3.client("ec2", region_name=region, endpoint_url=moto_server.endpoint)  # type: ignore[attr-defined]
    described = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    assert [(i["InstanceType"], i["State"]["Name"]) for i in described] == [("p5.48xlarge", "terminated")]
    assert run_cli("bench", "list", "--json").json()["benchmarks"] == []  # no result, no record
