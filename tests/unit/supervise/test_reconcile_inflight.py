"""`reconcile --terminate` never kills a launch in flight, and still ends what no launch will ever record.

The race it guards against is real and is reproduced here, not simulated: a `gpuplan reconcile --terminate -y`
runs inside botocore's after-call hook of the launch's own RunInstances (in moto), i.e. after EC2 created the
machine and before the launch committed its instance row. The local provider shows the same rule on real
processes, and the age each provider reports (Instance.created_at) is checked where it is read.
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gpuplan.jobs.runner import NodeLaunch, read_exit
from gpuplan.paths import runs_dir
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import TAG_RUN_ID, Instance, LaunchRequest
from gpuplan.providers.local import LAUNCH_FILE, PID_FILE, STARTED_FILE, LocalProvider
from gpuplan.runs.events import EventKind
from gpuplan.store.db import Store
from gpuplan.store.models import Event, InstanceRow, Run, RunState
from gpuplan.supervise.reconcile import IN_FLIGHT, ORPHAN, YOUNG, classify

from .test_reconcile import backdate, record, start
from support.clihelp import run_cli
from support.ledger_fixture import record_run

NOW = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
GRACE = dt.timedelta(minutes=15)

JOB = """\
name: inflight
command: python train.py
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
"""


def machine(created: dt.datetime | None, run_id: str | None = "r-0000000001", **extra: Any) -> Instance:
    return Instance(provider="aws", instance_id="i-1", state="running", run_id=run_id, created_at=created, **extra)


@pytest.mark.parametrize(("inst", "run_state", "grace", "kind"), [
    # A launching run's machine is in flight at any age, with or without a grace.
    (machine(NOW - dt.timedelta(days=3)), RunState.PROVISIONING, dt.timedelta(0), IN_FLIGHT),
    (machine(NOW - dt.timedelta(seconds=5)), RunState.PENDING, GRACE, IN_FLIGHT),
    # A final run's machine is an orphan at any age: no launch of it can still be going on.
    (machine(NOW - dt.timedelta(seconds=5)), RunState.FAILED, GRACE, ORPHAN),
    # No run row (or a running run without a row for it): the age decides.
    (machine(NOW - dt.timedelta(minutes=14)), None, GRACE, YOUNG),
    (machine(NOW - dt.timedelta(minutes=16)), None, GRACE, ORPHAN),
    (machine(NOW - dt.timedelta(seconds=5)), RunState.RUNNING, GRACE, YOUNG),  # e.g. a spot relaunch
    (machine(NOW - dt.timedelta(seconds=5)), None, dt.timedelta(0), ORPHAN),
    (machine(None, run_id=None), None, GRACE, YOUNG),  # the provider does not say: spared while a grace is asked
    (machine(None, run_id=None), None, dt.timedelta(0), ORPHAN),
    # A provider that fills only launched_at is measured from it; a naive time is read as UTC.
    (machine(None, launched_at=NOW - dt.timedelta(hours=2)), None, GRACE, ORPHAN),
    (machine((NOW - dt.timedelta(minutes=1)).replace(tzinfo=None)), None, GRACE, YOUNG),
])
def test_classify(inst: Instance, run_state: str | None, grace: dt.timedelta, kind: str) -> None:
    got, age_s, why = classify(inst, run_state, grace, NOW)
    assert got == kind, why
    created = inst.created_at or inst.launched_at
    assert age_s == (None if created is None else int((NOW - created.replace(tzinfo=dt.timezone.utc)).total_seconds()))
    assert why


@pytest.fixture
def aws(moto_env: dict[str, str], aws_session: Any, monkeypatch: pytest.MonkeyPatch) -> AwsProvider:
    monkeypatch.setenv("GPUPLAN_AWS_IMAGE_ID", moto_env["us-east-1"])
    return AwsProvider(session=aws_session, waiter_delay=0.05)


def test_aws_created_at_is_the_launch_time(aws: AwsProvider) -> None:
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    instance_id = start(aws, "r-created001")
    [listed] = aws.list_tagged("r-created001")
    assert listed.created_at is not None and before <= listed.created_at <= dt.datetime.now(dt.timezone.utc)
    backdate(instance_id, dt.timedelta(days=2))
    [old] = aws.describe([instance_id])
    assert old.created_at is not None and old.created_at < before - dt.timedelta(days=1)


def test_reconcile_during_the_launch_spares_the_machine_the_launch_then_records(
        aws: AwsProvider, aws_session: Any, tmp_path: Path) -> None:
    """`reconcile --terminate -y --grace 0` between RunInstances and the commit: the launch still succeeds."""
    from gpuplan.jobs.spec import load_spec
    from gpuplan.launching.plan import plan_launch
    from gpuplan.launching.record import record_run
    from gpuplan.launching.start import launch_recorded_run

    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launching = AwsProvider(session=aws_session, waiter_delay=0.05)
    during: list[Any] = []

    def reconcile_now(**_: Any) -> None:
        during.append(run_cli("reconcile", "--cloud", "aws", "--terminate", "-y", "--grace", "0", "--json"))

    launching.launch_client("us-east-1").meta.events.register("after-call.ec2.RunInstances", reconcile_now)
    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        plan = plan_launch(load_spec(job), JOB, provider=launching)
        run_id = record_run(store, plan)
        [inst] = launch_recorded_run(store, run_id, plan, launching, {})
        with store.session() as s:
            run = s.get(Run, run_id)
            assert run is not None and run.state == RunState.RUNNING
            assert [i.provider_instance_id for i in run.instances] == [inst.instance_id]
    finally:
        store.close()
    [result] = during
    assert result.exit_code == 0, result.stderr
    [row] = result.json()
    assert (row["kind"], row["instance_id"], row["run_id"], row["action"]) == (
        "in-flight", inst.instance_id, run_id, None)
    assert f"run {run_id} is provisioning" in row["why"]
    assert [i.instance_id for i in aws.list_tagged(run_id)] == [inst.instance_id]  # still running
    after = run_cli("reconcile", "--cloud", "aws", "--terminate", "-y", "--grace", "0")
    assert after.exit_code == 0 and "in agreement" in after.stderr


def test_in_flight_survives_at_any_age_old_unknown_dies_young_unknown_waits(aws: AwsProvider) -> None:
    in_flight = start(aws, "r-inflight01")
    record("r-inflight01", None, state=RunState.PROVISIONING)
    backdate(in_flight, dt.timedelta(days=2))  # a launch that died long ago: `gpuplan watch` adopts it
    stale = start(aws, "r-stale00001")  # no run row, two days old: nobody will ever record it
    backdate(stale, dt.timedelta(days=2))
    young = start(aws, "r-young00001")  # no run row, seconds old: maybe a launch from another machine

    ended = run_cli("reconcile", "--cloud", "aws", "--terminate", "-y", "--json")
    assert ended.exit_code == 0, ended.stderr
    rows = {r["instance_id"]: r for r in ended.json()}
    assert {i: (r["kind"], r["action"]) for i, r in rows.items()} == {
        in_flight: ("in-flight", None), stale: ("orphan", "terminated"), young: ("young", None)}
    assert rows[stale]["age_s"] >= 2 * 86400 and rows[stale]["why"] == "no run r-stale00001 in the database"
    assert rows[in_flight]["age_s"] >= 2 * 86400
    assert {i.instance_id for i in aws.list_tagged()} == {in_flight, young}

    table = run_cli("reconcile", "--cloud", "aws")
    assert table.exit_code == 0
    assert "in-flight" in table.stdout and "young" in table.stdout and "r-inflight01 is provisioning" in table.stdout
    assert "2 spared" in table.stderr

    # The run is given up (marked failed): no launch of it is in flight any more, and its machine is an orphan.
    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        run = s.get(Run, "r-inflight01")
        assert run is not None
        run.state = RunState.FAILED
    store.close()
    again = run_cli("reconcile", "--cloud", "aws", "--terminate", "-y", "--json")
    rows = {r["instance_id"]: r for r in again.json()}
    assert (rows[in_flight]["kind"], rows[in_flight]["action"], rows[in_flight]["why"]) == (
        "orphan", "terminated", "run r-inflight01 is failed")
    assert (rows[young]["kind"], rows[young]["action"]) == ("young", None)
    assert [i.instance_id for i in aws.list_tagged()] == [young]


def test_bad_grace_is_bad_input() -> None:
    result = run_cli("reconcile", "--cloud", "aws", "--grace", "soon")
    assert result.exit_code == 2 and "--grace must look like" in result.stderr


# ---- the local provider: real processes --------------------------------------------------------------------


def local_record(run_id: str, state: str) -> None:
    record_run(run_id, state, provider="local", region="local")


def local_start(run_id: str) -> Instance:
    [inst] = LocalProvider().launch(LaunchRequest(run_id=run_id, name="loc", command="sleep 60",
                                                  run_dir=str(runs_dir() / run_id), runtime="process",
                                                  price_per_hour=Decimal(0)))
    return inst


def test_local_in_flight_survives_and_an_old_stray_process_is_ended() -> None:
    local = LocalProvider()
    in_flight = local_start("r-10ca1f1141")
    local_record("r-10ca1f1141", RunState.PROVISIONING)
    stray = local_start("r-10ca1d0000")  # no run row
    assert in_flight.created_at is not None
    assert abs((in_flight.created_at - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 30
    # The process started an hour ago, as its node folder says (what `list_tagged` reads back).
    old = dt.datetime.now(dt.timezone.utc) - dt.timedelta(hours=1)
    (local.node_dir(stray.instance_id) / STARTED_FILE).write_text(old.isoformat())
    [listed] = local.list_tagged("r-10ca1d0000")
    assert listed.created_at == old
    try:
        ended = run_cli("reconcile", "--cloud", "local", "--terminate", "-y", "--json")
        assert ended.exit_code == 0, ended.stderr
        assert {r["instance_id"]: (r["kind"], r["action"]) for r in ended.json()} == {
            in_flight.instance_id: ("in-flight", None), stray.instance_id: ("orphan", "terminated")}
        assert [i.instance_id for i in local.list_tagged()] == [in_flight.instance_id]
        store = Store.open(os.environ["GPUPLAN_DB"])
        with store.session() as s:
            assert [e.kind for e in s.query(Event).all()] == [EventKind.RECONCILE_TERMINATED]
            assert s.query(InstanceRow).count() == 0
        store.close()
    finally:
        local.terminate([in_flight.instance_id, stray.instance_id])


def test_a_local_node_is_running_from_the_moment_its_launch_returns(tmp_path: Path) -> None:
    """The flake this file had: a wrapper's pid is known once exec has begun, but /proc shows its command line a
    moment later (empty until then), and a node read in that instant looked vanished (failed): `list_tagged`
    dropped the stray above. The instant is the kernel's, on another core than the launcher's, so this catches it
    only on a busy machine with several cores; the test below pins the rule down on any machine."""
    local = LocalProvider(root=tmp_path / "runs")
    for n in range(30):
        [inst] = local.launch(LaunchRequest(run_id=f"r-{n:010d}", name="now", command="sleep 30",
                                            run_dir=str(local.root / f"r-{n:010d}"), runtime="process",
                                            price_per_hour=Decimal(0)))
        [seen] = local.describe([inst.instance_id])
        pid = int((local.node_dir(inst.instance_id) / PID_FILE).read_text())
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        assert seen.state == "running", (n, seen.state, seen.state_reason)


# A process that blanks its own argv: what /proc shows of a wrapper the kernel is still exec'ing (the argv area of
# its new memory is not laid out yet). That instant cannot be held still; this state can.
BLANK_ARGV = """
import time
fields = open("/proc/self/stat").read().rsplit(")", 1)[1].split()
start, end = int(fields[45]), int(fields[46])  # arg_start, arg_end
with open("/proc/self/mem", "r+b", buffering=0) as mem:
    mem.seek(start)
    mem.write(bytes(end - start))
