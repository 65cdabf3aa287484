"""Azure GPU VM prices from the public Retail Prices API: recorded pages served on 127.0.0.1, followed by their
NextPageLink, parsed into Linux on-demand and spot prices (Windows, Low Priority and DevTest meters left out), and
turned into catalog offers with the sizes' GPUs from providers/azure/vm_sizes.py."""

from __future__ import annotations

import datetime as dt
import io
import json
import urllib.parse
from collections.abc import Iterator
from decimal import Decimal

import pytest

from gpuplan.providers.azure.prices import GPU_FILTER, VmPrice, fetch_vm_prices, gpu_filter
from gpuplan.providers.azure.pricing import offers_from_prices
from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.azure.vm_sizes import VM_SIZES

from support.fakes.azure_prices_server import PricesApi, serve_prices

NOW = dt.datetime(2026, 11, 27, tzinfo=dt.timezone.utc)


@pytest.fixture
def prices_api() -> Iterator[PricesApi]:
    with serve_prices() as api:
        yield api


def test_every_page_is_read_and_linux_on_demand_and_spot_are_kept(prices_api: PricesApi) -> None:
    said: list[str] = []
    prices = fetch_vm_prices(base=prices_api.url, progress=said.append)
    assert prices == [
        VmPrice("Standard_NC24ads_A100_v4", "westeurope", Decimal("4.043"), Decimal("1.2129")),
        VmPrice("Standard_NC40ads_H100_v5", "eastus", Decimal("6.98"), Decimal("2.094")),
        VmPrice("Standard_ND96asr_v4", "eastus", Decimal("27.197"), Decimal("8.1591")),
        VmPrice("Standard_NV12ads_A10_v5", "eastus", Decimal("0.908"), Decimal("0.227")),
        VmPrice("Standard_NV12s_v3", "eastus", Decimal("1.14"), None),
    ]
    first = urllib.parse.parse_qs(urllib.parse.urlsplit(prices_api.asked[0]).query)
    assert first["$filter"] == [GPU_FILTER] and first["api-version"] == ["2023-01-01-preview"]
    assert len(prices_api.asked) == 3
    assert said[0].startswith("azure: page 1 read") and said[-1].startswith("azure: page 3 read, 12 meters")


def test_regions_narrow_the_filter_and_bad_names_are_refused(prices_api: PricesApi) -> None:
    fetch_vm_prices(base=prices_api.url, regions=["eastus", "westeurope"])
    sent = urllib.parse.parse_qs(urllib.parse.urlsplit(prices_api.asked[0]).query)["$filter"][0]
    assert sent == f"{GPU_FILTER} and (armRegionName eq 'eastus' or armRegionName eq 'westeurope')"
    with pytest.raises(ValueError, match="not a region name"):
        gpu_filter(["eastus' or 1 eq 1 or 'x"])


def test_a_next_page_link_to_another_host_is_refused() -> None:
    def opener(url: str) -> io.BytesIO:
        return io.BytesIO(json.dumps({"Items": [], "NextPageLink": "https://elsewhere.example/p?$skip=100"}).encode())

    with pytest.raises(ValueError, match="leaves"):
        fetch_vm_prices(opener, base="http://127.0.0.1:9/api/retail/prices")


def test_offers_carry_the_sizes_gpus_per_vm_hour_and_name_what_was_left_out(prices_api: PricesApi) -> None:
    offers, notes = offers_from_prices(fetch_vm_prices(base=prices_api.url), NOW, "azure: test")
    by_type = {o.instance_type: o for o in offers}
    assert set(by_type) == {"Standard_NC24ads_A100_v4", "Standard_NC40ads_H100_v5", "Standard_ND96asr_v4",
                            "Standard_NV12ads_A10_v5"}
    nd = by_type["Standard_ND96asr_v4"]
    assert (nd.gpu, nd.gpu_count, nd.gpu_memory_gb, nd.vcpus, nd.memory_gb) == ("A100-40GB", 8, 40, 96, 900)
    assert nd.price_per_hour == Decimal("27.197") and nd.price_per_gpu() == Decimal("27.197") / 8  # per VM-hour
    nvl = by_type["Standard_NC40ads_H100_v5"]
    assert (nvl.gpu, nvl.gpu_memory_gb, nvl.spot_price_per_hour) == ("H100-NVL", 94, Decimal("2.094"))
    slice_ = by_type["Standard_NV12ads_A10_v5"]
    assert slice_.gpu == "A10" and slice_.gpu_count == pytest.approx(1 / 3) and slice_.gpu_memory_gb == 8
    assert all(o.cloud == "azure" and o.zone is None and o.fetched_at == NOW for o in offers)
    assert notes == ["azure: 1 N-series sizes left out (no GPU gpuplan plans for, or not in "
                     "providers/azure/vm_sizes.py): Standard_NV12s_v3"]


def test_the_provider_refreshes_without_credentials(prices_api: PricesApi, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET", "AZURE_SUBSCRIPTION_ID"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GPUPLAN_AZURE_PRICES_URL", prices_api.url)
    assert not AzureProvider.has_price_credentials() and AzureProvider.public_source_complete
    refreshed = AzureProvider().refresh_prices(["eastus"], NOW)
    assert refreshed.source == f"azure: Retail Prices API ({prices_api.url}, api-version 2023-01-01-preview)"
    assert {o.instance_type for o in refreshed.offers} >= {"Standard_ND96asr_v4"}


def test_every_size_names_a_gpu_of_the_table_and_the_catalog() -> None:
    from gpuplan.catalog.gpu_names import CANONICAL_GPUS
    from gpuplan.hardware.gpus import resolve_gpu

    for sku, size in VM_SIZES.items():
        assert sku.startswith("Standard_N") and size.gpu in CANONICAL_GPUS, sku
        assert resolve_gpu(size.gpu).name == size.gpu and size.gpus > 0 and size.vcpus > 0, sku
    # The GPUs the issue names are all covered.
    assert {s.gpu for s in VM_SIZES.values()} >= {"A100-40GB", "A100-80GB", "A100-PCIe", "H100", "H200", "MI300X",
                                                  "A10", "T4", "V100-16GB"}
