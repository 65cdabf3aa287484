"""The node runner: the same environment contract as a process and in a podman container; exit codes recorded."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.jobs.runner import EXIT_FILE, LAUNCH_FILE, LOG_FILE, NodeLaunch, job_environment, resolve_runtime

from support.podmanhelp import busybox_image, podman_env

SECRET = "runner-secret-$(id)-value"
CONTRACT = ("GPUPLAN_RUN_ID", "GPUPLAN_RUN_DIR", "GPUPLAN_METRICS", "GPUPLAN_NODE_RANK", "GPUPLAN_NNODES",
            "GPUPLAN_MASTER_ADDR", "GPUPLAN_MASTER_PORT", "MASTER_ADDR", "MASTER_PORT", "NODE_RANK", "NNODES",
            "NPROC_PER_NODE", "RANK", "WORLD_SIZE", "GPUPLAN_CHECKPOINT_DIR", "MODE", "API_TOKEN")
DUMP = " ".join(f'echo "{k}=${{{k}:-}}";' for k in CONTRACT)


def run_node(tmp_path: Path, **fields: object) -> tuple[dict[str, str], dict, str]:
    run_dir = tmp_path / "run"
    node_dir = run_dir / "node-1"
    node_dir.mkdir(parents=True)
    values: dict = dict(run_id="r-runner", name="contract", run_dir=str(run_dir), node_rank=1, nnodes=2,
                        master_port=29123, env={"MODE": "it's $(fast)"}, secret_names=["API_TOKEN"],
                        checkpoint_dir="ckpt",
                        argv=["/bin/sh", "-c", f'{{ {DUMP} }} > "$GPUPLAN_RUN_DIR/env.txt"; exit 3'])
    values.update(fields)
    launch = NodeLaunch(**values)
    (node_dir / LAUNCH_FILE).write_text(launch.to_json())
    env = {**os.environ, **podman_env(), "API_TOKEN": SECRET}
    proc = subprocess.run([sys.executable, "-m", "gpuplan.jobs.runner", str(node_dir)], env=env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr + (node_dir / LOG_FILE).read_text()
    seen = dict(line.split("=", 1) for line in (run_dir / "env.txt").read_text().splitlines())
    record = json.loads((node_dir / EXIT_FILE).read_text())
    log = (node_dir / LOG_FILE).read_text()
    assert SECRET not in (node_dir / LAUNCH_FILE).read_text() and SECRET not in log
    return seen, record, log


def test_process_runner_contract(tmp_path: Path) -> None:
    seen, record, _ = run_node(tmp_path, runtime="process")
    run_dir = str(tmp_path / "run")
    assert record["exit_code"] == 3 and record["runtime"] == "process"
    assert seen["GPUPLAN_RUN_DIR"] == run_dir and seen["GPUPLAN_METRICS"] == f"{run_dir}/metrics.jsonl"
    assert (seen["NODE_RANK"], seen["NNODES"], seen["RANK"], seen["WORLD_SIZE"]) == ("1", "2", "1", "2")
    assert (seen["MASTER_ADDR"], seen["MASTER_PORT"]) == ("127.0.0.1", "29123")
    assert seen["GPUPLAN_CHECKPOINT_DIR"] == f"{run_dir}/ckpt"
    assert seen["MODE"] == "it's $(fast)" and seen["API_TOKEN"] == SECRET


def test_podman_runner_contract(tmp_path: Path) -> None:
    image = busybox_image()
    seen, record, log = run_node(tmp_path, runtime="podman", image=image, run_id=f"r-{os.getpid():x}rn")
    assert record["exit_code"] == 3 and record["runtime"] == "podman", log
    assert seen["GPUPLAN_RUN_DIR"] == "/gpuplan/run" and seen["GPUPLAN_METRICS"] == "/gpuplan/run/metrics.jsonl"
    assert (seen["NODE_RANK"], seen["NNODES"], seen["RANK"], seen["WORLD_SIZE"]) == ("1", "2", "1", "2")
    assert seen["GPUPLAN_CHECKPOINT_DIR"] == "/gpuplan/run/ckpt"
    assert seen["MODE"] == "it's $(fast)" and seen["API_TOKEN"] == SECRET


def test_runtime_resolution() -> None:
    assert resolve_runtime("process", "img") == "process"
    assert resolve_runtime("auto", None) == "process"
    if _docker_works():
        assert resolve_runtime("docker", "img") == "docker"
    else:  # a docker client without a daemon (as on this machine) must not count as a runtime
        with pytest.raises(RuntimeError, match="does not work"):
            resolve_runtime("docker", "img")


def _docker_works() -> bool:
    from gpuplan.jobs.container_runtime import probe

    return probe("docker").works


def test_torchrun_style_nodes_leave_rank_to_torchrun() -> None:
    env = job_environment(NodeLaunch(run_id="r", name="n", argv=["x"], run_dir="/r", nproc_per_node=8, nnodes=2),
                          run_dir="/r")
    assert env["NPROC_PER_NODE"] == "8" and env["GPUPLAN_WORLD_SIZE"] == "16" and "RANK" not in env
