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

from gpuplan.errors import UserError
from gpuplan.launching.remote_bench_job import RESULT_MARKER, job_script, parse_on

from support.clihelp import run_cli, run_subprocess

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
    ("oracle:bm-gpu", "unknown provider 'oracle'"), ("aws:", "PROVIDER[:INSTANCE_TYPE]"),
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
    # Its recorded estimate is its 0.5 h cap (for the budgets), not a prediction: estimate vs actual shows none
    # for it instead of scoring a ~-99% miss.
    scored = run_cli("report", "--accuracy", "--json")
    assert scored.exit_code == 0, scored.stderr
    [row] = [r for r in scored.json()["runs"] if r["run_id"] == run_id]
    assert row["est_hours"] is None and row["hours_error"] is None and row["actual_hours"] > 0
    assert scored.json()["summary"]["median_abs_hours_error"] is None
    # status and runs show the cap as a cap, not as an estimate the run beat by 99%.
    assert run_cli("status", run_id, "--json").json()["estimate_is_cap"] is True
    status = run_cli("status", run_id)
    assert "no estimate (capped at 0:30:00" in status.stdout and "% time" not in status.stdout
    listed_runs = run_cli("runs")
    assert "<= 0:30:00" in listed_runs.stdout


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


# ------------------------------------------------------------------------------------------ a cloud run's folder


def _cloud_run(store: object, run_dir: Path) -> str:
    """A finished AWS bench run as the books hold it once its machine is gone."""
    import datetime as dt
    from decimal import Decimal

    from gpuplan.store.models import InstanceRow, Run, RunState

    now = dt.datetime.now(dt.timezone.utc)
    with store.session() as s:  # type: ignore[attr-defined]
        run = Run(name="bench-gpt2", provider="aws", cloud="aws", region="us-east-1", instance_type="p5.48xlarge",
                  gpu="H100", state=RunState.SUCCEEDED, spec_text="name: bench-gpt2\n", spec_hash="0" * 64,
                  run_dir=str(run_dir),
                  created_at=now - dt.timedelta(minutes=5), started_at=now - dt.timedelta(minutes=4),
                  ended_at=now, exit_code=0)
        s.add(run)
        s.flush()
        s.add(InstanceRow(run_id=run.id, provider="aws", provider_instance_id="i-0123456789abcdef0", cloud="aws",
                       region="us-east-1", instance_type="p5.48xlarge", gpu="H100", gpu_count=8,
                       price_per_hour=Decimal("55.04"), state="terminated", launched_at=now - dt.timedelta(minutes=4),
                       terminated_at=now))
        return run.id


def _remote_result_json() -> str:
    """What the job on an H100 machine writes (`gpuplan bench --output`): the remote side's device and GPU."""
    from dataclasses import asdict

    from gpuplan.bench.result import BenchResult
    from gpuplan.estimating.architecture import PRESETS

    result = BenchResult(
        model_name="gpt2", model_kind="preset", model_signature=PRESETS["gpt2"].signature(),
        params=PRESETS["gpt2"].param_count(), layers=12,
        full_layers=12, device="cuda:0", device_name="NVIDIA H100 80GB HBM3", gpu="H100", host="ip-10-0-0-7",
        precision="bf16", seq_len=1024, micro_batch=8, steps=20, warmup=5, compiled=False, tokens_per_s=400_000.0,
        samples_per_s=390.6, step_time_p50_s=0.02, step_time_p90_s=0.021, step_time_mean_s=0.0205,
        flops_per_step=10**13, hardware_flops_per_step=10**13, attention_flops_per_step=10**12,
        attention_flops_source="counted", achieved_tflops=400.0, peak_tflops=989.5, peak_tflops_source="gpu_table",
        mfu=0.404, peak_memory_gb=30.0, peak_memory_kind="cuda_max_allocated", final_loss=10.8,
        torch_version="2.5.1")
    return json.dumps(asdict(result))


@pytest.mark.parametrize("layout", ["bench.json", "log-line"])
def test_cloud_run_folder_result_is_recorded_with_its_run(layout: str, tmp_path: Path, db_url: str,
                                                          moto_env: object) -> None:
    """What fetch_outputs leaves in the run folder (bench.json, or only the node's job log with the result
    line) becomes a Benchmark with run_id and the remote device; the real AWS provider does the fetching."""
    from gpuplan.launching.remote_bench import record_remote_result
    from gpuplan.providers.registry import get_provider
    from gpuplan.store.db import Store

    run_dir = tmp_path / "run"
    (run_dir / "node-0").mkdir(parents=True)
    if layout == "bench.json":
        (run_dir / "bench.json").write_text(_remote_result_json() + "\n")
    else:
        (run_dir / "node-0" / "job.log").write_text(
            "bench gpt2: 124,439,808 parameters\n" + RESULT_MARKER + _remote_result_json() + "\n")
    store = Store.open(db_url)
    try:
        run_id = _cloud_run(store, run_dir)
        bench_id, result = record_remote_result(store, run_id, get_provider("aws"))
    finally:
        store.close()
    assert result.gpu == "H100" and result.host == "ip-10-0-0-7"
    [listed] = run_cli("--db", db_url, "bench", "list", "--json").json()["benchmarks"]
    assert listed["id"] == bench_id and listed["run_id"] == run_id and listed["source"] == "run"
    assert listed["gpu"] == "H100" and listed["device_name"] == "NVIDIA H100 80GB HBM3"
    # estimate then uses the remote bench for that GPU, as for a local one
    est = run_cli("--db", db_url, "estimate", "--model", "gpt2", "--gpu", "H100", "--tokens", "1B",
                  "--seq-len", "1024", "--precision", "bf16", "--json")
    assert est.exit_code == 0, est.stderr
    assert est.json()["mfu_source"] == "bench" and est.json()["mfu_ref"]["bench_id"] == bench_id


def test_cloud_run_without_result_says_what_to_configure(tmp_path: Path, db_url: str, moto_env: object) -> None:
    from gpuplan.launching.remote_bench import record_remote_result
    from gpuplan.launching.remote_bench_job import NoRemoteResult
    from gpuplan.providers.registry import get_provider
    from gpuplan.store.db import Store

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    store = Store.open(db_url)
    try:
        run_id = _cloud_run(store, run_dir)
        with pytest.raises(NoRemoteResult, match=r"left no bench\.json") as caught:
            record_remote_result(store, run_id, get_provider("aws"))
    finally:
        store.close()
    assert "storage" in str(caught.value) or "BUCKET" in str(caught.value)


def test_without_install_an_image_lacking_gpuplan_fails_clearly(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """No package is ever installed by name on the user's behalf: the job says what to pass instead."""
    import subprocess

    script = job_script(["--model", "gpt-tiny"], None)
    assert "pip install" not in script
    fake_python = tmp_path / "python3"
    fake_python.write_text("#!/bin/sh\nexit 1\n")  # an interpreter in which `import gpuplan` fails
    fake_python.chmod(0o755)
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                            env={"PATH": f"{tmp_path}:/usr/bin:/bin", "GPUPLAN_RUN_DIR": str(tmp_path)})
    assert result.returncode == 3
    assert "pass --install" in result.stderr
