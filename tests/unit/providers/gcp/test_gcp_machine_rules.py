"""gpuplan never sends GCE what its documented rules refuse (the strict layer, tests/support/strict_gce.py, is on):
labels, a boot image family that does not exist, a Persistent Disk boot disk on A4 / A3 Ultra, an on-demand
Spot/Flex-only A3 High size. Each refusal comes before any insert, most before anything is recorded.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuplan.catalog.catalog import Catalog
from gpuplan.catalog.gcp_markets import sold_markets, sold_on_demand
from gpuplan.errors import UserError
from gpuplan.launching.placements import ranked_choices
from gpuplan.providers.base import CapacityError, LaunchRequest, ProviderError
from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.rules import boot_disk_type_for, image_family

from support.fakes.gce_server import RunningFake

RUN = "r-0a1b2c3d4e"


@pytest.fixture
def provider(gce: RunningFake) -> GcpProvider:
    return GcpProvider(retry_initial=0.01, retry_timeout=5)


def req(**kw: object) -> LaunchRequest:
    base: dict[str, object] = dict(run_id=RUN, name="tiny-gpt", command="python train.py", run_dir="/tmp/run",
                                   instance_type="a3-highgpu-8g", gpu="H100", gpus_per_node=8,
                                   zones=("us-central1-c",), boot_script="#!/bin/bash\necho hi\n",
                                   price_per_hour=Decimal("10"))
    base.update(kw)
    return LaunchRequest(**base)  # type: ignore[arg-type]


def inserts(gce: RunningFake) -> int:
    return gce.state.count_calls("POST", "/instances")


def family_lookups(gce: RunningFake) -> int:
    return sum(1 for m, p, _ in gce.state.calls if m == "GET" and "/global/images/family/" in p)


# ---- labels ------------------------------------------------------------------------------------------------------


def test_bad_spec_labels_are_refused_before_anything(provider: GcpProvider, gce: RunningFake) -> None:
    with pytest.raises(UserError, match=r"label Team='nlp' is not a valid GCP label: keys start with a lowercase"):
        provider.check_launch(req(labels={"Team": "nlp"}))
    with pytest.raises(UserError, match=r"59 labels; GCP allows 64 per VM"):
        provider.check_launch(req(labels={f"k{i}": "v" for i in range(59)}))
    with pytest.raises(ProviderError, match="not a valid GCP label") as caught:  # launch never sends it either
        provider.launch(req(labels={"team": "NLP Group"}))
    assert caught.value.code == "InvalidLabel"
    assert inserts(gce) == 0 and gce.strict.refused == []


def test_the_most_labels_a_spec_may_have_reach_gce_as_64(provider: GcpProvider, gce: RunningFake) -> None:
    labels = {f"team-{i}": "x" for i in range(57)} | {"équipe": "nlp"}  # 58: international characters are fine
    provider.check_launch(req(labels=labels))
    provider.launch(req(labels=labels, spot=True, project="research"))
    [vm] = gce.state.live()
    assert len(vm["labels"]) == 63  # 58 + run id, name, created-by, project, node rank (no secrets marker here)
    assert gce.strict.refused == []


# ---- boot image family -------------------------------------------------------------------------------------------


def test_a_missing_image_family_is_the_users_error_named_once(gce: RunningFake) -> None:
    provider = GcpProvider(image_family="pytorch-0-1-retired", retry_initial=0.01, retry_timeout=5)
    with pytest.raises(UserError) as caught:
        provider.check_launch(req())
    assert str(caught.value).startswith("boot image family 'pytorch-0-1-retired' does not exist in image project "
                                        "'deeplearning-platform-release' (images.getFromFamily: 404)")
    assert "\n" not in str(caught.value)
    with pytest.raises(ProviderError) as launch_caught:  # launch itself stops before any insert, in any zone
        provider.launch(req())
    assert launch_caught.value.code == "IMAGE_FAMILY_NOT_FOUND" and not isinstance(launch_caught.value, CapacityError)
    assert inserts(gce) == 0


def test_an_existing_family_is_asked_once_per_provider(provider: GcpProvider, gce: RunningFake) -> None:
    provider.check_launch(req())
    provider.check_launch(req())
    provider.launch(req(spot=True))
    assert family_lookups(gce) == 1


def test_without_credentials_the_family_is_noted_unchecked_not_refused(gce: RunningFake,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """A dry run on a laptop with no Google credentials still plans: the check says what it could not check,
    and the launch itself stops at its first call with the credentials error."""
    from gpuplan.providers.base import AuthError

    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)

    def no_credentials(*_: object, **__: object) -> object:
        raise AuthError("Google Cloud credentials not found", code="NoCredentials")

    monkeypatch.setattr(provider, "client", no_credentials)
    checked = provider.check_launch(req())
    assert checked.notes == ("boot image family not checked: Google Cloud credentials not found",)
    with pytest.raises(UserError):  # bad labels are still refused: they need no cloud call
        provider.check_launch(req(labels={"Team": "x"}))


def test_an_explicit_image_is_left_to_gce() -> None:
    assert image_family("projects/p/global/images/my-image-v1") is None
    assert image_family("https://www.googleapis.com/compute/v1/projects/p/global/images/family/f") == ("p", "f")


# ---- A4 / A3 Ultra boot disks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("machine", "gpu"), [("a4-highgpu-8g", "B200"), ("a3-ultragpu-8g", "H200")])
def test_hyperdisk_only_series_boot_from_hyperdisk(provider: GcpProvider, gce: RunningFake, machine: str,
                                                   gpu: str) -> None:
    [inst] = provider.launch(req(instance_type=machine, gpu=gpu, spot=True))
    [vm] = gce.state.live()
    assert vm["disks"][0]["initializeParams"]["diskType"].endswith("/diskTypes/hyperdisk-balanced")
    assert inst.instance_type == machine and gce.strict.refused == []


def test_boot_disk_type_per_series() -> None:
    assert boot_disk_type_for("a4-highgpu-8g", "pd-balanced") == "hyperdisk-balanced"
    assert boot_disk_type_for("a4-highgpu-8g", "pd-ssd") == "hyperdisk-balanced"
    assert boot_disk_type_for("a3-highgpu-8g", "pd-balanced") == "pd-balanced"
    assert boot_disk_type_for("n1-standard-8", "pd-ssd") == "pd-ssd"


# ---- Spot / Flex-start only sizes --------------------------------------------------------------------------------


@pytest.mark.parametrize("machine", ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"])
def test_on_demand_spot_only_sizes_are_skipped_without_asking_gce(provider: GcpProvider, gce: RunningFake,
                                                                  machine: str) -> None:
    count = int(machine[-2])
    with pytest.raises(CapacityError) as caught:  # failover: this placement is impossible, try the next
        provider.launch(req(instance_type=machine, gpus_per_node=count, spot=False))
    assert caught.value.code == "NOT_OFFERED_ON_DEMAND" and "Spot or Flex-start only" in str(caught.value)
    assert inserts(gce) == 0
    [inst] = provider.launch(req(instance_type=machine, gpus_per_node=count, spot=True))
    assert inst.spot and gce.strict.refused == []


def test_the_catalog_never_ranks_them_on_demand() -> None:
    assert not sold_on_demand("a3-highgpu-1g") and sold_on_demand("a3-highgpu-8g")
    on_demand = ranked_choices("gcp", "H100", 1, spot=False)
    assert not any(c.instance_type in ("a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g") for c in on_demand)
    spot = ranked_choices("gcp", "H100", 1, spot=True)
    assert spot and spot[0].instance_type == "a3-highgpu-1g"  # the shipped snapshot has spot prices for them
    offers = [o for o in Catalog.load(None, ("gcp",)).offers if o.instance_type == "a3-highgpu-1g"]
    assert offers and all(o.price_per_hour is None and o.spot_price_per_hour for o in offers)
    eight = [o for o in Catalog.load(None, ("gcp",)).offers if o.instance_type == "a3-highgpu-8g"]
    assert eight and all(o.price_per_hour for o in eight)
    assert sold_markets(eight[0]) is eight[0]


def test_failover_moves_past_an_on_demand_spot_only_placement(provider: GcpProvider, gce: RunningFake) -> None:
    from gpuplan.launching.failover import Placement, launch_with_failover

    placements = [Placement("gcp", "us-central1", "us-central1-c", "a3-highgpu-1g", Decimal("5.38"), False),
                  Placement("gcp", "us-central1", "us-central1-c", "a3-highgpu-8g", Decimal("88"), False)]
    result = launch_with_failover(req(instance_type="a3-highgpu-1g", gpus_per_node=1), placements,
                                  {"gcp": provider})
    assert [(a.outcome, a.code) for a in result.attempts] == [("capacity", "NOT_OFFERED_ON_DEMAND"),
                                                               ("launched", None)]
    [vm] = gce.state.live()
    assert vm["machineType"].endswith("/a3-highgpu-8g") and vm["scheduling"]["provisioningModel"] == "STANDARD"
    assert inserts(gce) == 1 and gce.strict.refused == []
