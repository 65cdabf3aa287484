"""Issue 39 (prices): Azure through the CLI as a user runs it, each command a child process. `catalog refresh
--cloud azure` reads the public Retail Prices API (recorded pages on 127.0.0.1) with no credentials at all, says
where it is while it waits, and stores the offers with their source; `prices`, `gpus`, `plan` and `estimate` then
compare Azure with AWS and GCP (the shipped snapshot before any refresh)."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator

import pytest

from support.clihelp import run_subprocess
from support.fakes.azure_prices_server import PricesApi, serve_prices

NO_CREDENTIALS = ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_SUBSCRIPTION_ID",
                  "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "GOOGLE_APPLICATION_CREDENTIALS")


@pytest.fixture
def prices_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[PricesApi]:
    for name in NO_CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    with serve_prices() as api:
        monkeypatch.setenv("GPUPLAN_AZURE_PRICES_URL", api.url)
        yield api


def test_refresh_without_credentials_then_prices_show_the_refreshed_azure_offers(prices_api: PricesApi) -> None:
    assert not any(name in os.environ for name in NO_CREDENTIALS)
    done = run_subprocess("catalog", "refresh", "--cloud", "azure")
    assert done.exit_code == 0, done.stderr
    assert "azure: reading the prices it publishes for anyone" in done.stderr  # no "no credentials found"
    assert "azure: page 1 read" in done.stderr and "azure: page 3 read" in done.stderr  # progress on the wait
    assert "Standard_NV12s_v3" in done.stderr  # the size it left out, named
    assert done.stdout.startswith("azure: stored 4 offers (A10, A100-40GB, A100-PCIe, H100-NVL) in 2 regions")
    assert len(prices_api.asked) == 3

    rows = run_subprocess("prices", "--cloud", "azure", "--json", "--limit", "0")
    assert rows.exit_code == 0, rows.stderr
    assert {(r["instance_type"], r["region"]) for r in rows.json()} == {
        ("Standard_NC24ads_A100_v4", "westeurope"), ("Standard_NC40ads_H100_v5", "eastus"),
        ("Standard_ND96asr_v4", "eastus"), ("Standard_NV12ads_A10_v5", "eastus")}
    spot = run_subprocess("prices", "--cloud", "azure", "--gpu", "A100", "--spot", "--json").json()
    assert [(r["instance_type"], str(r["spot_price_per_hour"])) for r in spot] == [("Standard_ND96asr_v4", "8.1591")]
    shown = run_subprocess("prices", "--cloud", "azure")
    assert "Retail Prices API" in shown.stderr and "warning" not in shown.stderr  # fresh, and says where from


def test_a_region_refresh_asks_the_api_for_those_regions_only(prices_api: PricesApi) -> None:
    done = run_subprocess("catalog", "refresh", "--cloud", "azure", "--regions", "eastus", "--json")
    assert done.exit_code == 0, done.stderr
    assert "armRegionName eq 'eastus'" in urllib.parse.unquote(prices_api.asked[0])
    assert "regions=eastus" in done.json()["source"]


def test_prices_plan_gpus_and_estimate_compare_azure_with_the_other_clouds() -> None:
    # The shipped snapshot: all three clouds, each with its own provenance line.
    shown = run_subprocess("prices", "--gpu", "A10,A10G", "--limit", "0", "--json")
    assert shown.exit_code == 0, shown.stderr
    assert {r["cloud"] for r in shown.json()} == {"aws", "azure"}  # A10G is AWS's, A10 Azure's
    text = run_subprocess("prices", "--gpu", "T4", "--limit", "3")
    assert "azure shipped snapshot of about 2023-11-01" in text.stderr
    assert text.stderr.count("warning:") == 1  # staleness once per command, all clouds in it

    plan = run_subprocess("plan", "--params", "1.3e9", "--tokens", "2e9", "--gpu", "T4,A100", "--limit", "0",
                          "--json")
    assert plan.exit_code == 0, plan.stderr
    assert {o["cloud"] for o in plan.json()} == {"aws", "gcp", "azure"}
    explained = run_subprocess("plan", "--params", "1.3e9", "--tokens", "2e9", "--gpu", "T4", "--cloud", "azure",
                               "--limit", "3")
    assert explained.exit_code == 0, explained.stderr
    assert "azure 0.100/h" in explained.stdout + explained.stderr  # Azure's declared eviction rate
    only_azure = run_subprocess("plan", "--params", "1.3e9", "--tokens", "2e9", "--cloud", "azure", "--json")
    assert {o["cloud"] for o in only_azure.json()} == {"azure"}

    gpus = run_subprocess("gpus", "--json")
    assert gpus.exit_code == 0, gpus.stderr
    nvl = next(g for g in gpus.json() if g["name"] == "H100-NVL")
    assert nvl["clouds"] == ["azure"]

    est = run_subprocess("estimate", "--params", "1e9", "--gpu", "H100-NVL", "--gpus", "2", "--tokens", "1e9",
                         "--json")
    assert est.exit_code == 0, est.stderr
    assert any(o["cloud"] == "azure" and o["instance_type"] == "Standard_NC80adis_H100_v5"
               for o in est.json()["cost"]), est.stdout

    bad = run_subprocess("prices", "--cloud", "azur")
    assert bad.exit_code == 2 and "unknown cloud 'azur'; known: aws, gcp, azure" in bad.stderr
