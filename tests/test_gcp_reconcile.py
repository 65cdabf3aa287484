"""`gpuplan reconcile --cloud gcp`: VMs labelled by gpuplan that the books do not know (orphans) and open rows
whose VM is gone (missing), found by label across every zone of the fake Compute API; --terminate ends orphans.
"""

from __future__ import annotations

from pathlib import Path

from clihelp import run_subprocess
from fakes.gce_server import RunningFake
from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.gcp import GcpProvider
from gpuplan.providers.gcp_rules import instance_name

JOB = """\
name: reconcile-me
command: python train.py
resources:
  gpu: L4
  regions: [us-central1]
limits:
  max_hours: 1
"""


def test_reconcile_finds_orphans_and_missing_then_terminates_orphans(gce: RunningFake, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    known = launched.json()
    known_vm = known["instances"][0]["instance_id"]

    # An orphan: a VM started for a run the database never recorded (a CLI killed before its commit), in a
    # region none of the recorded runs used.
    orphan_run = "r-0ff0ff0ff0"
    GcpProvider().launch(LaunchRequest(run_id=orphan_run, name="lost", command="true", run_dir="/tmp/lost",
                                       gpu="T4", gpus_per_node=1, instance_type="n1-standard-8",
                                       zones=("europe-west4-b",), boot_script=""))
    # A missing one: the recorded run's VM deleted behind gpuplan's back.
    zone, name = known_vm.split("/")
    gce.state.get_operation(zone, gce.state.delete(zone, name, None)["name"], wait=True)

    found = run_subprocess("reconcile", "--cloud", "gcp", "--json")
    assert found.exit_code == 0, found.stderr
    rows = sorted(found.json(), key=lambda r: r["kind"])
    assert rows == [
        {"cloud": "gcp", "region": "us-central1", "instance_id": known_vm, "run_id": known["run_id"],
         "state": "terminated", "kind": "missing", "action": None},
        {"cloud": "gcp", "region": "europe-west4", "instance_id": f"europe-west4-b/{instance_name(orphan_run, 0)}",
         "run_id": orphan_run, "state": "running", "kind": "orphan", "action": None},
    ]

    ended = run_subprocess("reconcile", "--cloud", "gcp", "--terminate", "-y", "--json")
    assert ended.exit_code == 0, ended.stderr
    assert [r["action"] for r in ended.json() if r["kind"] == "orphan"] == ["terminated"]
    assert gce.state.live() == []


def test_an_orphan_left_by_a_killed_launch_is_found_and_ended(gce: RunningFake, tmp_path: Path) -> None:
    from test_gcp_cli import kill_cli_after_insert

    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    kill_cli_after_insert(gce, job)
    [vm] = gce.state.live()
    found = run_subprocess("reconcile", "--cloud", "gcp", "--terminate", "-y", "--json")
    assert found.exit_code == 0, found.stderr
    [row] = found.json()
    assert (row["kind"], row["action"], row["run_id"]) == ("orphan", "terminated", vm["labels"]["gpuplan-run-id"])
    assert gce.state.live() == []
