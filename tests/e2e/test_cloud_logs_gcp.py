"""Issue 35, item 3 on GCP: `gpuplan logs -f` follows the job log a VM ships to GCS as it grows, and says where it
comes from — the real google-cloud clients against the fake Compute API and the fake GCS JSON API."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuplan.providers.gcp.rules import instance_name

from support.clihelp import run_subprocess
from support.fakes.gce_server import RunningFake
from support.fakes.gcs_server import FakeGcs, Running, serve

BUCKET = "gpuplan-runs"
ZONE = "us-central1-a"
JOB = """\
name: gcp-log-follow
command: python train.py
resources:
  gpu: L4
  gpus_per_node: 1
  regions: [us-central1]
limits:
  max_hours: 2
"""


@pytest.fixture
def gcs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Running]:
    with serve(FakeGcs(buckets={BUCKET})) as fake:
        monkeypatch.setenv("GPUPLAN_GCS_BUCKET", BUCKET)
        monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE", f"{fake.url}/storage/v1/")
        yield fake


def test_logs_follow_what_a_gcp_vm_ships(gce: RunningFake, gcs: Running, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    key = f"gpuplan/{run_id}/node-0/job.log"
    gcs.state.put(BUCKET, key, b"epoch 1\n")
    follower = subprocess.Popen([sys.executable, "-m", "gpuplan", "logs", run_id, "-f"], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert follower.stdout is not None
        assert follower.stdout.readline() == "epoch 1\n"
        gcs.state.put(BUCKET, key, b"epoch 1\nepoch 2\n")  # the next copy: the whole log, grown
        assert follower.stdout.readline() == "epoch 2\n"
        gcs.state.put(BUCKET, key, b"epoch 1\nepoch 2\ndone\n")
        gcs.state.put(BUCKET, f"gpuplan/{run_id}/node-0/exit.json",
                      b'{"exit_code": 0, "ended_at": null, "reason": ""}\n')
        gce.state.set_status(ZONE, instance_name(run_id, 0), "TERMINATED")  # the job's poweroff
        rest, err = follower.communicate(timeout=90)
    finally:
        if follower.poll() is None:
            follower.kill()
    assert follower.returncode == 0, err
    assert rest == "done\n"
    assert f"gs://{BUCKET}/gpuplan/{run_id}/node-0/job.log" in err