print("blank", flush=True)
time.sleep(60)
"""


def test_a_wrapper_with_no_command_line_yet_is_judged_by_its_folder(tmp_path: Path) -> None:
    """A live process with no command line is the node's wrapper if it runs in the node folder (where the launch
    starts it, before the exec): described as running, and `terminate` signals it. In another folder it is someone
    else's process that reuses the pid: the node reads as vanished and is not signalled."""
    from gpuplan.jobs.processes import command_line

    local = LocalProvider(root=tmp_path / "runs")
    nodes = {}
    for where in ("ours", "other"):
        node = local.root / f"r-blank-{where}" / "node-0"
        node.mkdir(parents=True)
        launch = NodeLaunch(run_id=f"r-blank-{where}", name="b", argv=["true"], run_dir=str(node.parent))
        (node / LAUNCH_FILE).write_text(launch.to_json())
        nodes[where] = node
    procs = {where: subprocess.Popen([sys.executable, "-c", BLANK_ARGV], stdout=subprocess.PIPE,
                                     cwd=nodes[where] if where == "ours" else tmp_path, start_new_session=True)
             for where in nodes}
    try:
        for where, proc in procs.items():
            assert proc.stdout is not None and proc.stdout.readline() == b"blank\n"
            assert not any(command_line(proc.pid) or [b"x"])  # /proc shows no command line
            (nodes[where] / PID_FILE).write_text(str(proc.pid))
        ours, other = (f"r-blank-{w}/node-0" for w in ("ours", "other"))
        assert [i.state for i in local.describe([ours, other])] == ["running", "failed"]
        local.terminate([ours, other], grace_seconds=10)
        assert procs["ours"].wait(timeout=10) == -signal.SIGTERM
        assert procs["other"].poll() is None  # not ours: never signalled
    finally:
        for proc in procs.values():
            proc.kill()
            proc.wait()


