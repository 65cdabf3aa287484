"""`gpuplan reconcile --cloud gcp`: VMs labelled by gpuplan that the books do not know (orphans) and open rows
whose VM is gone (missing), found by label across every zone of the fake Compute API; --terminate ends orphans
but spares young VMs (--grace, by creationTimestamp) and the VMs of a run still launching.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.rules import instance_name

from support.clihelp import run_subprocess
from support.fakes.gce_server import RunningFake

JOB = """\
name: reconcile-me
command: python train.py
resources:
  gpu: L4
  regions: [us-central1]
limits:
  max_hours: 1
"""


def backdate(gce: RunningFake, instance_id: str, age: dt.timedelta) -> None:
    """Make the fake report the VM as created `age` ago (its creationTimestamp, as GCE sets it)."""
    zone, name = instance_id.split("/")
    with gce.state._lock:
        inst = gce.state.instances[(zone, name)]
        created = dt.datetime.fromisoformat(inst["creationTimestamp"].replace("Z", "+00:00")) - age
        inst["creationTimestamp"] = created.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def test_reconcile_finds_orphans_and_missing_then_terminates_orphans(gce: RunningFake, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    known = launched.json()
    known_vm = known["instances"][0]["instance_id"]

    # An orphan: a VM started a day ago for a run the database never recorded, in a region none of the recorded
    # runs used; and a VM of another unrecorded run started seconds ago (a launch that may be about to record it).
    orphan_run, young_run = "r-0ff0ff0ff0", "r-0ff0ff0ff1"
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    [orphan, young] = [GcpProvider().launch(LaunchRequest(
        run_id=run_id, name="lost", command="true", run_dir="/tmp/lost", gpu="T4", gpus_per_node=1,
        instance_type="n1-standard-8", zones=("europe-west4-b",), boot_script=""))[0]
        for run_id in (orphan_run, young_run)]
    assert orphan.created_at is not None and before <= orphan.created_at <= dt.datetime.now(dt.timezone.utc)
    backdate(gce, orphan.instance_id, dt.timedelta(days=1))
    [listed] = GcpProvider().list_tagged(orphan_run)
    assert listed.created_at is not None and listed.created_at < before - dt.timedelta(hours=23)
    # A missing one: the recorded run's VM deleted behind gpuplan's back.
    zone, name = known_vm.split("/")
    gce.state.get_operation(zone, gce.state.delete(zone, name, None)["name"], wait=True)

    found = run_subprocess("reconcile", "--cloud", "gcp", "--json")
    assert found.exit_code == 0, found.stderr
    rows = {r["kind"]: r for r in found.json()}
    assert sorted(rows) == ["missing", "orphan", "young"]
    assert {k: v for k, v in rows["missing"].items() if k not in ("age_s", "why")} == {
        "cloud": "gcp", "region": "us-central1", "instance_id": known_vm, "run_id": known["run_id"],
        "state": "terminated", "kind": "missing", "action": None}
    assert {k: v for k, v in rows["orphan"].items() if k != "age_s"} == {
        "cloud": "gcp", "region": "europe-west4", "instance_id": f"europe-west4-b/{instance_name(orphan_run, 0)}",
        "run_id": orphan_run, "state": "running", "kind": "orphan", "why": f"no run {orphan_run} in the database",
        "action": None}
    assert rows["orphan"]["age_s"] >= 86400
    assert rows["young"]["instance_id"] == young.instance_id and rows["young"]["age_s"] < 600

    ended = run_subprocess("reconcile", "--cloud", "gcp", "--terminate", "-y", "--json")
    assert ended.exit_code == 0, ended.stderr
    assert [(r["kind"], r["action"]) for r in ended.json() if r["kind"] != "missing"] in (
        [("orphan", "terminated"), ("young", None)], [("young", None), ("orphan", "terminated")])
    assert [v["name"] for v in gce.state.live()] == [instance_name(young_run, 0)]
    no_grace = run_subprocess("reconcile", "--cloud", "gcp", "--terminate", "-y", "--grace", "0", "--json")
    assert [(r["kind"], r["action"]) for r in no_grace.json() if r["kind"] != "missing"] == [("orphan", "terminated")]
    assert gce.state.live() == []


def test_a_vm_left_by_a_killed_launch_is_adopted_then_stopped(gce: RunningFake, tmp_path: Path) -> None:
    """The CLI killed between instances.insert and its commit: the run is recorded (provisioning), so its VM is a
    launch of a known run, never terminated, even with --grace 0; its launching process is dead, so reconcile
    adopts the VM into the run (billed at the launch plan's price), and `gpuplan stop` ends it."""
    from .test_gcp_e2e import kill_cli_after_insert

    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    kill_cli_after_insert(gce, job)
    [vm] = gce.state.live()
    run_id = vm["labels"]["gpuplan-run-id"]
    spared = run_subprocess("reconcile", "--cloud", "gcp", "--terminate", "-y", "--grace", "0", "--json")
    assert spared.exit_code == 0, spared.stderr
    [row] = spared.json()
    assert (row["kind"], row["action"], row["run_id"]) == ("in-flight", "adopted", run_id)
    assert len(gce.state.live()) == 1
    assert run_subprocess("reconcile", "--cloud", "gcp", "--json").json() == []  # the books know it now

    stopped = run_subprocess("stop", run_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    [inst] = stopped.json()["instances"]
    assert inst["terminated_at"] is not None and inst["price_per_hour"] > 0 and stopped.json()["cost_usd"] > 0
    assert gce.state.live() == []
    assert run_subprocess("reconcile", "--cloud", "gcp", "--terminate", "-y", "--json").json() == []
