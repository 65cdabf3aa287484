"""Failover across zones, regions and offers, with EC2 capacity errors injected into moto through botocore hooks."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpuplan.launching.failover import (
    Attempt,
    FailoverExhausted,
    Placement,
    format_attempts,
    launch_with_failover,
    provider_zones,
)
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import TAG_RUN_ID, AuthError, LaunchRequest

from support.awsmoto import Clients, Injector, in_zone, inject
from support.placements import expand_zones


def request(**overrides: Any) -> LaunchRequest:
    values: dict[str, Any] = dict(run_id="r-fa11over01", name="fo", command="true", run_dir="/tmp/fo",
                                  instance_type="p4d.24xlarge", region="us-east-1", gpu="A100-40GB",
                                  gpus_per_node=8, price_per_hour=Decimal("32.77"), boot_script="#!/bin/sh\n")
    values.update(overrides)
    return LaunchRequest(**values)


def placements(aws: AwsProvider, *regions: str) -> list[Placement]:
    base = [Placement("aws", region, instance_type="p4d.24xlarge") for region in regions]
    return expand_zones(base, lambda p: provider_zones(aws, p.region))


def test_capacity_errors_move_to_the_next_zone(aws: AwsProvider) -> None:
    injector = inject(aws.launch_client("us-east-1"), "RunInstances",
                      Injector("InsufficientInstanceCapacity", "We currently do not have sufficient capacity",
                               when=in_zone("us-east-1a", "us-east-1b")), server=False)
    seen: list[Attempt] = []
    result = launch_with_failover(request(), placements(aws, "us-east-1"), {"aws": aws}, on_attempt=seen.append)
    assert [(a.placement.zone, a.outcome) for a in seen] == [
        ("us-east-1a", "capacity"), ("us-east-1b", "capacity"), ("us-east-1c", "launched")]
    assert seen[0].code == "InsufficientInstanceCapacity" and "sufficient capacity" in seen[0].message
    assert result.placement.zone == "us-east-1c" and result.instances[0].zone == "us-east-1c"
    assert result.attempts == seen and injector.failed == 2
    assert len(aws.list_tagged("r-fa11over01")) == 1


def test_a_full_region_fails_over_to_the_next_region(aws: AwsProvider) -> None:
    inject(aws.launch_client("us-east-1"), "RunInstances", Injector("InsufficientInstanceCapacity"), server=False)
    result = launch_with_failover(request(), placements(aws, "us-east-1", "us-west-2"), {"aws": aws})
    outcomes = [(a.placement.region, a.outcome) for a in result.attempts]
    assert outcomes == [("us-east-1", "capacity")] * 6 + [("us-west-2", "launched")]
    assert result.instances[0].region == "us-west-2" and result.instances[0].zone == "us-west-2a"
    assert [i.region for i in aws.list_tagged("r-fa11over01")] == ["us-west-2"]


def test_quota_skips_the_rest_of_the_region_and_the_next_offer_is_tried(aws: AwsProvider) -> None:
    inject(aws.launch_client("us-east-1"), "RunInstances",
           Injector("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit",
                    when=lambda params: params["InstanceType"] == "p4d.24xlarge"), server=False)
    offers = [Placement("aws", "us-east-1", "us-east-1a", "p4d.24xlarge", Decimal("32.77")),
              Placement("aws", "us-east-1", "us-east-1b", "p4d.24xlarge", Decimal("32.77")),
              Placement("aws", "us-east-1", "us-east-1a", "g5.48xlarge", Decimal("16.29"))]
    result = launch_with_failover(request(), offers, {"aws": aws})
    assert [a.outcome for a in result.attempts] == ["quota", "skipped", "launched"]
    assert result.instances[0].instance_type == "g5.48xlarge"
    assert result.request.instance_type == "g5.48xlarge" and result.request.price_per_hour == Decimal("16.29")


def test_auth_errors_stop_at_once(aws: AwsProvider) -> None:
    inject(aws.launch_client("us-east-1"), "RunInstances",
           Injector("UnauthorizedOperation", "You are not authorized to perform this operation."), server=False)
    seen: list[Attempt] = []
    with pytest.raises(AuthError):
        launch_with_failover(request(), placements(aws, "us-east-1"), {"aws": aws}, on_attempt=seen.append)
    assert [a.outcome for a in seen] == ["auth"]


def test_giving_up_carries_a_table_of_every_attempt(aws: AwsProvider) -> None:
    inject(aws.launch_client("us-east-1"), "RunInstances", Injector("InsufficientInstanceCapacity", "none left"),
           server=False)
    with pytest.raises(FailoverExhausted) as info:
        launch_with_failover(request(), placements(aws, "us-east-1")[:3], {"aws": aws})
    err = info.value
    assert [a.outcome for a in err.attempts] == ["capacity"] * 3
    assert "3 placement(s) tried" in str(err)
    lines = err.detail.splitlines()
    assert lines[0].split() == ["#", "provider", "where", "type", "outcome", "code", "blocks", "why"]
    assert "zone us-east-1a, type p4d.24xlarge" in lines[1]  # what the refusal ruled out
    assert "us-east-1a" in lines[1] and "InsufficientInstanceCapacity" in lines[1] and "none left" in lines[1]
    assert len(lines) == 4
    assert format_attempts(err.attempts) == err.detail


def test_machines_a_crashed_attempt_started_are_returned_not_doubled(aws: AwsProvider,
                                                                      aws_clients: Clients) -> None:
    [first] = aws.launch(request(region="us-east-1", zones=("us-east-1d",)))
    seen: list[Attempt] = []
    result = launch_with_failover(request(), placements(aws, "us-east-1"), {"aws": aws}, on_attempt=seen.append)
    assert [a.outcome for a in seen] == ["existing"]
    assert [i.instance_id for i in result.instances] == [first.instance_id]
    assert result.placement.zone == "us-east-1d"
    live = aws_clients("ec2").describe_instances(Filters=[
        {"Name": f"tag:{TAG_RUN_ID}", "Values": ["r-fa11over01"]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]}])
    assert sum(len(r["Instances"]) for r in live["Reservations"]) == 1


def test_zones_expand_in_order_and_keep_given_zones() -> None:
    given = [Placement("aws", "r1", "r1b"), Placement("aws", "r1"), Placement("aws", "r2"), Placement("x", None)]
    zones = {"r1": ["r1a", "r1b"], "r2": []}
    out = expand_zones(given, lambda p: zones.get(p.region or "", []))
    assert [(p.provider, p.region, p.zone) for p in out] == [
        ("aws", "r1", "r1b"), ("aws", "r1", "r1a"), ("aws", "r2", None), ("x", None, None)]
