"""`gpuplan reconcile --cloud aws` finds the run secrets gpuplan left in SSM Parameter Store (SecureString
`/gpuplan/<run_id>/<NAME>`, tagged) in every searched region and, with --terminate, deletes the orphans; a live
run's parameters, and parameters gpuplan did not make, are never touched; a refused delete is reported, not fatal;
no value is ever printed. In-process moto: the real CLI, and the reconcile module for the refused delete (moto
has no error injection: botocore's own event hook answers with SSM's error shape).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import Any

import pytest

from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.aws.secrets import run_of
from gpuplan.providers.base import CloudSecret, LaunchRequest
from gpuplan.runs.events import EventKind
from gpuplan.store.db import Store
from gpuplan.store.models import Event, RunState
from gpuplan.supervise.reconcile import Policy
from gpuplan.supervise.reconcile_secrets import check_secrets, classify_secret, delete_orphan_secrets

from support.clihelp import Result, run_cli
from support.ledger_fixture import record_run

VALUE = "ssm-VALUE-4b3a-$(id)"
MARK = "ssm-VALUE"
REGIONS = "us-east-1,us-west-2"


@pytest.fixture
def aws(moto_env: dict[str, str], aws_session: Any) -> AwsProvider:
    return AwsProvider(session=aws_session, regions=["us-west-2"])


def leave_secrets(aws: AwsProvider, run_id: str, region: str = "us-east-1",
                  age: dt.timedelta = dt.timedelta(0)) -> str:
    """Store the run's secret as a launch does (tagged SecureString), made `age` ago: a crash's leftover."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ssm.models import ssm_backends

    aws._put_secrets(region, LaunchRequest(run_id=run_id, name="rec", command="true", run_dir="/tmp",
                                           secrets={"API_TOKEN": VALUE}))
    name = f"/gpuplan/{run_id}/API_TOKEN"
    for version in ssm_backends[DEFAULT_ACCOUNT_ID][region]._parameters[name]:
        version.last_modified_date = version.last_modified_date - age
    return name


def record(run_id: str, state: str) -> None:
    record_run(run_id, state)


def names(aws_clients: Any, region: str) -> set[str]:
    return {p["Name"] for p in aws_clients("ssm", region).describe_parameters()["Parameters"]}


def secret_rows(result: Result) -> dict[str, dict]:
    assert result.exit_code == 0, result.stderr
    assert MARK not in result.stdout and MARK not in result.stderr
    return {r["secret"]: r for r in result.json() if r.get("resource") == "secret"}


def test_orphan_parameters_across_regions_are_reported_then_deleted(aws: AwsProvider, aws_clients: Any) -> None:
    record("r-running001", RunState.RUNNING)
    record("r-launching1", RunState.PROVISIONING)
    record("r-stopped001", RunState.STOPPED)
    record("r-failed0001", RunState.FAILED)
    running = leave_secrets(aws, "r-running001")
    launching = leave_secrets(aws, "r-launching1", age=dt.timedelta(days=3))
    stopped = leave_secrets(aws, "r-stopped001")
    failed_west = leave_secrets(aws, "r-failed0001", region="us-west-2")
    unknown = leave_secrets(aws, "r-unknown001", age=dt.timedelta(hours=2))
    young = leave_secrets(aws, "r-unknown002")
    # Parameters gpuplan did not make, under its path: a plain String (an AMI id) and an untagged SecureString.
    ssm = aws_clients("ssm", "us-east-1")
    ssm.put_parameter(Name="/gpuplan/test/dlami-id", Value="ami-0123", Type="String")
    ssm.put_parameter(Name="/gpuplan/r-stopped001/MINE", Value="x", Type="SecureString")
    east, west = names(aws_clients, "us-east-1"), names(aws_clients, "us-west-2")

    found = run_cli("reconcile", "--cloud", "aws", "--regions", REGIONS, "--json")
    rows = secret_rows(found)
    assert sorted(rows) == sorted([stopped, failed_west, unknown, young])
    assert {k: v for k, v in rows[failed_west].items() if k != "age_s"} == {
        "resource": "secret", "cloud": "aws", "provider": "aws", "region": "us-west-2", "secret": failed_west,
        "run_id": "r-failed0001", "run_state": "failed", "kind": "orphan", "why": "run r-failed0001 is failed",
        "action": None}
    assert rows[unknown]["why"] == "no run r-unknown001 in the database" and rows[unknown]["age_s"] >= 7200
    assert rows[young]["kind"] == "young"
    assert (names(aws_clients, "us-east-1"), names(aws_clients, "us-west-2")) == (east, west)

    ended = run_cli("reconcile", "--cloud", "aws", "--regions", REGIONS, "--terminate", "-y", "--json")
    rows = secret_rows(ended)
    assert {s: r["action"] for s, r in rows.items()} == {
        stopped: "deleted", failed_west: "deleted", unknown: "deleted", young: None}
    assert names(aws_clients, "us-east-1") == east - {stopped, unknown}
    assert running in east and launching in east and "/gpuplan/r-stopped001/MINE" in east
    assert names(aws_clients, "us-west-2") == west - {failed_west}
    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        events = sorted(e.message for e in s.query(Event).all() if e.kind == EventKind.RECONCILE_SECRET_DELETED)
        assert all(MARK not in (e.data_json or "") for e in s.query(Event).all())
    store.close()
    assert events == sorted(f"orphan secret {n} (aws in {r}) deleted by reconcile" for n, r in (
        (stopped, "us-east-1"), (unknown, "us-east-1"), (failed_west, "us-west-2")))

    human = run_cli("reconcile", "--cloud", "aws", "--regions", REGIONS)
    assert human.exit_code == 0 and young in human.stdout and running not in human.stdout
    assert MARK not in human.stdout + human.stderr


