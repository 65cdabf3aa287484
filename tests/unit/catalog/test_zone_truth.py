"""Zone truth in the catalog: zone types from the id form, Local Zones out of ranking unless asked, GB as vendors
state them, and one GPU name resolver (gpuplan.catalog.zones, gpu_memory, gpu_names)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuplan.catalog import Catalog
from gpuplan.catalog.gpu_memory import to_gb, vendor_gpu_memory_gb
from gpuplan.catalog.gpu_names import not_rented_message, rented, resolve_gpu_name, resolve_gpus
from gpuplan.catalog.zones import aws_zone_type, zone_type
from gpuplan.errors import UserError


@pytest.mark.parametrize(("zone", "kind"), [
    ("use1-az1", "availability-zone"), ("apse3-az1", "availability-zone"), ("us-east-1a", "availability-zone"),
    ("us-gov-west-1b", "availability-zone"),
    ("use1-atl2-az1", "local-zone"), ("usw2-lax1-az2", "local-zone"), ("us-east-1-atl-2a", "local-zone"),
    ("use1-wl1-bos-wlz1", "wavelength-zone"), ("us-east-1-wl1-bos-wlz-1", "wavelength-zone"),
])
def test_zone_type_follows_the_documented_id_forms(zone: str, kind: str) -> None:
    assert aws_zone_type(zone) == kind
    assert zone_type("us-central1-a") == "availability-zone" and zone_type(None) == "availability-zone"


def test_every_shipped_zone_is_typed_and_the_local_zones_are_the_ones_named_so() -> None:
    offers = Catalog.load(None, ("aws",)).offers
    local = {o.zone for o in offers if o.zone_type == "local-zone"}
    assert local == {"use1-atl2-az1", "usw2-lax1-az1", "usw2-lax1-az2"}
    assert all(o.zone_type == "availability-zone" for o in offers if o.zone not in local)


def test_local_zones_are_left_out_unless_asked() -> None:
    catalog = Catalog.load(None, ("aws",))
    h100 = {"gpus": {"H100"}, "spot": True, "regions": ["us-east-1"], "min_gpus": 8}
    standard = catalog.select(**h100)  # type: ignore[arg-type]
    assert standard and all(o.zone_type == "availability-zone" for o in standard)
    cheapest = min(standard, key=lambda o: o.spot_price_per_hour or 0)
    assert (cheapest.zone, cheapest.spot_price_per_hour) == ("use1-az6", Decimal("17.6289"))
    local = catalog.select(**h100, zones="local")  # type: ignore[arg-type]
    assert [(o.zone, o.spot_price_per_hour) for o in local] == [("use1-atl2-az1", Decimal("10.2397"))]
    assert len(catalog.select(**h100, zones="all")) == len(standard) + 1  # type: ignore[arg-type]


def test_a_zone_keeps_its_own_spot_price() -> None:
    """use1-az1 is dearer than use1-az6 in the same snapshot: no zone inherits the region's cheapest price."""
    offers = {o.zone: o.spot_price_per_hour for o in Catalog.load(None, ("aws",)).offers
              if o.instance_type == "p5.48xlarge" and o.region == "us-east-1"}
    assert offers["use1-az1"] == Decimal("55.04") and offers["use1-az6"] == Decimal("17.6289")


@pytest.mark.parametrize(("gpu", "gb"), [("L4", 24), ("L40S", 48), ("A10G", 24), ("H100", 80), ("T4", 16)])
def test_gpu_memory_is_in_gb_as_the_vendor_states_it(gpu: str, gb: float) -> None:
    gbs = {o.gpu_memory_gb for o in Catalog.load().offers if o.gpu == gpu and o.gpu_count >= 1}
    assert gbs == {gb}


def test_memory_units_convert_in_one_place() -> None:
    assert vendor_gpu_memory_gb("L4", 1, 22888, "MiB") == 24  # AWS's usable MiB does not decide
    assert vendor_gpu_memory_gb("L4", 0.25) == 6  # g6f's quarter L4
    assert vendor_gpu_memory_gb("NoSuchGpu", 1, 22888, "MiB") == 24.0  # no table row: the cloud's figure in GB
    assert to_gb(44.7, "GiB") == 48.0 and to_gb(16, "GB") == 16
    with pytest.raises(ValueError, match="unknown memory unit"):
        to_gb(1, "bits")


@pytest.mark.parametrize(("text", "name"), [
    ("A100", "A100-40GB"), ("a100-80gb", "A100-80GB"), ("A100 80GB", "A100-80GB"), ("V100", "V100-16GB"),
    ("h100 sxm", "H100"), ("H100-MEGA", "H100"), ("nvidia-tesla-t4", "T4"), ("T4g", "T4G"), ("RTX 4090", "RTX4090"),
])
def test_one_resolver_for_every_command(text: str, name: str) -> None:
    assert resolve_gpu_name(text) == name


def test_known_but_not_rented_is_not_unknown() -> None:
    assert resolve_gpus("RTX 4090") == {"RTX4090"} and not rented("RTX4090") and rented("A100-40GB")
    assert "no cloud in the catalog (aws, gcp, azure) rents RTX4090" in not_rented_message({"RTX4090"},
                                                                                           ("aws", "gcp", "azure"))
    with pytest.raises(UserError, match="unknown GPU 'H10'; did you mean H100"):
        resolve_gpus("H10")
    # Catalog.select takes any spelling through the same resolver (the launch passes the spec's `A100`).
    assert {o.gpu for o in Catalog.load(None, ("gcp",)).select(gpus=["A100"])} == {"A100-40GB"}
    assert Catalog.load(None, ("aws",)).select(gpus=["RTX 4090"]) == []


def test_a_refresh_stored_in_gib_reads_as_vendor_gb(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import dataclasses
    import datetime as dt

    from gpuplan.catalog.stored import save_snapshot
    from gpuplan.store.db import Store

    g6 = next(o for o in Catalog.load(None, ("aws",)).offers if o.instance_type == "g6.xlarge")
    old = dataclasses.replace(g6, gpu_memory_gb=22.35)  # what refreshes stored before GB-as-stated
    url = f"sqlite:///{tmp_path / 'old.db'}"
    store = Store.open(url)
    try:
        save_snapshot(store, "aws", "aws: old refresh", [old], dt.datetime.now(dt.timezone.utc))
    finally:
        store.close()
    [offer] = Catalog.load(url, ("aws",)).offers
    assert offer.gpu_memory_gb == 24


def test_every_spelling_of_the_gpu_table_resolves_the_same_in_every_command() -> None:
    """`estimate` asks the GPU table directly; `prices`, `plan`, a spec and a launch ask resolve_gpu_name: the same
    answer for every name and alias of the table, so no spelling works in one command and not another."""
    from gpuplan.hardware.gpus import all_gpus, resolve_gpu

    for spec in all_gpus():
        for name in (spec.name, *spec.aliases, spec.name.lower()):
            assert resolve_gpu_name(name) == resolve_gpu(name).name == spec.name
