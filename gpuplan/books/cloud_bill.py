"""The bill itself: AWS Cost Explorer's cost per `gpuplan:run-id` tag, next to the books, per run and period.

Every machine (and volume) gpuplan starts on AWS carries the tag `gpuplan:run-id` (gpuplan.providers.base.TAG_RUN_ID).
Cost Explorer groups costs by a tag only once it is an *active cost allocation tag*: "After you activate
user-defined tags, it can take up to 24 hours for them to appear" and costs are grouped by it only from the
activation on (https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/activating-tags.html). So:
- ListCostAllocationTags (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_ListCostAllocationTags.html)
  says whether the tag is `Active` or `Inactive`; a key it does not list has never been seen in the billing data;
  either way the report stops with the one line that says what to do;
- GetCostAndUsage (https://docs.aws.amazon.com/aws-cost-management/latest/APIReference/API_GetCostAndUsage.html)
  with `GroupBy=[{Type: TAG, Key: gpuplan:run-id}]` answers per period (`TimePeriod` Start inclusive, End
  exclusive, dates in UTC) one group per tag value, keyed `gpuplan:run-id$<value>` (`$` alone: untagged cost),
  with `Estimated` true while the period is still open; results are paginated by NextPageToken. A period the books
  charge a run for but the bill does not (yet) is shown as "not in yet": Cost Explorer's data lags by up to a day.
The metric is UnblendedCost: what the account is charged for the usage, before credits.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpuplan.books import ledger
from gpuplan.errors import GpuplanError
from gpuplan.providers.base import TAG_RUN_ID

METRIC = "UnblendedCost"
CE_REGION = "us-east-1"  # Cost Explorer's one endpoint

ACTIVATE_URL = "https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/activating-tags.html"
GRANULARITY = {"month": "MONTHLY", "day": "DAILY"}


def billed_clouds() -> frozenset[str]:
    """The clouds whose bill this module reads: the providers that declare `bill_by_run_tag` (Cost Explorer is
    AWS's); `report --bill` refuses the others."""
    from gpuplan.providers.registry import UnknownProviderError, load_provider_class, provider_names

    billed = set()
    for name in provider_names():
        try:
            cls = load_provider_class(name)
        except UnknownProviderError:
            continue
        if cls.bill_by_run_tag:
            billed.add(cls.cloud)
    return frozenset(billed)


class BillUnavailable(GpuplanError):
    """Cost Explorer cannot group this account's costs by run (yet): the message says why and what to do."""


@dataclass(frozen=True)
class BillRow:
    """One run's cost in one period as Cost Explorer reports it (run_id None: costs without the tag)."""

    period: dt.date
    run_id: str | None
    cost: Decimal
    estimated: bool


@dataclass(frozen=True)
class Comparison:
    """Books vs bill for one run and period; `bill` None: the bill has nothing for it (not in yet)."""

    period: dt.date
    run_id: str
    books: Decimal
    bill: Decimal | None
    estimated: bool

    @property
    def difference(self) -> Decimal | None:
        return None if self.bill is None else self.bill - self.books

    def as_json(self) -> dict[str, Any]:
        return {"period": self.period.isoformat(), "run_id": self.run_id, "books_usd": self.books,
                "bill_usd": self.bill, "difference_usd": self.difference, "estimated": self.estimated,
                "status": "not in yet" if self.bill is None else ("estimated" if self.estimated else "final")}


def check_tag(ce: Any) -> None:
    """BillUnavailable unless `gpuplan:run-id` is an active cost allocation tag."""
    found = ce.list_cost_allocation_tags(TagKeys=[TAG_RUN_ID]).get("CostAllocationTags", [])
    status = next((t.get("Status") for t in found if t.get("TagKey") == TAG_RUN_ID), None)
    if status == "Active":
        return
    if status is None:
        raise BillUnavailable(f"AWS has not seen the cost allocation tag {TAG_RUN_ID} yet (a tag appears up to 24 "
                              f"hours after the first tagged machine ran); then activate it: {ACTIVATE_URL}")
    raise BillUnavailable(f"the cost allocation tag {TAG_RUN_ID} is {status}: activate it in Billing and Cost "
                          f"Management > Cost allocation tags ({ACTIVATE_URL}); Cost Explorer groups costs by it "
                          "only from then on, and needs up to 24 hours")


def fetch_bill(ce: Any, start: dt.date, end: dt.date, unit: str = "month") -> list[BillRow]:
    """Cost per run per period in [start, end) from GetCostAndUsage, every page."""
    kwargs: dict[str, Any] = {"TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
                              "Granularity": GRANULARITY[unit], "Metrics": [METRIC],
                              "GroupBy": [{"Type": "TAG", "Key": TAG_RUN_ID}]}
    rows: list[BillRow] = []
    while True:
        try:
            page = ce.get_cost_and_usage(**kwargs)
        except Exception as exc:
            if _error_code(exc) == "DataUnavailableException":
                raise BillUnavailable("Cost Explorer has no data for this period yet (it refreshes at least once "
                                      "a day); try again later") from exc
            raise
        for result in page.get("ResultsByTime", []):
            period = dt.date.fromisoformat(result["TimePeriod"]["Start"])
            estimated = bool(result.get("Estimated"))
            for group in result.get("Groups", []):
                key = (group.get("Keys") or [""])[0]
                value = key.split("$", 1)[1] if "$" in key else key
                amount = Decimal(str(group.get("Metrics", {}).get(METRIC, {}).get("Amount", "0")))
                rows.append(BillRow(period, value or None, amount, estimated))
        token = page.get("NextPageToken")
        if not token:
            return rows
        kwargs["NextPageToken"] = token


def _error_code(exc: Exception) -> str | None:
    response = getattr(exc, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def books_by_run(conn: Any, start: dt.date, end: dt.date, unit: str, now: dt.datetime,
                 project: str | None = None) -> dict[tuple[dt.date, str], Decimal]:
    """The books' AWS cost per (period start, run) in [start, end) (gpuplan.books.ledger, cut at the edges)."""
    since = dt.datetime.combine(start, dt.time(), dt.timezone.utc)
    until = dt.datetime.combine(end, dt.time(), dt.timezone.utc)
    spent = ledger.spend(conn, now=now, since=since, until=until, unit=unit, key="run",
                         scope=ledger.Scope(project, ("aws",)))
    out: dict[tuple[dt.date, str], Decimal] = {}
    for row in spent.rows:
        if row.key and row.period is not None:
            period = max(row.period.date(), start)  # Cost Explorer's first period starts at `start`
            out[(period, row.key)] = out.get((period, row.key), Decimal(0)) + row.cost
    return out


def compare(books: dict[tuple[dt.date, str], Decimal], bill: Iterable[BillRow]) -> list[Comparison]:
    """Every (period, run) of either side, books vs bill (runs of the bill unknown to the books are kept)."""
    billed: dict[tuple[dt.date, str], tuple[Decimal, bool]] = {}
    for row in bill:
        if row.run_id is None:
            continue
        cost, estimated = billed.get((row.period, row.run_id), (Decimal(0), False))
        billed[(row.period, row.run_id)] = (cost + row.cost, estimated or row.estimated)
    keys = sorted(set(books) | set(billed))
    return [Comparison(period, run_id, books.get((period, run_id), Decimal(0)),
                       billed[(period, run_id)][0] if (period, run_id) in billed else None,
                       billed.get((period, run_id), (Decimal(0), False))[1]) for period, run_id in keys]


def untagged_total(bill: Iterable[BillRow]) -> Decimal:
    """The account's cost without the tag in the window (everything gpuplan did not start, and older costs)."""
    return sum((row.cost for row in bill if row.run_id is None), Decimal(0))


def read_bill(ce: Any, start: dt.date, end: dt.date, unit: str) -> list[BillRow]:
    """Check the tag, then fetch the bill; any refusal (no credentials, no ce:GetCostAndUsage permission) is one
    BillUnavailable line rather than a traceback."""
    try:
        client = ce or cost_explorer_client()
        check_tag(client)
        return fetch_bill(client, start, end, unit)
    except GpuplanError:
        raise
    except Exception as exc:
        code = _error_code(exc) or type(exc).__name__
        text = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise BillUnavailable(f"AWS Cost Explorer refused the request ({code}: {text})") from exc


def cost_explorer_client() -> Any:
    """A Cost Explorer client (boto3's credentials chain; AWS_ENDPOINT_URL honoured by botocore)."""
    import boto3

    return boto3.client("ce", region_name=CE_REGION)