def refuse(client: Any, operation: str, code: str = "AccessDeniedException") -> list[dict[str, Any]]:
    """Answer `operation` on this client with SSM's error, as AWS does for a caller the policy does not cover."""
    from botocore.awsrequest import AWSResponse

    calls: list[dict[str, Any]] = []

    def handler(params: dict[str, Any], **_: Any) -> Any:
        calls.append(params)
        error = {"Error": {"Code": code, "Message": f"not authorized to perform: ssm:{operation}"},
                 "ResponseMetadata": {"HTTPStatusCode": 400}}
        return AWSResponse("https://ssm.us-west-2.amazonaws.com/", 400, {}, None), error

    client.meta.events.register_first(f"before-call.ssm.{operation}", handler)
    return calls


def test_a_refused_delete_is_reported_and_the_other_region_still_goes(aws: AwsProvider, aws_clients: Any) -> None:
    east = leave_secrets(aws, "r-gone000001", age=dt.timedelta(hours=1))
    west = leave_secrets(aws, "r-gone000002", region="us-west-2", age=dt.timedelta(hours=1))
    policy = Policy(run_states=lambda run_ids: {})
    report = check_secrets(["aws"], lambda name: [], policy, build=lambda name, regions: aws)
    assert sorted(f.secret.name for f in report.orphans) == sorted([east, west])
    calls = refuse(aws.client("ssm", "us-west-2"), "DeleteParameters")

    outcome = delete_orphan_secrets(report.orphans, lambda name: [], build=lambda name, regions: aws)
    by_name = {s.name: why for s, why in outcome.items()}
    assert by_name[east] is None
    assert by_name[west] is not None and "AccessDeniedException in us-west-2" in by_name[west]
    assert len(calls) == 1
    assert east not in names(aws_clients, "us-east-1") and west in names(aws_clients, "us-west-2")


def test_a_region_that_cannot_be_listed_skips_the_secrets_not_the_check(aws: AwsProvider) -> None:
    refuse(aws.client("ssm", "us-west-2"), "DescribeParameters")
    report = check_secrets(["aws"], lambda name: [], Policy(), build=lambda name, regions: aws)
    assert report.findings == [] and "AccessDeniedException in us-west-2" in report.skipped["aws"]


def test_an_account_without_gpuplan_parameters_is_checked_quietly(aws: AwsProvider, aws_clients: Any) -> None:
    """A user who never used `secrets:`: SSM needs no enabling, the listing is just empty, so there is no warning
    (only a refused DescribeParameters, above, warns). The user's own parameters do not count."""
    ssm = aws_clients("ssm", "us-east-1")
    ssm.put_parameter(Name="/gpuplan/test/dlami-id", Value="ami-0123", Type="String")
    ssm.put_parameter(Name="/team/db-password", Value="x", Type="SecureString")
    record("r-plain00001", RunState.SUCCEEDED)

    result = run_cli("reconcile", "--cloud", "aws", "--regions", REGIONS)
    assert result.exit_code == 0, result.stderr
    assert "in agreement: checked aws" in result.stderr and "not checked" not in result.stderr
    assert names(aws_clients, "us-east-1") == {"/gpuplan/test/dlami-id", "/team/db-password"}


def test_the_run_of_a_parameter_is_its_path_and_nothing_else() -> None:
    assert run_of("/gpuplan/r-0a1b2c3d4e/HF_TOKEN") == "r-0a1b2c3d4e"
    for other in ("/gpuplan/test/deep/dlami-id", "/gpuplan/r-1", "/other/r-1/X", "gpuplan/r-1/X", "/gpuplan//X"):
        assert run_of(other) is None, other


def test_the_rule_for_a_secret() -> None:
    now = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    grace = dt.timedelta(minutes=15)

    def kind(run_id: str | None, state: str | None, age: dt.timedelta | None) -> str | None:
        secret = CloudSecret(provider="aws", name="/gpuplan/x/Y", run_id=run_id,
                             created_at=None if age is None else now - age)
        return classify_secret(secret, state, grace, now)[0]

    for state in RunState.LIVE:  # a live run's secret: never reported, never deleted, at any age
        assert kind("r-1", state, dt.timedelta(days=30)) is None
    for state in RunState.FINAL:
        assert kind("r-1", state, dt.timedelta(0)) == "orphan"
    assert kind("r-1", None, dt.timedelta(minutes=16)) == "orphan"
    assert kind("r-1", None, dt.timedelta(minutes=14)) == "young"
    assert kind("r-1", None, None) == "young"  # no age known: spared while a grace is asked for
    assert kind(None, None, dt.timedelta(days=30)) == "unattributed"
    unknown = CloudSecret(provider="aws", name="/gpuplan/r-1/Y", run_id="r-1")
    assert classify_secret(unknown, None, dt.timedelta(0), now)[0] == "orphan"


def test_a_provider_that_keeps_no_secrets_reports_none() -> None:
    from gpuplan.providers.local import LocalProvider

    local = LocalProvider()
    assert local.list_secrets() == []
    assert local.delete_secrets([CloudSecret(provider="local", name="x", run_id="r-1")]) == {}
    report = check_secrets(["local"], lambda name: [], Policy())
    assert report.findings == [] and report.skipped == {}
