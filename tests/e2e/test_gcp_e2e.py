"""`gpuplan launch --provider gcp` end to end: the CLI as a subprocess, the real google clients, the fake Compute API.

The CLI finds the fake exactly as it would find a private endpoint: gcloud's CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE
and GOOGLE_CLOUD_PROJECT. Fault injection covers what can go wrong around a launch: no capacity, the CLI killed
between GCE's insert and the database commit, and a retried launch afterwards (it must not double up).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.rules import instance_name

from support.clihelp import run_subprocess
from support.fakes.gce_server import RunningFake

JOB = """\
name: tiny-gpt-gcp
image: us-docker.pkg.dev/example/tiny-gpt:latest
command: python train.py --steps 200
project: research
resources:
  gpu: L4
  gpus_per_node: 1
  spot: true
  regions: [us-central1]
limits:
  max_hours: 2
"""


@pytest.fixture
def job(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def kill_cli_after_insert(gce: RunningFake, job: Path) -> None:
    """Run `gpuplan launch` and SIGKILL it once GCE holds the VM but before the insert operation finishes."""
    gce.state.hold.set()
    proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(job), "--provider", "gcp", "-y",
                             "--detach", "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not gce.state.live() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.05)
        assert gce.state.live(), "the CLI never reached the insert"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        gce.state.hold.clear()


def open_store():  # type: ignore[no-untyped-def]
    from gpuplan.store.db import Store

    return Store.open(os.environ["GPUPLAN_DB"])


def test_launch_detached_json_then_status_and_stop(gce: RunningFake, job: Path) -> None:
    result = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    run_id = out["run_id"]
    assert (out["provider"], out["state"], out["spot"], out["max_hours"]) == ("gcp", "running", True, 2.0)
    [row] = out["instances"]
    assert row["instance_id"] == f"us-central1-a/{instance_name(run_id, 0)}"

    [vm] = gce.state.live()
    assert vm["labels"]["gpuplan-run-id"] == run_id and vm["labels"]["gpuplan-project"] == "research"
    assert vm["scheduling"]["provisioningModel"] == "SPOT"
    assert vm["scheduling"]["maxRunDuration"] == {"seconds": "7200"}
    startup = {i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"]
    assert "us-docker.pkg.dev/example/tiny-gpt:latest" in startup  # rendered by jobs.bootstrap

    status = run_subprocess("status", run_id, "--json")
    assert status.exit_code == 0 and status.json()["state"] == "running"
    stop = run_subprocess("stop", run_id)
    assert stop.exit_code == 0, stop.stderr
    assert gce.state.live() == []  # deleted, and waited for
    final = run_subprocess("status", run_id, "--json").json()
    assert final["state"] == "stopped"
    assert final["instances"][0]["terminated_at"] is not None


def test_no_capacity_anywhere_fails_cleanly(gce: RunningFake, job: Path) -> None:
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        gce.state.fail_insert(zone, "ZONE_RESOURCE_POOL_EXHAUSTED", times=None)
    result = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    # One zone's error alone, or the failover table of every zone tried (once failover wraps the launch).
    assert "ZONE_RESOURCE_POOL_EXHAUSTED" in result.stderr or "no capacity" in result.stderr
    runs = run_subprocess("runs", "--json").json()
    assert [r["state"] for r in runs] == ["failed"]
    assert gce.state.live() == []


def test_crash_between_insert_and_commit_then_retry_does_not_double(gce: RunningFake, job: Path) -> None:
    # GCE is slow to finish the insert; the CLI is killed while it waits, after GCE accepted the VM but before
    # the database learnt of it.
    kill_cli_after_insert(gce, job)

    from sqlalchemy import select

    from gpuplan.store.models import InstanceRow, Run

    store = open_store()
    with store.session() as s:
        [run] = s.scalars(select(Run)).all()
        run_id = run.id
        assert run.state == "provisioning"
        assert s.scalars(select(InstanceRow)).all() == []  # the books do not know the VM yet

    # The VM is findable by its label: that is what reconcile lists and what a retry looks up first.
    provider = GcpProvider()
    [orphan] = provider.list_tagged(run_id)
    assert orphan.instance_id == f"us-central1-a/{instance_name(run_id, 0)}"

    # Retrying the launch of the recorded run returns the VM that exists; no second insert reaches GCE.
    from gpuplan.jobs.spec import load_spec
    from gpuplan.launching.plan import plan_launch
    from gpuplan.launching.start import launch_recorded_run

    inserts_before = gce.state.count_calls("POST", "/instances")
    spec = load_spec(job)
    plan = plan_launch(spec, job.read_text(), provider=provider)
    instances = launch_recorded_run(store, run_id, plan, provider, {})
    assert [i.instance_id for i in instances] == [orphan.instance_id]
    assert gce.state.count_calls("POST", "/instances") == inserts_before
    assert len(gce.state.live()) == 1
    with store.session() as s:
        assert [r.provider_instance_id for r in s.scalars(select(InstanceRow))] == [orphan.instance_id]
        assert s.get(Run, run_id).state == "running"  # type: ignore[union-attr]
    store.close()


def test_project_from_the_config_file_wins_over_the_environment(gce: RunningFake, job: Path, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """[providers.gcp] project in the config file reaches launch and the later status/stop passes alike."""
    config = tmp_path / "config.toml"
    config.write_text('[providers.gcp]\nproject = "gpuplan-test"\n')
    monkeypatch.setenv("GPUPLAN_CONFIG", str(config))
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "some-other-project")  # the fake only serves gpuplan-test
    launched = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    assert run_subprocess("status", run_id, "--json").json()["state"] == "running"
    assert run_subprocess("stop", run_id, "--json").json()["state"] == "stopped"
    assert not gce.state.live()

    config.write_text('[providers.gcp]\nprojekt = "typo"\n')
    typo = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach")
    assert typo.exit_code == 2 and "[providers.gcp]" in typo.stderr and "Traceback" not in typo.stderr
    config.write_text("[providers.gcp\n")
    broken = run_subprocess("status", run_id)
    assert broken.exit_code == 2 and "not valid TOML" in broken.stderr
