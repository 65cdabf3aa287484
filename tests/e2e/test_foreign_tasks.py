"""Issue 35, items 1-2: SkyPilot and dstack task files run as they are; gpuplan's setup, --env and --secret.

Everything through the CLI in child processes on the local provider (real runner, real shell).
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import yaml

from support.clihelp import Result, run_subprocess

SKY_TASK = """\
name: sky-hello
workdir: .
num_nodes: 2
resources:
  disk_size: 100
  ports: 8080
envs:
  GREETING: hello
file_mounts:
  /data: s3://some-bucket
setup: |
  echo "setup on rank $SKYPILOT_SETUP_NODE_RANK"
  if [[ -n "$BASH_VERSION" ]]; then echo "setup in bash"; fi
run: |
  echo "$GREETING from rank $SKYPILOT_NODE_RANK of $SKYPILOT_NUM_NODES, $SKYPILOT_NUM_GPUS_PER_NODE GPUs"
  echo "nodes listed: $(echo "$SKYPILOT_NODE_IPS" | wc -l), head $(echo "$SKYPILOT_NODE_IPS" | head -n1)"
  false
  echo "run continues after a failing line, as under SkyPilot"
"""

DSTACK_TASK = """\
type: task
name: dstack-hello
nodes: 2
python: "3.12"
env:
  - GREETING=hi
commands:
  - echo "$GREETING from $DSTACK_NODE_RANK of $DSTACK_NODES_NUM, master $DSTACK_MASTER_NODE_IP"
  - echo "gpus $DSTACK_GPUS_PER_NODE"
resources:
  gpu: 24GB..80GB
  shm_size: 16GB
