"""GCP price refresh through the CLI: the real Google clients against the local fake billing/compute server."""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal

import pytest

from gpuplan.catalog import Catalog
from gpuplan.catalog.gcp_clients import client_kwargs, endpoint_root, is_loopback

from support.clihelp import run_cli
from support.fakes.gcp_catalog_server import FakeGcpCatalog


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGcpCatalog]:
    with FakeGcpCatalog() as server:
        for name, value in server.env().items():
            monkeypatch.setenv(name, value)
        yield server


def test_endpoint_overrides_and_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    assert endpoint_root("http://127.0.0.1:8080/compute/v1/") == "http://127.0.0.1:8080"
    assert endpoint_root(None) is None
    assert is_loopback("http://127.0.0.1:1") and is_loopback("http://localhost:1")
    assert not is_loopback("https://compute.googleapis.com")
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", "https://compute.example.com/compute/v1/")
    kwargs = client_kwargs("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE")
    assert kwargs["client_options"] == {"api_endpoint": "https://compute.example.com"}
    assert "credentials" not in kwargs  # anonymous credentials only on loopback


def test_refresh_composes_host_plus_gpus_and_prices_n1(fake: FakeGcpCatalog) -> None:
    before = run_cli("prices", "--cloud", "gcp", "--gpu", "T4", "--json")
    assert before.exit_code == 0 and before.json()  # the shipped snapshot has n1 hosts with T4 too
    assert all(row["source"].startswith("shipped") for row in before.json())

    result = run_cli("catalog", "refresh", "--cloud", "gcp", "--json")
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert report["cloud"] == "gcp" and report["regions"] == ["europe-west4", "us-central1"]
    assert report["gpus"] == ["A100-40GB", "L4", "T4", "V100-16GB"]
    assert sum("/skus" in path for path in fake.requests) == 5  # 23 SKUs in pages of 5: pagination followed

    catalog = Catalog.load(None, {"gcp"})
    assert catalog.sources["gcp"].snapshot_id == report["snapshot_id"]
    offers = {(o.zone, o.instance_type, o.gpu, o.gpu_count): o for o in catalog.offers}
    a2 = offers[("us-central1-a", "a2-highgpu-1g", "A100-40GB", 1.0)]
    # 12 vCPU x 0.031611 + 85 GiB x 0.004237 + 1 A100 x 2.933908 = the shipped snapshot's 3.67339
    assert a2.price_per_hour == Decimal("3.673385")
    assert a2.spot_price_per_hour == Decimal("1.803802")
    t4 = offers[("us-central1-b", "n1-standard-8", "T4", 2.0)]
    assert t4.price_per_hour == Decimal("1.079998")  # 8 x 0.031611 + 30 x 0.004237 + 2 x 0.35
    assert (t4.gpu_memory_gb, t4.vcpus, t4.memory_gb) == (16, 8.0, 30.0)
    assert ("us-central1-a", "n1-standard-32", "V100-16GB", 8.0) in offers  # up to the zone's 8 per VM
    assert not any(k[2] == "T4" and k[3] == 8.0 for k in offers)  # T4: at most 4 per VM
    eu = offers[("europe-west4-a", "n1-standard-4", "T4", 1.0)]
    assert eu.spot_price_per_hour is None  # no spot SKU for that region in the catalog
    assert not any("k80" in o.instance_type for o in catalog.offers)

    after = run_cli("prices", "--cloud", "gcp", "--gpu", "T4", "--json")
    rows = after.json()
    assert {(r["region"], r["instance_type"]) for r in rows} >= {("us-central1", "n1-standard-4")}
    cheapest = rows[0]
    assert (cheapest["instance_type"], cheapest["price"]) == ("n1-standard-4", 0.539999)
    assert "warning:" not in after.stderr.replace("aws prices", "")  # gcp is fresh; only aws may be stale


def test_refresh_failing_halfway_keeps_the_previous_prices(fake: FakeGcpCatalog) -> None:
    first = run_cli("catalog", "refresh", "--cloud", "gcp", "--json")
    assert first.exit_code == 0
    fake.fail["/aggregated/acceleratorTypes"] = 403  # SKUs and machine types already fetched
    second = run_cli("catalog", "refresh", "--cloud", "gcp")
    assert second.exit_code == 1
    progress, error = second.stderr.strip().splitlines()  # "refreshing ..." then ONE error line
    assert progress.startswith("refreshing gcp prices")
    assert error.startswith("error: gcp price refresh failed (Forbidden: 403")
    assert error.endswith("the previous prices are kept")
    assert Catalog.load(None, {"gcp"}).sources["gcp"].snapshot_id == first.json()["snapshot_id"]


def test_refresh_regions_and_bad_input(fake: FakeGcpCatalog) -> None:
    result = run_cli("catalog", "refresh", "--cloud", "gcp", "--regions", "europe-west4", "--json")
    assert result.exit_code == 0 and result.json()["regions"] == ["europe-west4"]
    assert {o.region for o in Catalog.load(None, {"gcp"}).offers} == {"europe-west4"}
    for args, message in ((("--cloud", "azur"), "unknown provider 'azur'"), (("--cloud", "local"), "has no price API"),
                          (("--cloud", "gcp", "--regions", "us-*"), "region names, not patterns"),
                          (("--cloud", "gcp", "--regions", "us central"), "malformed region pattern")):
        bad = run_cli("catalog", "refresh", *args)
        assert bad.exit_code == 2 and message in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
