"""`gpuplan report --bill`: books vs AWS Cost Explorer per run and period, through botocore's Stubber.

The Stubber checks every request's parameters against the Cost Explorer model and against what the code must send
(the tag group, the UTC date window with End exclusive, the NextPageToken of the previous page), and answers as the
API documents: groups keyed `gpuplan:run-id$<value>`, `$` alone for untagged cost, `Estimated` for an open period.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from gpuplan.books import cloud_bill
from gpuplan.store.db import Store
from gpuplan.store.models import InstanceRow, Run

from support.clihelp import run_cli

UTC = dt.timezone.utc
NOW = "2026-12-10T12:00:00Z"


def ce_with(*responses: tuple[str, dict[str, Any], dict[str, Any]]) -> tuple[Any, Stubber]:
    ce = boto3.client("ce", region_name="us-east-1")
    stubber = Stubber(ce)
    for method, response, params in responses:
        stubber.add_response(method, response, params)
    return ce, stubber


def tag_status(status: str | None) -> tuple[str, dict[str, Any], dict[str, Any]]:
    tags = [] if status is None else [{"TagKey": "gpuplan:run-id", "Status": status, "Type": "UserDefined"}]
    return "list_cost_allocation_tags", {"CostAllocationTags": tags}, {"TagKeys": ["gpuplan:run-id"]}


def group(run: str, amount: str) -> dict[str, Any]:
    return {"Keys": [f"gpuplan:run-id${run}"], "Metrics": {"UnblendedCost": {"Amount": amount, "Unit": "USD"}}}


def usage(start: str, end: str, groups: list[dict[str, Any]], estimated: bool,
          token: str | None = None) -> dict[str, Any]:
    page: dict[str, Any] = {"ResultsByTime": [{"TimePeriod": {"Start": start, "End": end}, "Total": {},
                                                "Groups": groups, "Estimated": estimated}]}
    if token:
        page["NextPageToken"] = token
    return page


PARAMS = {"TimePeriod": {"Start": "2026-11-01", "End": "2026-12-11"}, "Granularity": "MONTHLY",
          "Metrics": ["UnblendedCost"], "GroupBy": [{"Type": "TAG", "Key": "gpuplan:run-id"}]}


def seed() -> None:
    """r-aws1 ran 2 h in November at $10/h ($20); r-aws2 1 h on Dec 9 at $3/h ($3); r-gcp is not AWS."""
    store = Store.open()
    try:
        with store.session() as s:
            for run_id, cloud, start, hours, price in (("r-aws1", "aws", dt.datetime(2026, 11, 5, tzinfo=UTC), 2, "10"),
                                                       ("r-aws2", "aws", dt.datetime(2026, 12, 9, tzinfo=UTC), 1, "3"),
                                                       ("r-gcp", "gcp", dt.datetime(2026, 11, 6, tzinfo=UTC), 1, "5")):
                s.add(Run(id=run_id, name=run_id, provider=cloud, cloud=cloud, spec_text="", spec_hash="",
                          state="succeeded"))
                s.flush()
                s.add(InstanceRow(run_id=run_id, provider=cloud, provider_instance_id=f"i-{run_id}", cloud=cloud,
                                  price_per_hour=Decimal(price), min_billed_seconds=60, launched_at=start,
                                  terminated_at=start + dt.timedelta(hours=hours), state="terminated"))
    finally:
        store.close()


def run_bill(monkeypatch: pytest.MonkeyPatch, ce: Any, *args: str) -> Any:
    monkeypatch.setattr(cloud_bill, "cost_explorer_client", lambda: ce)
    return run_cli("report", "--bill", "--since", "2026-11-01", "--now", NOW, *args)


def test_books_vs_bill_per_run_and_month_over_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    seed()
    ce, stubber = ce_with(
        tag_status("Active"),
        ("get_cost_and_usage", usage("2026-11-01", "2026-12-01", [group("r-aws1", "20.41"), group("", "7.5")],
                                     False, token="t2"), PARAMS),
        ("get_cost_and_usage", usage("2026-12-01", "2026-12-11", [], True), {**PARAMS, "NextPageToken": "t2"}),
    )
    with stubber:
        result = run_bill(monkeypatch, ce, "--json")
    assert result.exit_code == 0, result.stderr
    stubber.assert_no_pending_responses()
    rows = {(r["period"], r["run_id"]): r for r in result.json()["rows"]}
    assert set(rows) == {("2026-11-01", "r-aws1"), ("2026-12-01", "r-aws2")}  # GCP's run is not on the AWS bill
    nov = rows[("2026-11-01", "r-aws1")]
    assert (nov["books_usd"], nov["bill_usd"], nov["difference_usd"], nov["status"]) == (20, 20.41, 0.41, "final")
    dec = rows[("2026-12-01", "r-aws2")]
    assert dec["bill_usd"] is None and dec["status"] == "not in yet" and dec["books_usd"] == 3
    assert result.json()["untagged_usd"] == 7.5


def test_the_table_says_what_is_not_in_yet(monkeypatch: pytest.MonkeyPatch) -> None:
    seed()
    ce, stubber = ce_with(tag_status("Active"),
                          ("get_cost_and_usage", usage("2026-11-01", "2026-12-11", [group("r-aws1", "20")], True),
                           {**PARAMS, "Granularity": "DAILY"}))
    with stubber:
        result = run_bill(monkeypatch, ce, "--by", "day")
    assert result.exit_code == 0, result.stderr
    assert "r-aws1" in result.stdout and "not in yet" in result.stdout and "not in yet" in result.stderr


@pytest.mark.parametrize(("status", "message"), [
    ("Inactive", "the cost allocation tag gpuplan:run-id is Inactive: activate it"),
    (None, "AWS has not seen the cost allocation tag gpuplan:run-id yet"),
])
def test_a_tag_not_activated_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, status: str | None,
                                                message: str) -> None:
    ce, stubber = ce_with(tag_status(status))
    with stubber:
        result = run_bill(monkeypatch, ce)
    assert result.exit_code == 1 and result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr
    assert "activating-tags.html" in result.stderr


def test_data_not_available_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    ce, stubber = ce_with(tag_status("Active"))
    stubber.add_client_error("get_cost_and_usage", "DataUnavailableException", "Data is not available",
                             expected_params=PARAMS)
    with stubber:
        result = run_bill(monkeypatch, ce)
    assert result.exit_code == 1 and "Cost Explorer has no data for this period yet" in result.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--quoted",), "give --quoted or --bill, not both"),
    (("--by", "project"), "--by takes month or day only"),
    (("--cloud", "gcp"), "covers --cloud aws only"),
    (("--format", "csv"), "does not take --format csv"),
])
def test_bad_bill_options_exit_2(monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], message: str) -> None:
    result = run_bill(monkeypatch, object(), *args)
    assert result.exit_code == 2 and message in result.stderr


def test_no_permission_is_one_clear_line(monkeypatch: pytest.MonkeyPatch) -> None:
    ce, stubber = ce_with()
    stubber.add_client_error("list_cost_allocation_tags", "AccessDeniedException",
                             "User is not authorized to perform: ce:ListCostAllocationTags")
    with stubber:
        result = run_bill(monkeypatch, ce)
    assert result.exit_code == 1 and len(result.stderr.strip().splitlines()) == 1
    assert "AWS Cost Explorer refused the request (AccessDeniedException: " in result.stderr
