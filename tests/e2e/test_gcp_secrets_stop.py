"""`gpuplan stop` of a GCP run whose secrets cannot be deleted (Secret Manager unreachable): the CLI as a child
process, the real Compute and Secret Manager clients against the local fakes. The run still stops, and the user
reads one warning naming the secrets to delete by hand, not the same warning once per step of the stop that
checked whether the run still needs its secrets (terminate, then the outputs fetch of the gone VM)."""

from __future__ import annotations

import socket
from pathlib import Path

from support.clihelp import run_subprocess
from support.fakes.gce_server import RunningFake
from support.fakes.secretmanager_server import RunningSecretManager

SPEC = """\
name: secret-stop
image: us-docker.pkg.dev/x/y:1
command: python train.py
secrets: [API_TOKEN]
resources:
  gpu: L4
  gpus_per_node: 1
  regions: [us-central1]
limits:
  max_hours: 1
"""
WARNING = "could not delete the secrets of run"


def _closed_port() -> int:
    """A loopback port nothing listens on: connecting to it is refused at once (Secret Manager unreachable)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_stop_with_secret_manager_unreachable_warns_once(tmp_path: Path, gce: RunningFake,
                                                            secretmanager: RunningSecretManager) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    launched = run_subprocess("launch", str(spec), "--provider", "gcp", "-y", "--detach", "--json",
                              env={"API_TOKEN": "a-token"})
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    secret = f"gpuplan-{run_id}-API_TOKEN"
    assert list(secretmanager.state.secrets) == [secret]

    unreachable = f"http://127.0.0.1:{_closed_port()}/"
    stop = run_subprocess("stop", run_id, env={"CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER": unreachable})
    assert stop.exit_code == 0, stop.stderr
    assert gce.state.live() == []  # the VM is gone all the same
    warnings = [line for line in stop.stderr.splitlines() if WARNING in line]
    assert len(warnings) == 1, stop.stderr  # before: twice
    assert f"gpuplan-{run_id}-*" in warnings[0]  # what to delete by hand
    assert list(secretmanager.state.secrets) == [secret]  # left, as the warning says
