"""Issue 23 end to end: launch does what the spec says — where (clouds), in what (image), on what (GPU) — or
refuses with one line, exit 2, before anything is recorded; a failed run says why; caps against the estimate.

Every launch is the CLI in a child process. No cloud is contacted: the conftest guard points the AWS and GCP
SDKs at a closed loopback port, so the AWS dry runs here work offline, as they must on a laptop.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.jobs.gpu_devices import nvidia_devices

from support.clihelp import Result, run_subprocess
from support.fakeruntimes import failing_runtimes
from support.podmanhelp import busybox_image, podman_env

ROOT = Path(__file__).resolve().parents[2]
AWS_EXAMPLE = ROOT / "examples" / "llama-7b-aws.yaml"
# The example has secrets: on AWS they need an instance profile (checked, unreachable here, so only a note).
AWS_ENV = {"GPUPLAN_AWS_INSTANCE_PROFILE": "gpuplan-test-profile"}

no_gpu_here = pytest.mark.skipif(bool(nvidia_devices()), reason="this machine has NVIDIA GPUs")


def gp(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> Result:
    return run_subprocess(*args, env=env, timeout=timeout)


def recorded_runs() -> list[dict]:
    listed = gp("runs", "--json")
    assert listed.exit_code == 0, listed.stderr
    return list(listed.json())


def spec(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def one_error_line(result: Result) -> str:
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("error: ")]
    assert "Traceback" not in result.stderr
    return line


# ------------------------------------------------------------------------------------------------- where


def test_spec_clouds_aws_plans_on_aws_in_a_dry_run() -> None:
    result = gp("launch", str(AWS_EXAMPLE), "--dry-run", "--json", env=AWS_ENV)
    assert result.exit_code == 0, result.stderr
    plan = result.json()
    assert (plan["provider"], plan["cloud"], plan["provider_source"]) == ("aws", "aws", "spec")
    assert plan["instance_type"] == "p5.48xlarge" and plan["region"].startswith("us-")
    assert (plan["gpu"], plan["gpus_per_node"], plan["nodes"]) == ("H100", 8, 2)
    assert "provider: aws (the spec's resources.clouds names aws)" in result.stderr
    assert recorded_runs() == []


def test_several_clouds_pick_the_cheapest_that_fits(tmp_path: Path) -> None:
    text = AWS_EXAMPLE.read_text().replace("clouds: [aws]", "clouds: [gcp, aws, local]").replace(
        "  regions: [us-*]\n", "")
    result = gp("launch", str(spec(tmp_path, text)), "--dry-run", "--json", env=AWS_ENV)
    assert result.exit_code == 0, result.stderr
    plan = result.json()
    considered = {c["provider"]: c for c in plan["providers_considered"]}
    assert set(considered) == {"gcp", "aws", "local"}
    assert not considered["local"]["fits"] and "no NVIDIA GPU" in considered["local"]["reason"]
    costs = {name: float(c["cost_usd"]) for name, c in considered.items() if c["fits"]}
    assert plan["provider"] == min(costs, key=costs.__getitem__)
    assert float(plan["est_cost_usd"]) == pytest.approx(min(costs.values()))
    assert plan["provider_reason"].startswith("the cheapest fit among the spec's resources.clouds (gcp, aws, local)")


def test_config_default_provider_then_local(tmp_path: Path) -> None:
    job = spec(tmp_path, "name: plain\nruntime: process\ncommand: echo hi\n")
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nprovider = "aws"\n')
    from_config = gp("launch", str(job), "--dry-run", "--json", env={"GPUPLAN_CONFIG": str(config)})
    assert from_config.exit_code == 0, from_config.stderr
    assert (from_config.json()["provider"], from_config.json()["provider_source"]) == ("aws", "config")
    assert f"[defaults] provider in {config}" in from_config.json()["provider_reason"]
    default = gp("launch", str(job), "--dry-run", "--json")
    assert (default.json()["provider"], default.json()["provider_source"]) == ("local", "default")
    explicit = gp("launch", str(job), "--dry-run", "--json", "--provider", "local",
                  env={"GPUPLAN_CONFIG": str(config)})
    assert (explicit.json()["provider"], explicit.json()["provider_source"]) == ("local", "option")


# ------------------------------------------------------------------------------------------------- in what

IMAGE_JOB = """\
name: in-a-container
image: {image}
command: ls /
"""


def test_image_job_with_no_working_runtime_is_refused_and_nothing_recorded(tmp_path: Path) -> None:
    env = failing_runtimes(tmp_path / "fakebin")
    job = spec(tmp_path, IMAGE_JOB.format(image="pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime"))
    for extra in (["-y"], ["--dry-run"]):
        result = gp("launch", str(job), *extra, env=env)
        assert result.exit_code == 2, result.stderr
        line = one_error_line(result)
        assert "image pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime needs a container runtime" in line
        assert "podman: a test container failed (exit 126)" in line and "docker: no daemon" in line
        assert "runtime: process" in line
    assert recorded_runs() == []
    # the explicit way to run without a container
    plain = spec(tmp_path, IMAGE_JOB.format(image="busybox:1") + "runtime: process\n", "plain.yaml")
    ran = gp("launch", str(plain), "-y", "--json", env=env)
    assert ran.exit_code == 0 and ran.json()["state"] == "succeeded", ran.stderr


def test_failed_container_run_records_the_runtimes_reason(tmp_path: Path) -> None:
    job = spec(tmp_path, f"name: no-tool\nimage: {busybox_image()}\ncommand: [no-such-tool, --flag]\n")
    result = gp("launch", str(job), "-y", "--json", env=podman_env())
    assert result.exit_code == 1, result.stderr
    run = result.json()
    assert run["state"] == "failed" and run["exit_code"] == 127 and run["provider_source"] == "default"
    assert run["state_reason"].startswith(f"no such command in the image {busybox_image()}: ")
    assert "no-such-tool" in run["state_reason"] and run["state_reason"].endswith("(exit code 127 on node 0)")


# ------------------------------------------------------------------------------------------------- on what

GPU_JOB = """\
name: wants-gpus
runtime: process
command: python -c "print('ran')"
resources:
  gpu: H100:8
