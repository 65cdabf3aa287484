"""A bare `torchrun --nnodes 2 train.py` finds its node rank and master on every way gpuplan runs a node.

torchrun reads only PET_* variables (torch/distributed/argparse_util.py): each case hands the environment the job
really gets to torch's own parser (support.torchrun_args). Slurm: tests/unit/providers/slurm/test_slurm_provider.py.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.jobs.runner import NodeLaunch, job_environment

from support.torchrun_args import torchrun_sees

DUMP_ENV = ["/bin/sh", "-c", 'env > "$GPUPLAN_RUN_DIR/env.txt"']


def test_the_local_runner_hands_torchrun_its_node() -> None:
    launch = NodeLaunch(run_id="r-pet", name="pet", argv=DUMP_ENV, run_dir="/tmp/r", node_rank=1, nnodes=2,
                        nproc_per_node=4, master_addr="10.88.0.7", master_port=29533)
    env = job_environment(launch, run_dir="/gpuplan/run")
    assert torchrun_sees(env) == {"nnodes": "2", "node_rank": "1", "master_addr": "10.88.0.7",
                                  "master_port": "29533", "nproc_per_node": "4"}
    # The plain names stay, for init_process_group("env://") users.
    assert (env["MASTER_ADDR"], env["MASTER_PORT"], env["NODE_RANK"], env["NNODES"]) == (
        "10.88.0.7", "29533", "1", "2")


def _boot_env(tmp_path: Path, **plan: object) -> dict[str, str]:
    base = tmp_path / "base"
    script = render_boot_script(BootPlan(run_id="r-pet", name="pet", argv=DUMP_ENV, base_dir=str(base),
                                         poweroff=False, **plan))  # type: ignore[arg-type]
    (tmp_path / "boot.sh").write_text(script)
    proc = subprocess.run(["bash", str(tmp_path / "boot.sh")], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, env={k: v for k, v in os.environ.items() if not k.startswith("PET_")})
    assert proc.returncode == 0, (base / "boot.log").read_text()
    assert json.loads((base / "run" / "exit.json").read_text())["exit_code"] == 0
    lines = (base / "run" / "env.txt").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line)


def test_a_cloud_worker_node_hands_torchrun_the_master(tmp_path: Path) -> None:
    env = _boot_env(tmp_path, nnodes=2, node_rank=1, nproc_per_node=8, master_addr="10.0.3.4",
                    master_port=29544)
    assert torchrun_sees(env) == {"nnodes": "2", "node_rank": "1", "master_addr": "10.0.3.4",
                                  "master_port": "29544", "nproc_per_node": "8"}


def test_a_cloud_master_node_hands_torchrun_its_own_address(tmp_path: Path) -> None:
    env = _boot_env(tmp_path, nnodes=2, node_rank=0, master_port=29545)
    own = subprocess.run(["hostname", "-I"], capture_output=True, text=True).stdout.split() or ["127.0.0.1"]
    seen = torchrun_sees(env)
    assert seen["master_addr"] == env["MASTER_ADDR"] == own[0]
    assert (seen["nnodes"], seen["node_rank"], seen["master_port"]) == ("2", "0", "29545")
