"""Failover on GCP: zone -> zone -> next region -> next offer, on ZONE_RESOURCE_POOL_EXHAUSTED and QUOTA_EXCEEDED.

The loop is provider-agnostic (gpuplan.launching.failover); these tests drive it with the real GCP provider and the real
google clients against the fake Compute API, with capacity and quota errors injected per zone.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from gpuplan.launching import failover
from gpuplan.providers.base import AuthError, InstanceState, LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider

from support.fakes.gce_server import RunningFake
from support.placements import expand_zones

RUN = "r-f0f0f0f0f0"


@pytest.fixture
def provider(gce: RunningFake) -> GcpProvider:
    return GcpProvider(retry_initial=0.01, retry_timeout=5)


def request() -> LaunchRequest:
    return LaunchRequest(run_id=RUN, name="ft", command="true", run_dir="/tmp/ft", gpu="T4", gpus_per_node=1,
                         instance_type="n1-standard-8", boot_script="#!/bin/sh\ntrue\n")


def placements(provider: GcpProvider, *offers: tuple[str, str, str]) -> list:
    """Offers (region, machine type, price) expanded to one placement per zone, in the provider's zone order."""
    base = [failover.Placement(provider="gcp", region=region, instance_type=machine, price_per_hour=Decimal(price))
            for region, machine, price in offers]
    return expand_zones(base, lambda p: failover.provider_zones(provider, p.region))