def test_local_node_not_yet_started_is_dated_by_its_launch_file(tmp_path: Path) -> None:
    """Between writing launch.json and starting the process a node has no start time: its folder dates it."""
    local = LocalProvider(root=tmp_path)
    node = tmp_path / "r-notstarted" / "node-0"
    node.mkdir(parents=True)
    launch = NodeLaunch(run_id="r-notstarted", name="n", argv=["true"], run_dir=str(node.parent))
    (node / LAUNCH_FILE).write_text(launch.to_json())
    [pending] = local.list_tagged("r-notstarted")
    assert pending.state == "pending" and pending.launched_at is None
    assert pending.created_at is not None
    assert abs((pending.created_at - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 30


def test_a_node_being_launched_reads_whole_with_its_tags(tmp_path: Path) -> None:
    """Another process may list the run's nodes while the launch is writing them: every node it sees has its
    tags and a readable launch file (they were written in place, launch.json before tags.json, and a reader could
    see an untagged node or half a JSON document)."""
    import threading

    local = LocalProvider(root=tmp_path)
    run_id = "r-whole0000"
    seen: list[Instance] = []
    errors: list[BaseException] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            try:
                seen.extend(local.list_tagged(run_id))
            except BaseException as exc:  # the test reports whatever a reader hit
                errors.append(exc)
                return

    reader = threading.Thread(target=watch)
    reader.start()
    try:
        launched = local.launch(LaunchRequest(run_id=run_id, name="whole", command="sleep 30", nodes=8,
                                              run_dir=str(tmp_path / run_id), runtime="process",
                                              price_per_hour=Decimal(0)))
    finally:
        done.set()
        reader.join()
    try:
        assert not errors, errors
        assert len(launched) == 8
        assert all(inst.tags.get(TAG_RUN_ID) == run_id for inst in seen), [i.tags for i in seen
                                                                             if i.tags.get(TAG_RUN_ID) != run_id]
        for name in ("launch.json", "tags.json"):
            assert not list(tmp_path.glob(f"{run_id}/node-*/.{name}.*.tmp"))
    finally:
        local.terminate([inst.instance_id for inst in launched])


def _unready_wrapper(node: Path, run_id: str) -> subprocess.Popen[bytes]:
    """A process that is a node's wrapper by every sign (pid file, command line, folder) but has no stop handling
    yet: what `terminate` meets when it stops a node in the instant after it was launched."""
    node.mkdir(parents=True)
    (node / LAUNCH_FILE).write_text(NodeLaunch(run_id=run_id, name="n", argv=["true"],
                                               run_dir=str(node.parent)).to_json())
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", str(node)], cwd=node,
                            start_new_session=True)
    (node / PID_FILE).write_text(str(proc.pid))
    return proc


def test_a_wrapper_stopped_before_its_stop_handling_reads_as_stopped(tmp_path: Path) -> None:
    """SIGTERM kills a wrapper that has not yet set up its handler, so it records no exit; terminate records the
    stop itself, and the node reads as stopped by gpuplan, not as a job that vanished (failed)."""
    local = LocalProvider(root=tmp_path)
    proc = _unready_wrapper(tmp_path / "r-unready0" / "node-0", "r-unready0")
    [running] = local.list_tagged("r-unready0")
    assert running.state == "running"
    local.terminate([running.instance_id], grace_seconds=5)
    assert proc.wait(timeout=5) == -signal.SIGTERM
    [stopped] = local.describe([running.instance_id])
    assert stopped.state == "terminated", stopped.state_reason
    assert stopped.state_reason == "stopped"
    assert "stopped by gpuplan" in read_exit(tmp_path / "r-unready0" / "node-0")["detail"]
