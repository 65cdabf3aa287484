"""`gpuplan reconcile` in-process against moto: orphans, missing machines, regions, confirmation, skipped providers,
and the machines it must spare: an in-flight launch of a known run, and young unknown machines (--grace)."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal
from typing import Any

import pytest

from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import LaunchRequest, Provider, ProviderError
from gpuplan.runs.events import EventKind
from gpuplan.store.db import Store
from gpuplan.store.models import Event, InstanceRow, Run, RunState
from gpuplan.supervise.reconcile import OpenRow, Policy, compare, reconcile

from support.clihelp import run_cli


@pytest.fixture
def aws(moto_env: dict[str, str], aws_session: Any, monkeypatch: pytest.MonkeyPatch) -> AwsProvider:
    # The CLI builds its own provider: hand it the test AMI through the environment.
    monkeypatch.setenv("GPUPLAN_AWS_IMAGE_ID", moto_env["us-east-1"])
    return AwsProvider(session=aws_session, waiter_delay=0.05, regions=["us-west-2"])


def start(aws: AwsProvider, run_id: str, region: str = "us-east-1") -> str:
    [inst] = aws.launch(LaunchRequest(run_id=run_id, name="rec", command="true", run_dir="/tmp", region=region,
                                      instance_type="g5.xlarge", price_per_hour=Decimal("1.006"),
                                      boot_script="#!/bin/sh\n"))
    return inst.instance_id


def backdate(instance_id: str, age: dt.timedelta, region: str = "us-east-1") -> None:
    """Make moto report the machine as created `age` ago (what EC2's LaunchTime says of an old machine)."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    inst = ec2_backends[DEFAULT_ACCOUNT_ID][region].get_instance(instance_id)
    inst.launch_time = inst.launch_time - age


def record(run_id: str, instance_id: str | None, *, state: str = RunState.RUNNING, region: str = "us-east-1",
           closed: bool = False) -> None:
    store = Store.open(os.environ["GPUPLAN_DB"])
    now = dt.datetime.now(dt.timezone.utc)
    with store.session() as s:
        run = Run(id=run_id, name="rec", provider="aws", state=state, spec_text="name: rec", spec_hash="x",
                  cloud="aws", region=region)
        s.add(run)
        if instance_id:
            run.instances.append(InstanceRow(provider="aws", provider_instance_id=instance_id, cloud="aws",
                                          region=region, price_per_hour=Decimal("1.006"), min_billed_seconds=60,
                                          launched_at=now, terminated_at=now if closed else None))
    store.close()


def test_orphans_and_missing_rows_across_regions(aws: AwsProvider) -> None:
    known = start(aws, "r-known00001")
    record("r-known00001", known)
    crashed = start(aws, "r-crashed001")  # launched, never recorded
    record("r-crashed001", None, state=RunState.PROVISIONING)
    stray_west = start(aws, "r-unknown001", region="us-west-2")  # no run row at all (another database?)
    finished = start(aws, "r-finished01")  # the run ended but its teardown did not complete
    record("r-finished01", finished, state=RunState.STOPPED)
    record("r-vanished01", "i-0123456789abcdef0")  # the books think it runs; EC2 has no such machine

    result = run_cli("reconcile", "--cloud", "aws", "--regions", "us-east-1,us-west-2", "--json")
    assert result.exit_code == 0, result.stderr
    rows = {(r["kind"], r["instance_id"]): r for r in result.json()}
    # Default grace (15m): the run still provisioning is in flight, the unknown machine of seconds ago is young;
    # the finished run's machine is an orphan at any age.
    assert set(rows) == {("in-flight", crashed), ("young", stray_west), ("orphan", finished),
                         ("missing", "i-0123456789abcdef0")}
    assert rows[("young", stray_west)]["region"] == "us-west-2"
    assert rows[("in-flight", crashed)]["run_id"] == "r-crashed001"
    assert "r-crashed001 is provisioning" in rows[("in-flight", crashed)]["why"]
    assert "no run r-unknown001 in the database" in rows[("young", stray_west)]["why"]
    assert rows[("young", stray_west)]["why"].endswith("younger than the 15m grace")
    assert 0 <= rows[("young", stray_west)]["age_s"] < 120
    assert rows[("orphan", finished)]["why"] == "run r-finished01 is stopped"
    assert rows[("missing", "i-0123456789abcdef0")]["state"] == "terminated"
    assert list(result.json()[0]) == ["cloud", "region", "instance_id", "run_id", "state", "kind", "age_s", "why",
                                      "action"]

    # --grace 0 turns the age rule off; a launching run's machine is spared all the same.
    no_grace = run_cli("reconcile", "--cloud", "aws", "--regions", "us-east-1,us-west-2", "--grace", "0", "--json")
    kinds = {r["instance_id"]: r["kind"] for r in no_grace.json()}
    assert (kinds[stray_west], kinds[crashed], kinds[finished]) == ("orphan", "in-flight", "orphan")


def test_regions_take_glob_patterns_matched_against_the_clouds_regions(aws: AwsProvider) -> None:
    west = start(aws, "r-westdone01", region="us-west-2")
    record("r-westdone01", west, state=RunState.STOPPED, region="us-west-2")
    east = start(aws, "r-eastdone01", region="us-east-1")
    record("r-eastdone01", east, state=RunState.STOPPED, region="us-east-1")

    result = run_cli("reconcile", "--cloud", "aws", "--regions", "us-*", "--json")
    assert result.exit_code == 0, result.stderr
    assert {(r["instance_id"], r["region"]) for r in result.json()} == {(west, "us-west-2"), (east, "us-east-1")}
    west_glob = run_cli("reconcile", "--cloud", "aws", "--regions", "us-w?st-*", "--json")
    assert west_glob.exit_code == 0 and west in {r["instance_id"] for r in west_glob.json()}

    comma = run_cli("reconcile", "--cloud", "aws,local", "--regions", "us-east-1", "--json")
    assert comma.exit_code == 0, comma.stderr
    assert east in {r["instance_id"] for r in comma.json()}

    for bad, needle in (("mars-*", "--regions: 'mars-*' matches no region of aws"),
                        ("us-[east", "malformed region pattern 'us-[east'")):
        refused = run_cli("reconcile", "--cloud", "aws", "--regions", bad)
        assert refused.exit_code == 2, refused.stderr
        assert needle in refused.stderr and refused.stderr.count("\n") == 1 and refused.stdout == ""


def test_terminate_asks_first_and_ends_only_orphans(aws: AwsProvider) -> None:
    known = start(aws, "r-known00002")
    record("r-known00002", known)
    orphan = start(aws, "r-orphan0002")  # the launch failed after creating it: no launch of the run is in flight
    record("r-orphan0002", None, state=RunState.FAILED)

    declined = run_cli("reconcile", "--cloud", "aws", "--terminate", input="n\n")
    assert declined.exit_code != 0
    assert "Terminate 1 orphan(s)" in declined.stderr
    assert {i.instance_id for i in aws.list_tagged()} == {known, orphan}

    confirmed = run_cli("reconcile", "--cloud", "aws", "--terminate", input="y\n")
    assert confirmed.exit_code == 0, confirmed.stderr
    assert orphan in confirmed.stdout and "terminated" in confirmed.stdout
    assert [i.instance_id for i in aws.list_tagged()] == [known]

    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        [event] = [e for e in s.query(Event).all() if e.kind == EventKind.RECONCILE_TERMINATED]
        assert event.run_id == "r-orphan0002" and orphan in event.message
    store.close()
    again = run_cli("reconcile", "--cloud", "aws")
    assert again.exit_code == 0 and "in agreement" in again.stderr


def test_default_providers_are_the_ones_the_books_used(aws: AwsProvider) -> None:
    assert run_cli("reconcile", "--json").json() == []  # no runs: nothing to check, nothing printed but []
    orphan = start(aws, "r-defaults01")
    record("r-defaults01", None, state=RunState.LOST)
    assert [r["instance_id"] for r in run_cli("reconcile", "--json").json()] == [orphan]


class Broken(Provider):
    name = "broken"
    cloud = "broken"

    def launch(self, request: LaunchRequest) -> list[Any]:
        raise NotImplementedError

    def describe(self, instance_ids: Any) -> list[Any]:
        return []

    def terminate(self, instance_ids: Any) -> None:
        return None

    def list_tagged(self, run_id: str | None = None) -> list[Any]:
        raise ProviderError("no credentials for broken")


def test_a_provider_that_cannot_list_is_reported_skipped(aws: AwsProvider) -> None:
    orphan = start(aws, "r-skipped001")
    built = {"aws": aws, "broken": Broken()}
    report = reconcile(["broken", "aws"], [], lambda name: [], build=lambda name, regions: built[name],
                       policy=Policy(grace=dt.timedelta(0)))
    assert report.skipped == {"broken": "no credentials for broken"}
    assert report.checked == ["aws"]
    assert [f.instance_id for f in report.orphans] == [orphan]


def test_compare_is_provider_agnostic(aws: AwsProvider) -> None:
    live = start(aws, "r-compare001")
    rows = [OpenRow("aws", live, "r-compare001", "us-east-1"), OpenRow("aws", "i-00000000000000001", "r-x", None)]
    findings = compare(aws, rows)
    assert [(f.kind, f.instance_id) for f in findings] == [("missing", "i-00000000000000001")]


def test_the_pass_asks_before_it_ends_anything_and_records_what_it_ended(aws: AwsProvider) -> None:
    """run_reconcile without the CLI: the caller's confirm is asked with the orphans' ids and can abort before any
    machine ends; once it agrees, the orphan ends and an event records it (the CLI only parses and renders)."""
    from gpuplan.supervise.reconcile_pass import ReconcileRequest, run_reconcile

    orphan = start(aws, "r-pass000001")  # no run row: an unknown machine, and --grace 0 makes it an orphan
    request = ReconcileRequest(clouds=("aws",), regions=("us-east-1",), grace=dt.timedelta(0), terminate=True)
    store = Store.open(os.environ["GPUPLAN_DB"])
    asked: list[str] = []
    warned: list[str] = []

    class Declined(Exception):
        pass

    def decline(question: str) -> None:
        asked.append(question)
        raise Declined

    with pytest.raises(Declined):
        run_reconcile(store, store.url, request, confirm=decline, warn=warned.append)
    assert asked == [f"Terminate 1 orphan(s): {orphan}?"]
    assert [i.instance_id for i in aws.list_tagged()] == [orphan]

    outcome = run_reconcile(store, store.url, request, confirm=asked.append, warn=warned.append)
    assert [(r["instance_id"], r["kind"], r["action"]) for r in outcome.rows] == [(orphan, "orphan", "terminated")]
    assert outcome.names == ["aws"] and outcome.report.checked == ["aws"] and warned == []
    assert aws.list_tagged() == []
    with store.session() as s:
        [event] = [e for e in s.query(Event).all() if e.kind == EventKind.RECONCILE_TERMINATED]
        assert event.run_id is None and orphan in event.message
    store.close()
