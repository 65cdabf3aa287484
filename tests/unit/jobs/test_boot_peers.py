"""Multi-node: when a node of the group is gone, the others save, copy their checkpoints and end themselves.

Two real boot scripts (bash, process jobs) share a folder as the run's storage, as two machines share S3 or GCS;
each has its own fake metadata server on 127.0.0.1. Before the fix the surviving node ran on until max_hours.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.aws.boot import aws_boot_cloud

from support.fakes.interruption_metadata import serve_interruption_metadata
from support.reaper import reap
from support.waiting import wait_for

# Trains until stopped; saves its step on SIGTERM (as a torch job saves its state_dict), then exits 143.
JOB = r"""
ck="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$ck"; step=0
trap 'echo "$step" > "$ck/step-$GPUPLAN_NODE_RANK"; exit 143' TERM
while :; do step=$((step + 1)); sleep 0.1; done
"""


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> object:
    yield
    reap(tmp_path)


def node(tmp_path: Path, rank: int, imds_url: str) -> tuple[subprocess.Popen[bytes], Path]:
    base, storage = tmp_path / f"node{rank}", tmp_path / "shared"
    plan = BootPlan(run_id="r-peers", name="peers", argv=["/bin/bash", "-c", JOB], base_dir=str(base),
                    poweroff=False, nnodes=2, node_rank=rank, master_addr="127.0.0.1" if rank else None,
                    checkpoint_dir="ckpt", checkpoint_url=str(storage / "checkpoints"),
                    checkpoint_sync_seconds=3600, storage_url=str(storage / f"node-{rank}"),
                    interruption_watch=True, notice_poll_seconds=1, cloud=aws_boot_cloud(imds_url),
                    peer_poll_seconds=1, peer_stale_seconds=4)
    script = tmp_path / f"boot{rank}.sh"
    script.write_text(render_boot_script(plan))
    return subprocess.Popen(["bash", str(script)], cwd=tmp_path, start_new_session=True), base


def test_a_reclaimed_node_ends_the_group_and_the_survivor_saves_first(tmp_path: Path) -> None:
    with serve_interruption_metadata() as meta0, serve_interruption_metadata() as meta1:
        survivor, base0 = node(tmp_path, 0, meta0.imds_url)
        reclaimed, _ = node(tmp_path, 1, meta1.imds_url)
        heartbeats = tmp_path / "shared" / "node-0" / "heartbeat"
        wait_for(lambda: heartbeats.exists() and (tmp_path / "shared" / "node-1" / "heartbeat").exists())
        meta1.state.announce("terminate")  # the cloud takes node 1 (two minutes' notice)
        assert reclaimed.wait(timeout=60) == 143
        code = survivor.wait(timeout=60)  # old code: runs on (until max_hours)
    record = json.loads((base0 / "run" / "exit.json").read_text())
    assert (code, record["reason"]) == (143, "peer_lost"), (base0 / "run" / "job.log").read_text()
    assert "the group is broken (node 1: interrupted" in (base0 / "run" / "job.log").read_text()
    assert int((tmp_path / "shared" / "checkpoints" / "step-0").read_text()) > 0  # saved, then copied
    assert json.loads((tmp_path / "shared" / "node-0" / "exit.json").read_text())["reason"] == "peer_lost"


def test_a_node_lost_without_notice_is_found_by_its_silence(tmp_path: Path) -> None:
    with serve_interruption_metadata() as meta0, serve_interruption_metadata() as meta1:
        survivor, base0 = node(tmp_path, 0, meta0.imds_url)
        lost, base1 = node(tmp_path, 1, meta1.imds_url)
        wait_for(lambda: (tmp_path / "shared" / "node-1" / "heartbeat").exists())
        os.killpg(lost.pid, signal.SIGKILL)  # the machine vanishes: nothing more is written from it
        reap(base1)
        code = survivor.wait(timeout=60)
    log = (base0 / "run" / "job.log").read_text()
    assert code == 143 and "node 1 has been silent for more than 4 s" in log, log
    assert json.loads((base0 / "run" / "exit.json").read_text())["reason"] == "peer_lost"