def test_next_zone_then_next_region(provider: GcpProvider, gce: RunningFake) -> None:
    for zone in ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"):
        gce.state.fail_insert(zone, "ZONE_RESOURCE_POOL_EXHAUSTED", times=None)
    gce.state.fail_insert("us-east1-b", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS", times=None)
    seen: list = []
    result = failover.launch_with_failover(
        request(), placements(provider, ("us-central1", "n1-standard-8", "0.73"), ("us-east1", "n1-standard-8",
                                                                                  "0.75")),
        {"gcp": provider}, on_attempt=seen.append)
    [inst] = result.instances
    assert (inst.zone, inst.state) == ("us-east1-c", InstanceState.RUNNING)
    assert [(a.placement.zone, a.outcome, a.code) for a in seen] == [
        ("us-central1-a", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-central1-b", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-central1-c", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-central1-f", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED"),
        ("us-east1-b", "capacity", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"),
        ("us-east1-c", "launched", None),
    ]
    assert result.request.price_per_hour == Decimal("0.75")
    assert len(gce.state.live()) == 1  # the failed zones left nothing behind


def test_quota_skips_the_rest_of_the_region_then_the_next_offer(provider: GcpProvider, gce: RunningFake) -> None:
    gce.state.fail_insert("us-central1-a", "QUOTA_EXCEEDED", "Quota 'NVIDIA_T4_GPUS' exceeded. Limit: 0.0 in "
                          "region us-central1.")
    result = failover.launch_with_failover(
        request(), placements(provider, ("us-central1", "n1-standard-8", "0.73"), ("europe-west4", "g2-standard-8",
                                                                                  "0.85")),
        {"gcp": provider})
    outcomes = [(a.placement.zone, a.outcome) for a in result.attempts]
    assert outcomes[0] == ("us-central1-a", "quota")
    assert {o for z, o in outcomes[1:4]} == {"skipped"}  # the other us-central1 zones share the regional quota
    assert outcomes[-1] == ("europe-west4-a", "launched")
    [inst] = result.instances
    assert (inst.instance_type, inst.gpu) == ("g2-standard-8", "L4")
    assert gce.state.count_calls("POST", "/instances") == 2


def test_gpu_not_offered_in_a_zone_moves_on_without_an_insert(provider: GcpProvider, gce: RunningFake) -> None:
    req = LaunchRequest(run_id=RUN, name="ft", command="true", run_dir="/tmp/ft", gpu="V100", gpus_per_node=1,
                        instance_type="n1-standard-8", boot_script="")
    result = failover.launch_with_failover(req, placements(provider, ("us-east1", "n1-standard-8", "2.48")),
                                           {"gcp": provider})
    assert [(a.placement.zone, a.code or a.outcome) for a in result.attempts] == [
        ("us-east1-b", "NOT_OFFERED_IN_ZONE"), ("us-east1-c", "launched")]
    assert gce.state.count_calls("POST", "/instances") == 1


def test_exhausted_everywhere_reports_every_attempt(provider: GcpProvider, gce: RunningFake) -> None:
    for zone in ("us-west1-a", "us-west1-b"):
        gce.state.fail_insert(zone, times=None)
    with pytest.raises(failover.FailoverExhausted) as info:
        failover.launch_with_failover(request(), placements(provider, ("us-west1", "n1-standard-8", "0.73")),
                                      {"gcp": provider})
    table = info.value.detail
    assert "us-west1-a" in table and "us-west1-b" in table and "ZONE_RESOURCE_POOL_EXHAUSTED" in table
    assert gce.state.live() == []


def test_auth_error_stops_at_once(provider: GcpProvider, gce: RunningFake) -> None:
    gce.state.fail_http("us-central1-a", 403, "forbidden", "Required 'compute.instances.create' permission")
    with pytest.raises(AuthError):
        failover.launch_with_failover(request(), placements(provider, ("us-central1", "n1-standard-8", "0.73")),
                                      {"gcp": provider})
    assert gce.state.count_calls("POST", "/instances") == 1


def test_a_run_already_launched_is_returned_not_relaunched(provider: GcpProvider, gce: RunningFake) -> None:
    first = provider.launch(LaunchRequest(**{**request().__dict__, "zones": ("us-central1-c",)}))
    result = failover.launch_with_failover(request(), placements(provider, ("us-east1", "n1-standard-8", "0.75")),
                                           {"gcp": provider})
    assert [a.outcome for a in result.attempts] == ["existing"]
    assert [i.instance_id for i in result.instances] == [i.instance_id for i in first]
    assert gce.state.count_calls("POST", "/instances") == 1


# ---- issue 32 item 4: GCE's quota and error reasons by scope ------------------------------------------------------


def test_the_project_wide_gpu_quota_ends_gcp_at_once(provider: GcpProvider, gce: RunningFake) -> None:
    """GPUS_ALL_REGIONS is 0 on a new project (strict layer rule): one refusal, then no other GCP placement is tried,
    and the error names the quota and the console page that raises it."""
    gce.strict.gpus_all_regions = 0
    with pytest.raises(failover.FailoverExhausted) as info:
        failover.launch_with_failover(
            request(), placements(provider, ("us-central1", "n1-standard-8", "0.73"), ("europe-west4", "g2-standard-8",
                                                                                      "0.85")), {"gcp": provider})
    attempts = info.value.attempts
    assert [a.outcome for a in attempts][:1] == ["quota"] and {a.outcome for a in attempts[1:]} == {"skipped"}
    assert gce.strict.refused == ["gpus_all_regions"]  # one insert asked; the layer refused it before the fake
    assert "GPUS_ALL_REGIONS" in info.value.detail
    assert "https://console.cloud.google.com/iam-admin/quotas?project=" in str(attempts[0].message)


@pytest.mark.parametrize(("code", "outcome", "blocked"), [
    ("ZONE_RESOURCE_POOL_EXHAUSTED", "capacity", "zone us-central1-a, type n1-standard-8"),
    ("RESOURCE_NOT_READY", "blocked", "zone us-central1-a"),  # the zone, any type
    ("RESOURCE_OPERATION_RATE_EXCEEDED", "blocked", "zone us-central1-a"),
    ("UNSUPPORTED_OPERATION", "blocked", "zone us-central1-a, type n1-standard-8"),  # not a stockout
])
def test_zone_level_reasons_move_to_the_next_zone(provider: GcpProvider, gce: RunningFake, code: str, outcome: str,
                                                  blocked: str) -> None:
    gce.state.fail_insert("us-central1-a", code)
    result = failover.launch_with_failover(request(), placements(provider, ("us-central1", "n1-standard-8", "0.73")),
                                           {"gcp": provider})
    first, second = result.attempts[:2]
    assert (first.placement.zone, first.outcome, first.code) == ("us-central1-a", outcome, code)
    assert (first.blocked or "").startswith(blocked)
    assert (second.placement.zone, second.outcome) == ("us-central1-b", "launched")
