"""`gpuplan launch/status/logs/stop/watch --provider slurm` end to end against the real test cluster.

The provider is configured the way a user would: SLURM_CONF names the cluster and GPUPLAN_SLURM_* set the
charge-back rate. Detached runs are started together and checked afterwards, so the jobs overlap.
"""

from __future__ import annotations

import datetime as dt
import time
from pathlib import Path

import pytest

from support.clihelp import run_cli
from support.slurmhelp import SlurmCluster, wait_for


@pytest.fixture
def env(slurm: SlurmCluster, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    values = {**slurm.env(), "GPUPLAN_SLURM_PRICE_PER_NODE_HOUR": "3.60", "GPUPLAN_SLURM_PRICE_PER_GPU_HOUR": "2"}
    for key, value in values.items():
        monkeypatch.setenv(key, value)
    return values


def write_spec(folder: Path, name: str, body: str) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(f"name: {name}\n{body}")
    return path


def _time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def squeue_state(slurm: SlurmCluster, job_id: str) -> str:
    out = slurm.run("squeue", "-h", "-t", "all", "-j", job_id, "-o", "%T").stdout.strip()
    return out


def test_launch_follows_a_slurm_job_to_the_end(env: dict[str, str], tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "slurm-hello", (
        "runtime: process\n"
        "command: echo \"hello rank $RANK of $WORLD_SIZE via $GPUPLAN_PROVIDER\"; "
        "python -c 'from gpuplan.jobs import metrics as m; m.log_metrics(step=1, tokens=500, loss=3.0); "
        "m.log_metrics(step=2, tokens=1000, loss=2.5)'; sleep 1\n"
        "limits:\n  max_hours: 0.5\n"
    ))
    result = run_cli("launch", str(spec), "--provider", "slurm", "-y", "--json", "--interval", "0.3")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["provider"] == "slurm" and out["state"] == "succeeded" and out["exit_code"] == 0
    assert out["max_hours"] == 0.5
    [instance] = out["instances"]
    assert instance["instance_id"].isdigit() and instance["price_per_hour"] == 3.6
    # Cost comes from the instance row: the node-hour rate x the seconds the allocation lasted.
    seconds = (_time(instance["terminated_at"]) - _time(instance["launched_at"])).total_seconds()
    assert 0 < seconds < 60
    assert out["cost_usd"] == pytest.approx(3.6 * seconds / 3600, abs=1e-5)
    assert out["tokens_done"] == 1000
    assert "job slurm-hello: slurm" in result.stderr and "$3.6000/h" in result.stderr

    logs = run_cli("logs", out["run_id"])
    assert logs.exit_code == 0
    assert "hello rank 0 of 1 via slurm" in logs.stdout
    status = run_cli("status", out["run_id"], "--json")
    assert status.json()["state"] == "succeeded"


def test_detached_runs_stop_watch_and_caps(env: dict[str, str], slurm: SlurmCluster, tmp_path: Path) -> None:
    long_spec = write_spec(tmp_path, "slurm-long", "command: echo started; sleep 120\n")
    fail_spec = write_spec(tmp_path, "slurm-fail", "command: echo failing; exit 7\n")
    # $3600/h = $1/s against a budget of one cent: watch must cap it within a few seconds.
    capped_spec = write_spec(tmp_path, "slurm-capped", "command: sleep 120\nlimits:\n  budget_usd: 0.01\n")
    runs = {}
    for spec in (long_spec, fail_spec):
        res = run_cli("launch", str(spec), "--provider", "slurm", "-y", "--detach", "--json")
        assert res.exit_code == 0, res.stderr
        runs[spec.stem] = res.json()
    res = run_cli("launch", str(capped_spec), "--provider", "slurm", "-y", "--detach", "--json",
                  env={"GPUPLAN_SLURM_PRICE_PER_NODE_HOUR": "3600"})
    assert res.exit_code == 0, res.stderr
    runs["slurm-capped"] = res.json()
    jobs = {name: out["instances"][0]["instance_id"] for name, out in runs.items()}

    # status of a running Slurm job, then stop: the job is cancelled on the cluster.
    long_id = runs["slurm-long"]["run_id"]
    wait_for(lambda: squeue_state(slurm, jobs["slurm-long"]) == "RUNNING")
    assert run_cli("status", long_id, "--json").json()["state"] == "running"
    stopped = run_cli("stop", long_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    assert stopped.json()["state"] == "stopped"
    assert run_cli("status", long_id, "--json").json()["state"] == "stopped"
    assert wait_for(lambda: squeue_state(slurm, jobs["slurm-long"]) in ("CANCELLED", "COMPLETED", "COMPLETING"))

    # watch settles the failed run with its exit code, and caps the one over budget (cancelling its job).
    def settled() -> dict[str, str] | None:
        watched = run_cli("watch", "--once", "--json")
        assert watched.exit_code == 0, watched.stderr
        states = {r: run_cli("status", r, "--json").json()
                  for r in (runs["slurm-fail"]["run_id"], runs["slurm-capped"]["run_id"])}
        return states if all(s["state"] not in ("pending", "provisioning", "running") for s in states.values()) \
            else None

    states = wait_for(settled, timeout=40, interval=0.5)
    failed = states[runs["slurm-fail"]["run_id"]]
    assert failed["state"] == "failed" and failed["exit_code"] == 7
    capped = states[runs["slurm-capped"]["run_id"]]
    assert capped["state"] == "capped" and capped["state_reason"].startswith("budget")
    assert wait_for(lambda: squeue_state(slurm, jobs["slurm-capped"]) in ("CANCELLED", "COMPLETING"))
    assert "failing" in run_cli("logs", runs["slurm-fail"]["run_id"]).stdout


def test_unreachable_cluster_fails_the_launch_cleanly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAN_SLURM_BIN", str(tmp_path / "no-slurm-here"))
    spec = write_spec(tmp_path, "no-cluster", "command: 'true'\n")
    result = run_cli("launch", str(spec), "--provider", "slurm", "-y")
    assert result.exit_code != 0
    assert "is Slurm installed" in result.stderr
    assert "Traceback" not in result.stderr
    runs = run_cli("runs", "--json").json()
    assert runs and runs[0]["state"] == "failed"  # recorded before the provider call, then marked failed


def test_squeue_shows_gpuplan_jobs_by_name(env: dict[str, str], slurm: SlurmCluster, tmp_path: Path) -> None:
    """A cluster admin can tell gpuplan's jobs apart: gpuplan-<run id> with the run id in the comment."""
    spec = write_spec(tmp_path, "slurm-named", "command: sleep 30\n")
    out = run_cli("launch", str(spec), "--provider", "slurm", "-y", "--detach", "--json").json()
    job_id = out["instances"][0]["instance_id"]
    try:
        line = slurm.run("squeue", "-h", "-j", job_id, "-o", "%j|%k").stdout.strip()
        assert line == f"gpuplan-{out['run_id']}|{out['run_id']}"
    finally:
        assert run_cli("stop", out["run_id"]).exit_code == 0


def test_reconcile_finds_and_cancels_a_gpuplan_job_the_books_do_not_know(
        env: dict[str, str], slurm: SlurmCluster, tmp_path: Path) -> None:
    """A job named gpuplan-* that no run row owns is an orphan; `reconcile --terminate -y` cancels it once it is
    older than --grace (by its submit time: seconds old here, so it is spared until --grace 0)."""
    from gpuplan.providers.registry import make_provider

    script = tmp_path / "orphan.sh"
    script.write_text("#!/bin/sh\nsleep 120\n")
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    job_id = slurm.run("sbatch", "--parsable", "--job-name", "gpuplan-r-0rphan0001", "--comment", "r-0rphan0001",
                       "--output", str(tmp_path / "orphan.log"), str(script)).stdout.strip().split(";")[0]
    try:
        assert wait_for(lambda: squeue_state(slurm, job_id) in ("PENDING", "RUNNING"))
        [listed] = [i for i in make_provider("slurm").list_tagged() if i.instance_id == job_id]
        assert listed.created_at is not None
        assert before - dt.timedelta(seconds=2) <= listed.created_at <= dt.datetime.now(dt.timezone.utc)
        found = run_cli("reconcile", "--cloud", "slurm", "--terminate", "-y", "--json")
        assert found.exit_code == 0, found.stderr
        rows = [r for r in found.json() if r["instance_id"] == job_id]
        assert rows and rows[0]["kind"] == "young" and rows[0]["run_id"] == "r-0rphan0001", found.json()
        assert rows[0]["action"] is None and 0 <= rows[0]["age_s"] < 120
        assert squeue_state(slurm, job_id) in ("PENDING", "RUNNING")
        ended = run_cli("reconcile", "--cloud", "slurm", "--terminate", "-y", "--grace", "0", "--json")
        assert ended.exit_code == 0, ended.stderr
        assert [(r["kind"], r["action"]) for r in ended.json() if r["instance_id"] == job_id] == [
            ("orphan", "terminated")]
        assert wait_for(lambda: squeue_state(slurm, job_id) in ("", "CANCELLED", "COMPLETED"))
    finally:
        slurm.run("scancel", job_id)
    again = run_cli("reconcile", "--cloud", "slurm", "--json")
    assert all(r["instance_id"] != job_id for r in again.json())


def test_queue_time_is_not_billed(env: dict[str, str], slurm: SlurmCluster, tmp_path: Path) -> None:
    """A job that waits in the queue is billed (and its max_hours clock runs) from when Slurm starts it."""
    # The blocker holds the node until the test releases it (at most 60 s): a fixed `sleep 8` left the job too
    # little queue time when the launch itself was slow on a loaded machine.
    release = tmp_path / "release"
    blocker = tmp_path / "blocker.sh"
    blocker.write_text(f"#!/bin/sh\nfor i in $(seq 300); do [ -e {release} ] && exit 0; sleep 0.2; done\n")
    blocker_id = slurm.run("sbatch", "--parsable", "--exclusive", "--job-name", "not-gpuplan",
                           "--output", str(tmp_path / "blocker.log"), str(blocker)).stdout.strip().split(";")[0]
    try:
        assert wait_for(lambda: squeue_state(slurm, blocker_id) == "RUNNING")
        spec = write_spec(tmp_path, "queued", "runtime: process\ncommand: echo ran\nlimits:\n  max_hours: 0.5\n")
        launched = run_cli("launch", str(spec), "--provider", "slurm", "-y", "--detach", "--json")
        assert launched.exit_code == 0, launched.stderr
        out = launched.json()
        run_id = out["run_id"]
        job_id = out["instances"][0]["instance_id"]
        assert squeue_state(slurm, job_id) == "PENDING"
        # Queued for 4.5 s from the run's creation (Slurm's start time has whole seconds: >= 3.5 s counted).
        waited = (dt.datetime.now(dt.timezone.utc) - _time(out["created_at"])).total_seconds()
        time.sleep(max(0.0, 4.5 - waited))
    finally:
        release.touch()
    final = wait_for(lambda: (s := run_cli("status", run_id, "--json").json())["state"] == "succeeded" and s,
                     timeout=60)
    [instance] = final["instances"]
    queued = (_time(instance["launched_at"]) - _time(final["created_at"])).total_seconds()
    assert queued >= 3, (instance, final["created_at"])  # billing started after the blocker freed the node
    billed = (_time(instance["terminated_at"]) - _time(instance["launched_at"])).total_seconds()
    assert billed < 6 and final["cost_usd"] == pytest.approx(3.6 * billed / 3600, abs=1e-5)
    assert _time(final["started_at"]) == _time(instance["launched_at"])
