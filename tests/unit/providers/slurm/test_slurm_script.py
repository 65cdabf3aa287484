"""The Slurm batch script and Slurm's outputs, without a cluster: rendering (shellchecked), sbatch options,
container runtimes, and the squeue/sacct/scontrol shapes of other Slurm versions than the test cluster's."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuplan.providers.base import InstanceState
from gpuplan.providers.slurm.parse import (
    exit_code_from_pair,
    exit_code_from_wait_status,
    gpus_from_alloc_tres,
    gpus_from_tres_per_node,
    parse_sacct_parsable,
    parse_sbatch_job_id,
    parse_squeue_json,
    parse_squeue_parsable,
)
from gpuplan.providers.slurm.script import JobShape, ScriptError, render_script, sbatch_args, time_limit

HOSTILE = "it's \"$(touch /tmp/x)\" `id`\n; rm -rf /"


def shape(**kw: object) -> JobShape:
    base: dict[str, object] = {"run_id": "r-0123456789", "name": HOSTILE, "command": "python train.py",
                               "run_dir": "/shared/runs/r-0123456789"}
    base.update(kw)
    return JobShape(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw", [
    {},
    {"nodes": 4, "gpus_per_node": 8, "image": "nvcr.io/nvidia/pytorch:24.01-py3", "runtime": "apptainer",
     "workdir": "/workspace", "source_dir": "/home/me/proj"},
    {"nodes": 2, "gpus_per_node": 4, "tasks_per_node": 4, "image": "nvcr.io/nvidia/pytorch:24.01-py3",
     "runtime": "pyxis", "workdir": "/workspace"},
    {"env": {"HOSTILE": HOSTILE}, "secret_names": ["HF_TOKEN"], "checkpoint_dir": "ckpt",
     "runtime_note": HOSTILE},
])
def test_rendered_scripts_pass_shellcheck(kw: dict[str, object], tmp_path: Path) -> None:
    text = render_script(shape(**kw))
    path = tmp_path / "job.sh"
    path.write_text(text)
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed")
    proc = subprocess.run(["shellcheck", "-s", "bash", "-f", "json1", str(path)], capture_output=True, text=True)
    findings = [f"SC{c['code']} line {c['line']}: {c['message']}" for c in json.loads(proc.stdout)["comments"]]
    assert findings == [], text


def test_bash_parses_the_hostile_script_without_running_anything(tmp_path: Path) -> None:
    text = render_script(shape(env={"HOSTILE": HOSTILE}, runtime_note=HOSTILE))
    proc = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # The human name only ever appears inside a single-quoted word.
    assert "export GPUPLAN_JOB_NAME='it'\"'\"'s" in text


def test_apptainer_runs_the_image_with_gpus_and_the_run_folder() -> None:
    text = render_script(shape(gpus_per_node=8, image="nvcr.io/nvidia/pytorch:24.01-py3", runtime="apptainer",
                               workdir="/workspace"))
    assert "apptainer exec --bind /shared/runs/r-0123456789 --nv --pwd /workspace" in text
    assert "docker://nvcr.io/nvidia/pytorch:24.01-py3" in text
    assert "--container-image" not in text
    sif = render_script(shape(image="/images/train.sif", runtime="apptainer"))
    assert " /images/train.sif " in sif and "docker://" not in sif


def test_pyxis_runs_the_image_through_srun() -> None:
    text = render_script(shape(gpus_per_node=4, image="nvcr.io/nvidia/pytorch:24.01-py3", runtime="pyxis",
                               workdir="/workspace"))
    assert "--container-image=nvcr.io/nvidia/pytorch:24.01-py3" in text
    assert "--container-mounts=/shared/runs/r-0123456789:/shared/runs/r-0123456789" in text
    assert "--container-workdir=/workspace" in text and "apptainer" not in text


def test_ranks_only_where_a_task_is_a_rank() -> None:
    torchrun = render_script(shape(gpus_per_node=8))  # one task per node, torchrun spawns 8
    assert "export NPROC_PER_NODE=8" in torchrun and 'RANK="$SLURM_PROCID"' not in torchrun
    per_gpu = render_script(shape(gpus_per_node=8, tasks_per_node=8))
    assert "export NPROC_PER_NODE=8" in per_gpu and 'RANK="$SLURM_PROCID"' in per_gpu
    cpu = render_script(shape())
    assert "export NPROC_PER_NODE=1" in cpu and 'RANK="$SLURM_PROCID"' in cpu


def test_sbatch_options() -> None:
    args = sbatch_args(shape(nodes=2, gpus_per_node=4, max_hours=1.5, partition="gpu", account="ml",
                             gres_type="a100", extra_sbatch_args=("--exclusive",)), "/x/slurm-job.sh")
    assert args[0] == "--parsable" and args[-1] == "/x/slurm-job.sh"
    for expected in ("--job-name=gpuplan-r-0123456789", "--comment=r-0123456789", "--nodes=2",
                     "--ntasks-per-node=1", "--gres=gpu:a100:4", "--time=90", "--partition=gpu", "--account=ml",
                     "--export=ALL", "--exclusive", "--output=/shared/runs/r-0123456789/node-0/job.log"):
        assert expected in args
    cpu = sbatch_args(shape(), "/x/s.sh")
    assert not any(a.startswith(("--gres", "--time", "--partition")) for a in cpu)
    odd = sbatch_args(shape(run_dir="/runs/100%/r"), "/x/s.sh")
    assert "--output=/runs/100%%/r/node-0/job.log" in odd  # a literal % is not a Slurm pattern


def test_time_limit_rounds_up() -> None:
    assert time_limit(1.5) == "90" and time_limit(0.001) == "1" and time_limit(2 / 60) == "2"
    with pytest.raises(ScriptError):
        time_limit(0)


@pytest.mark.parametrize("name", ["MASTER_ADDR", "RANK", "bad-name", "1X"])
def test_env_names_that_would_break_the_contract_or_the_script(name: str) -> None:
    with pytest.raises(ScriptError):
        render_script(shape(env={name: "x"}))


def test_squeue_json_of_newer_slurm() -> None:
    """23.02+ wrap numbers and states; 22.05 (the test cluster) uses plain values: both are read."""
    text = json.dumps({"jobs": [
        {"job_id": 41, "name": "gpuplan-r-a", "job_state": ["COMPLETED"], "state_reason": "None",
         "start_time": {"set": True, "infinite": False, "number": 1700000000},
         "end_time": {"set": True, "infinite": False, "number": 1700000100},
         "exit_code": {"status": ["SUCCESS"], "return_code": {"set": True, "number": 0}},
         "node_count": {"set": True, "number": 2}, "partition": "gpu", "tres_per_node": "gres/gpu:4"},
        {"job_id": 42, "name": "gpuplan-r-b", "job_state": ["FAILED"],
         "exit_code": {"status": ["ERROR"], "return_code": {"set": True, "number": 3}},
         "start_time": {"set": True, "number": 1700000000}, "end_time": {"set": True, "number": 1700000005}},
        {"job_id": 43, "name": "gpuplan-r-c", "job_state": ["RUNNING"], "exit_code": {"return_code": 0},
         "start_time": {"set": True, "number": 1700000000}, "end_time": {"set": True, "number": 1800000000},
         "submit_time": {"set": True, "number": 1699999990}},
    ], "errors": []})
    done, failed, running = parse_squeue_json(text)
    assert (done.state, done.exit_code, done.nodes, done.gpus_per_node) == (InstanceState.SUCCEEDED, 0, 2, 4)
    assert done.end == dt.datetime.fromtimestamp(1700000100, dt.timezone.utc)
    assert (failed.state, failed.exit_code) == (InstanceState.FAILED, 3)
    assert running.state == InstanceState.RUNNING and running.end is None and running.exit_code is None
    assert running.submit == dt.datetime.fromtimestamp(1699999990, dt.timezone.utc) and done.submit is None


def test_squeue_json_errors_are_not_an_empty_cluster() -> None:
    text = json.dumps({"jobs": [], "errors": [{"description": "Failed while looking for jobs", "error_number": -1}]})
    with pytest.raises(ValueError, match="Failed while looking for jobs"):
        parse_squeue_json(text)


def test_parsable_outputs_and_exit_codes() -> None:
    [rec] = parse_squeue_parsable("7|gpuplan-r-x|CANCELLED by 0|None|2026-01-02T03:04:05|2026-01-02T03:05:00|1|debug|"
                                  "gres:gpu:2|2026-01-02T03:00:00|r-x | with a bar\n")
    assert rec.state == InstanceState.TERMINATED and rec.comment == "r-x | with a bar" and rec.gpus_per_node == 2
    assert rec.submit == dt.datetime(2026, 1, 2, 3, 0).astimezone(dt.timezone.utc)  # the cluster's local time
    [acct] = parse_sacct_parsable("8|gpuplan-r-y|TIMEOUT|0:15|2026-01-02T03:04:05|2026-01-02T04:04:05|2|gpu|"
                                  "billing=8,cpu=8,gres/gpu=8,node=2|Unknown|\n")
    assert acct.state == InstanceState.FAILED and acct.exit_code == 143 and acct.gpus_per_node == 4
    assert acct.submit is None
    assert exit_code_from_wait_status(768) == 3 and exit_code_from_wait_status(9) == 137
    assert exit_code_from_pair("3:0") == 3 and exit_code_from_pair("") is None
    assert gpus_from_tres_per_node("gres:gpu:2") == 2 and gpus_from_tres_per_node("gres/gpu:a100:4") == 4
    assert gpus_from_alloc_tres("cpu=1,node=1", 1) == 0
    assert parse_sbatch_job_id("1234;cluster\n") == "1234"
    with pytest.raises(ValueError):
        parse_sbatch_job_id("sbatch: error: something")