"""


def gp(*args: str, env: dict[str, str] | None = None, cwd_input: str | None = None) -> Result:
    return run_subprocess(*args, env=env, input=cwd_input)


def run_record(run_id: str) -> dict:
    out = gp("status", run_id, "--json")
    assert out.exit_code == 0, out.stderr
    return out.json()


def node_log(run_id: str, node: int) -> str:
    out = gp("logs", run_id, "--node", str(node))
    assert out.exit_code == 0, out.stderr
    return out.stdout


def launched(out: Result) -> str:
    assert out.exit_code == 0, out.stderr
    return str(out.json()["run_id"])


def test_skypilot_task_runs_as_is_with_its_node_variables(tmp_path: Path) -> None:
    task = tmp_path / "task.yaml"
    task.write_text(SKY_TASK)
    out = gp("launch", str(task), "-y", "--json")
    run_id = launched(out)
    # ONE note names everything left behind
    notes = [line for line in out.stderr.splitlines() if "no gpuplan equivalent" in line]
    assert len(notes) == 1, out.stderr
    assert "resources.disk_size" in notes[0] and "resources.ports" in notes[0] and "file_mounts" in notes[0]
    for rank in (0, 1):
        log = node_log(run_id, rank)
        assert f"hello from rank {rank} of 2, 0 GPUs" in log, log
        assert "nodes listed: 2, head 127.0.0.1" in log
        assert f"setup on rank {rank}" in log and "setup in bash" in log
        assert "run continues after a failing line, as under SkyPilot" in log
        assert log.index("[gpuplan setup]") < log.index("[gpuplan run]")


def test_convert_writes_the_spec_that_launch_runs(tmp_path: Path) -> None:
    task = tmp_path / "task.yaml"
    task.write_text(SKY_TASK.replace("num_nodes: 2\n", "").replace("resources:\n  disk_size: 100\n  ports: 8080\n",
                                                                    "resources:\n  accelerators: {A100:8, H100:8}\n"
                                                                    "  use_spot: true\n  infra: aws/us-east-1\n"))
    out = gp("convert", str(task))
    assert out.exit_code == 0, out.stderr
    spec = yaml.safe_load(out.stdout)
    assert spec["resources"] == {"gpu": ["A100:8", "H100:8"], "spot": True, "clouds": ["aws"],
                                 "regions": ["us-east-1"]}
    assert spec["env"] == {"GREETING": "hello"} and spec["command"][:2] == ["bash", "-c"]
    assert "SKYPILOT_NODE_IPS" in spec["command"][2]
    assert "file_mounts" in out.stderr and out.stderr.count("no gpuplan equivalent") == 1
    target = tmp_path / "converted.yaml"
    wrote = gp("convert", str(task), "-o", str(target))
    assert wrote.exit_code == 0 and target.read_text() == out.stdout
    again = gp("convert", str(task), "-o", str(target))
    assert again.exit_code == 2 and "exists" in again.stderr
    plan = gp("launch", str(target), "--dry-run", "--json", "--provider", "aws")
    assert plan.exit_code == 0, plan.stderr
    assert plan.json()["gpu"].startswith(("A100", "H100")) and plan.json()["gpus_per_node"] == 8


def test_gpu_candidates_are_weighed_by_the_whole_jobs_cost(tmp_path: Path) -> None:
    def dry_run(gpu: str) -> dict:
        spec = tmp_path / f"job-{abs(hash(gpu))}.yaml"
        spec.write_text(f"name: cands\ncommand: python train.py\nresources:\n  gpu: {gpu}\n  clouds: [aws]\n"
                        "workload:\n  params: 1B\n  tokens: 20B\n  sharding: zero3\n")
        out = gp("launch", str(spec), "--dry-run", "--json")
        assert out.exit_code == 0, out.stderr
        return out.json()

    alone = {gpu: dry_run(gpu) for gpu in ("A100:8", "H100:8")}
    both = dry_run("[A100:8, H100:8]")
    cheapest = min(alone.values(), key=lambda d: float(d["est_cost_usd"]))
    assert (both["gpu"], both["instance_type"]) == (cheapest["gpu"], cheapest["instance_type"])
    assert float(both["est_cost_usd"]) == float(cheapest["est_cost_usd"])
    reversed_order = dry_run("[H100:8, A100:8]")
    assert reversed_order["instance_type"] == cheapest["instance_type"]  # the order does not decide, the cost does


def test_dstack_task_runs_and_other_types_are_refused(tmp_path: Path) -> None:
    task = tmp_path / ".dstack.yml"
    task.write_text(DSTACK_TASK)
    out = gp("launch", str(task), "-y", "--json")
    run_id = launched(out)
    note = next(line for line in out.stderr.splitlines() if "no gpuplan equivalent" in line)
    assert "python" in note and "resources.shm_size" in note and "24GB..80GB" in note
    assert "hi from 1 of 2, master 127.0.0.1" in node_log(run_id, 1)
    service = tmp_path / "service.yml"
    service.write_text("type: service\nname: web\ncommands: [python -m http.server]\nport: 8000\n")
    refused = gp("convert", str(service))
    assert refused.exit_code == 2
    assert "type: service has no gpuplan equivalent" in refused.stderr and "Traceback" not in refused.stderr


def test_setup_runs_first_and_its_failure_is_named(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: setup-fails\nruntime: process\nsetup: |\n  echo preparing\n  exit 3\n"
                    "command: echo never-runs\n")
    out = gp("launch", str(spec), "-y", "--json")
    assert out.exit_code == 1, out.stderr
    run_id = str(out.json()["run_id"])
    record = run_record(run_id)
    assert record["state"] == "failed"
    assert "setup failed (exit 3)" in json.dumps(record), record
    log = node_log(run_id, 0)
    assert "preparing" in log and "never-runs" not in log.replace("command: echo never-runs", "")


def test_env_and_secret_on_the_command_line(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: overrides\nruntime: process\nenv:\n  MODE: spec\n"
                    "command: echo \"mode=$MODE extra=$EXTRA token-length=${#API_TOKEN}\"\n")
    secret = "s3cr3t-from-the-shell"
    out = gp("launch", str(spec), "-y", "--json", "--env", "MODE=cli", "--env", "EXTRA", "--secret", "API_TOKEN",
             env={"EXTRA": "from-shell", "API_TOKEN": secret})
    run_id = launched(out)
    assert f"mode=cli extra=from-shell token-length={len(secret)}" in node_log(run_id, 0)
    db = Path(os.environ["GPUPLAN_DB"].removeprefix("sqlite:///"))
    with sqlite3.connect(db) as conn:
        dump = "\n".join(conn.iterdump())
    assert secret not in dump
    bad = gp("launch", str(spec), "-y", "--secret", "API_TOKEN=inline")
    assert bad.exit_code == 2 and "NAME only" in bad.stderr and "inline" not in bad.stderr
    missing = gp("launch", str(spec), "-y", "--env", "NOT_SET_ANYWHERE")
    assert missing.exit_code == 2 and "NOT_SET_ANYWHERE" in missing.stderr