"""


@no_gpu_here
def test_gpu_spec_on_this_cpu_machine_is_refused_unless_allow_cpu(tmp_path: Path) -> None:
    job = spec(tmp_path, GPU_JOB)
    for extra in (["-y"], ["--dry-run"]):
        refused = gp("launch", str(job), *extra)
        assert refused.exit_code == 2, refused.stderr
        line = one_error_line(refused)
        assert "wants-gpus asks for 8 x H100 per node on local, but this machine has no NVIDIA GPU" in line
        assert "--allow-cpu" in line
    assert recorded_runs() == []
    allowed = gp("launch", str(job), "-y", "--json", "--allow-cpu")
    assert allowed.exit_code == 0, allowed.stderr
    assert "--allow-cpu: this machine has no NVIDIA GPU" in allowed.stderr and ", CPU, " in allowed.stderr
    [run] = recorded_runs()
    assert run["state"] == "succeeded" and run["gpu"] is None and not run["gpus_per_node"]
    # The books say why a spec that asks for 8 x H100 ran on the CPU (its stored text still says H100).
    events = gp("status", run["run_id"], "--json").json()["events"]
    [fallback] = [e for e in events if e["kind"] == "cpu_fallback"]
    assert "instead of 8 x H100 per node" in fallback["message"]
    shown = gp("status", run["run_id"], "--events")
    assert shown.exit_code == 0 and "  history:" in shown.stdout
    assert any(" cpu_fallback: --allow-cpu: this machine has no NVIDIA GPU" in line
               for line in shown.stdout.splitlines())


# ------------------------------------------------------------------------------------------------- caps

OVER_JOB = """\
name: too-long
runtime: process
command: echo started
workload:
  model: gpt-tiny
  tokens: 1B
  seq_len: 64
  precision: fp32
  throughput: 10000
limits:
  max_hours: 1
"""


def test_estimate_over_max_hours_is_said_and_refused_under_yes_without_force(tmp_path: Path) -> None:
    job = spec(tmp_path, OVER_JOB)
    dry = gp("launch", str(job), "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    [over] = dry.json()["over_caps"]
    assert over["cap"] == "max_hours" and over["done_fraction"] == pytest.approx(1 / 27.78, rel=0.01)
    assert "exceeds max_hours 1:00:00 by 26:4" in over["message"] and "stopped at ~4%" in over["message"]
    assert "over a cap: the estimate 27:4" in dry.stderr
    refused = gp("launch", str(job), "-y")
    assert refused.exit_code == 2 and "refused under -y" in one_error_line(refused) and "--force" in refused.stderr
    assert recorded_runs() == []
    forced = gp("launch", str(job), "-y", "--force", "--json")
    assert forced.exit_code == 0 and forced.json()["state"] == "succeeded", forced.stderr
    assert "warning: --force: the estimate" in forced.stderr
    assert json.loads(gp("runs", "--json").stdout)[0]["name"] == "too-long"
