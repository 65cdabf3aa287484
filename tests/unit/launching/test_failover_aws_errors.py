"""Failover on AWS for every kind of refusal in the first zone or region: what is blocked, what is tried next.

Errors are EC2's XML error bodies injected on the provider's launch client (moto raises none of them); every
RunInstances that does reach moto is first checked against EC2's zone-name and ClientToken rules
(support.run_instances_check), so a placement that "works" only because moto is lenient fails here.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpuplan.launching.failover import Attempt, FailoverExhausted, Placement, launch_with_failover
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import AuthError, LaunchRequest, ProviderError

from support.awsmoto import Clients, Injector, inject, serve
from support.run_instances_check import RunInstancesCheck, attach

RUN = "r-fa110ver02"


def request(**overrides: Any) -> LaunchRequest:
    values: dict[str, Any] = dict(run_id=RUN, name="fo", command="true", run_dir="/tmp/fo",
                                  instance_type="p4d.24xlarge", region="us-east-1", gpu="A100-40GB",
                                  gpus_per_node=8, price_per_hour=Decimal("32.77"), boot_script="#!/bin/sh\n")
    values.update(overrides)
    return LaunchRequest(**values)


@pytest.fixture
def fast(aws: AwsProvider, moto_env: dict[str, str]) -> AwsProvider:
    aws.launch_retry_delay = 0.0
    return aws


def checked(aws: AwsProvider, *regions: str) -> dict[str, RunInstancesCheck]:
    return {r: attach(aws.launch_client(r)) for r in regions}


def offers(*items: tuple[str, str]) -> list[Placement]:
    """(region, instance type) placements without a zone: failover lists the zones when it reaches them."""
    return [Placement("aws", region, None, itype, Decimal("10"), False) for region, itype in items]


def images(aws: AwsProvider, moto_env: dict[str, str]) -> Any:
    """prepare(): each region's own test AMI (AMI ids are regional)."""
    def prepare(req: LaunchRequest) -> LaunchRequest:
        return LaunchRequest(**{**req.__dict__, "options": {**req.options, "image_id": moto_env[req.region or ""]}})
    return prepare


CASES = [
    # code, message, HTTP status, outcome, blocked scope, where the next attempt goes
    ("InsufficientInstanceCapacity", "We currently do not have sufficient p4d.24xlarge capacity", 500, "capacity",
     "zone us-east-1a, type p4d.24xlarge, on-demand", ("us-east-1b", "p4d.24xlarge")),
    ("Unsupported", "The requested configuration is currently not supported.", 400, "capacity",
     "zone us-east-1a, type p4d.24xlarge, on-demand", ("us-east-1b", "p4d.24xlarge")),
    ("InvalidParameterValue", "Invalid availability zone: [us-east-1a]", 400, "blocked", "zone us-east-1a",
     ("us-east-1b", "p4d.24xlarge")),
    ("InvalidParameterValue", "The architecture 'arm64' of the specified instance type does not match", 400,
     "blocked", "region us-east-1, type p4d.24xlarge", ("us-east-1a", "p5.48xlarge")),
    ("InvalidParameterCombination", "Network interfaces and an instance-level security groups", 400, "blocked",
     "region us-east-1, type p4d.24xlarge", ("us-east-1a", "p5.48xlarge")),
    ("InvalidAMIID.NotFound", "The image id '[ami-1]' does not exist", 400, "blocked", "region us-east-1",
     ("us-west-2a", "p4d.24xlarge")),
    ("InvalidAMIID.Malformed", "Invalid id: ami-x", 400, "blocked", "region us-east-1", ("us-west-2a", "p4d.24xlarge")),
    ("OptInRequired", "You are not subscribed to this service.", 401, "blocked", "region us-east-1",
     ("us-west-2a", "p4d.24xlarge")),
    ("VPCIdNotSpecified", "No default VPC for this user", 400, "blocked", "region us-east-1",
     ("us-west-2a", "p4d.24xlarge")),
    ("IdempotentInstanceTerminated", "The client token was used by a terminated instance", 400, "blocked",
     "zone us-east-1a, type p4d.24xlarge", ("us-east-1b", "p4d.24xlarge")),
    ("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit", 400, "quota",
     "region us-east-1, family P, on-demand", ("us-east-1a", "g5.48xlarge")),
    ("InstanceLimitExceeded", "Your quota allows for 0 more running instance(s).", 400, "quota",
     "region us-east-1, family P, on-demand", ("us-east-1a", "g5.48xlarge")),
]


@pytest.mark.parametrize(("code", "message", "status", "outcome", "blocked", "next_try"), CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_an_error_in_the_first_zone_blocks_its_scope_and_the_next_placement_is_tried(
        fast: AwsProvider, moto_env: dict[str, str], code: str, message: str, status: int, outcome: str,
        blocked: str, next_try: tuple[str, str]) -> None:
    checks = checked(fast, "us-east-1", "us-west-2")
    refused = inject(fast.launch_client("us-east-1"), "RunInstances",
                     Injector(code, message, status=status, when=lambda p: (
                         p["Placement.AvailabilityZone"], p["InstanceType"]) == ("us-east-1a", "p4d.24xlarge")),
                     server=False)
    seen: list[Attempt] = []
    result = launch_with_failover(
        request(), offers(("us-east-1", "p4d.24xlarge"), ("us-east-1", "p5.48xlarge"), ("us-east-1", "g5.48xlarge"),
                          ("us-west-2", "p4d.24xlarge")),
        {"aws": fast}, on_attempt=seen.append, prepare=images(fast, moto_env))
    first = seen[0]
    assert (first.placement.zone, first.outcome, first.code, first.blocked) == ("us-east-1a", outcome, code, blocked)
    assert message in first.message
    tried = [a for a in seen[1:] if a.outcome != "skipped"]
    assert (tried[0].placement.zone, tried[0].placement.instance_type) == next_try
    assert seen[-1].outcome == "launched" and result.instances[0].zone == next_try[0]
    assert all(a.blocked for a in seen if a.outcome == "skipped")  # each skip says what blocked it
    # One call per refusal: botocore retries nothing on the launch client (a 500 capacity error included).
    assert refused.failed == 1 and len(checks["us-east-1"].calls) == len(refused.calls)


def test_a_quota_blocks_the_whole_family_in_that_region_and_market(fast: AwsProvider,
                                                                   moto_env: dict[str, str]) -> None:
    checked(fast, "us-east-1")
    inject(fast.launch_client("us-east-1"), "RunInstances",
           Injector("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit",
                    when=lambda p: p["InstanceType"].startswith("p")), server=False)
    result = launch_with_failover(
        request(), offers(("us-east-1", "p4d.24xlarge"), ("us-east-1", "p5.48xlarge"), ("us-east-1", "g5.48xlarge")),
        {"aws": fast}, prepare=images(fast, moto_env))
    outcomes = [(a.placement.zone, a.placement.instance_type, a.outcome) for a in result.attempts]
    assert outcomes[0] == ("us-east-1a", "p4d.24xlarge", "quota")
    # Every other zone of p4d, and p5 (the same P quota), are skipped without a call (p5's zones not even listed).
    assert {o for _, t, o in outcomes[1:-1] if t.startswith("p")} == {"skipped"}
    assert (None, "p5.48xlarge", "skipped") in outcomes
    assert outcomes[-1] == ("us-east-1a", "g5.48xlarge", "launched")


def test_a_missing_default_subnet_blocks_that_zone(fast: AwsProvider, moto_env: dict[str, str],
                                                   aws_clients: Clients) -> None:
    ec2 = aws_clients("ec2")
    [subnet] = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["us-east-1a"]},
                                             {"Name": "default-for-az", "Values": ["true"]}])["Subnets"]
    ec2.delete_subnet(SubnetId=subnet["SubnetId"])
    checked(fast, "us-east-1")
    result = launch_with_failover(request(), offers(("us-east-1", "p4d.24xlarge")), {"aws": fast})
    assert [(a.placement.zone, a.outcome, a.code) for a in result.attempts] == [
        ("us-east-1a", "blocked", "NoSubnet"), ("us-east-1b", "launched", None)]


def test_a_disabled_region_is_blocked_and_the_next_region_tried(fast: AwsProvider, moto_env: dict[str, str]) -> None:
    """moto lets a disabled region answer: the account's DescribeRegions and the region's AuthFailure are served."""
    serve(fast.client("ec2", "us-east-1", retries=2), "DescribeRegions", {"Regions": [
        {"RegionName": "us-east-1", "OptInStatus": "opt-in-not-required"},
        {"RegionName": "us-west-2", "OptInStatus": "opt-in-not-required"},
        {"RegionName": "ap-east-1", "OptInStatus": "not-opted-in"}]}, [])
    refusals = [inject(fast.client("ec2", "ap-east-1", **kw), op,
                       Injector("AuthFailure", "AWS was not able to validate the provided access credentials",
                                status=401), server=False)
                for op, kw in (("DescribeAvailabilityZones", {}), ("DescribeInstances", {}),
                               ("RunInstances", {"retries": 1}))]
    checked(fast, "us-west-2")
    seen: list[Attempt] = []
    result = launch_with_failover(request(), offers(("ap-east-1", "p4d.24xlarge"), ("us-west-2", "p4d.24xlarge")),
                                  {"aws": fast}, on_attempt=seen.append, prepare=images(fast, moto_env))
    assert [(a.placement.region, a.outcome, a.code, a.blocked) for a in seen] == [
        ("ap-east-1", "blocked", "AuthFailure", "region ap-east-1"), ("us-west-2", "launched", None, None)]
    assert result.instances[0].region == "us-west-2"
    assert refusals[1].calls == []  # the already-running look-up never asked the disabled region


def test_bad_credentials_end_the_launch_at_the_first_default_region(fast: AwsProvider) -> None:
    serve(fast.client("ec2", "us-east-1", retries=2), "DescribeRegions",
          {"Regions": [{"RegionName": "us-east-1", "OptInStatus": "opt-in-not-required"}]}, [])
    inject(fast.client("ec2", "us-east-1"), "DescribeInstances",
           Injector("AuthFailure", "AWS was not able to validate the provided access credentials", status=401),
           server=False)
    seen: list[Attempt] = []
    with pytest.raises(AuthError) as info:
        launch_with_failover(request(), offers(("us-east-1", "p4d.24xlarge"), ("us-west-2", "p4d.24xlarge")),
                             {"aws": fast}, on_attempt=seen.append)
    assert info.value.exit_code == 2
    assert [a.outcome for a in seen] == ["auth"]


def test_a_token_reused_with_other_parameters_stops_the_launch(fast: AwsProvider) -> None:
    inject(fast.launch_client("us-east-1"), "RunInstances",
           Injector("IdempotentParameterMismatch", "The client token has already been used"), server=False)
    seen: list[Attempt] = []
    with pytest.raises(ProviderError) as info:
        launch_with_failover(request(), offers(("us-east-1", "p4d.24xlarge")), {"aws": fast}, on_attempt=seen.append)
    assert type(info.value) is ProviderError and info.value.code == "IdempotentParameterMismatch"
    assert [a.outcome for a in seen] == ["error"]


def test_every_request_of_a_launch_has_its_own_token_and_a_zone_name(fast: AwsProvider,
                                                                      moto_env: dict[str, str]) -> None:
    check = checked(fast, "us-east-1")["us-east-1"]  # refuses a reused token with other parameters
    inject(fast.launch_client("us-east-1"), "RunInstances",
           Injector("InsufficientInstanceCapacity", when=lambda p: p["InstanceType"] == "p4d.24xlarge"),
           server=False)
    placements = [Placement("aws", "us-east-1", "use1-az4", "p4d.24xlarge", Decimal("32"), False),
                  *offers(("us-east-1", "p4d.24xlarge"), ("us-east-1", "g5.48xlarge"))]
    result = launch_with_failover(request(), placements, {"aws": fast})
    tokens = [c["ClientToken"] for c in check.calls]
    assert len(set(tokens)) == len(tokens) == 7  # 6 zones of p4d (the catalog's id first, as its name), one g5
    assert check.calls[0]["Placement.AvailabilityZone"] == "us-east-1d"  # moto's account: use1-az4 = us-east-1d
    assert [a.outcome for a in result.attempts].count("skipped") == 1  # us-east-1d again, by name: blocked
    assert result.attempts[-1].outcome == "launched"


def test_throttling_is_retried_with_the_same_token_and_capacity_is_not(fast: AwsProvider) -> None:
    check = checked(fast, "us-east-1")["us-east-1"]
    throttle = inject(fast.launch_client("us-east-1"), "RunInstances",
                      Injector("RequestLimitExceeded", "Request limit exceeded.", status=503,
                               when=lambda _: len(throttle.calls) <= 2), server=False)
    [inst] = fast.launch(request(zones=("us-east-1b",)))
    assert throttle.failed == 2 and len({c["ClientToken"] for c in check.calls}) == 1 and len(check.calls) == 3
    assert inst.zone == "us-east-1b"


def test_failover_gives_up_with_every_attempt_when_all_are_blocked(fast: AwsProvider) -> None:
    inject(fast.launch_client("us-east-1"), "RunInstances",
           Injector("InsufficientInstanceCapacity", status=500), server=False)
    with pytest.raises(FailoverExhausted) as info:
        launch_with_failover(request(), offers(("us-east-1", "p4d.24xlarge")), {"aws": fast})
    assert [a.outcome for a in info.value.attempts] == ["capacity"] * 6
    assert "6 placement(s) tried" in str(info.value)



def test_an_opt_in_region_refusing_the_look_up_is_blocked_and_the_rest_still_searched(
        fast: AwsProvider, moto_env: dict[str, str]) -> None:
    """An enabled opt-in region answers AuthFailure to version 1 STS tokens (repost.aws iam-validate-access-
    credentials): the already-running look-up blocks it instead of ending the launch or searching nothing."""
    serve(fast.client("ec2", "us-east-1", retries=2), "DescribeRegions", {"Regions": [
        {"RegionName": "us-east-1", "OptInStatus": "opt-in-not-required"},
        {"RegionName": "me-south-1", "OptInStatus": "opted-in"}]}, [])
    for op, kw in (("DescribeAvailabilityZones", {}), ("DescribeInstances", {}), ("RunInstances", {"retries": 1})):
        inject(fast.client("ec2", "me-south-1", **kw), op,
               Injector("AuthFailure", "AWS was not able to validate the provided access credentials", status=401),
               server=False)
    east = inject(fast.client("ec2", "us-east-1"), "DescribeInstances", Injector("unused", when=lambda _: False),
                  server=False)
    seen: list[Attempt] = []
    result = launch_with_failover(request(), offers(("me-south-1", "p4d.24xlarge"), ("us-east-1", "p4d.24xlarge")),
                                  {"aws": fast}, on_attempt=seen.append, prepare=images(fast, moto_env))
    assert [(a.placement.region, a.outcome, a.blocked) for a in seen] == [
        ("me-south-1", "blocked", "region me-south-1"), ("us-east-1", "launched", None)]
    assert len(east.calls) >= 1  # us-east-1 was searched for the run's machines
    assert result.instances[0].region == "us-east-1"


def test_an_on_demand_quota_leaves_the_same_family_on_spot_to_try(fast: AwsProvider, moto_env: dict[str, str]) -> None:
    """Spot has its own quotas per family ("All P Spot Instance Requests"): the on-demand P quota blocks only
    on-demand P."""
    inject(fast.launch_client("us-east-1"), "RunInstances",
           Injector("VcpuLimitExceeded", "You have requested more vCPU capacity than your current vCPU limit",
                    when=lambda p: "InstanceMarketOptions.MarketType" not in p), server=False)
    spot = Placement("aws", "us-east-1", None, "p5.48xlarge", Decimal("20"), True)
    result = launch_with_failover(request(), [*offers(("us-east-1", "p4d.24xlarge"), ("us-east-1", "p5.48xlarge")),
                                              spot], {"aws": fast})
    outcomes = [(a.placement.instance_type, a.placement.spot, a.outcome) for a in result.attempts]
    assert outcomes[0] == ("p4d.24xlarge", False, "quota")
    assert outcomes[1:] == [("p4d.24xlarge", False, "skipped")] * 5 + [  # p4d's other zones
        ("p5.48xlarge", False, "skipped"), ("p5.48xlarge", True, "launched")]
    assert result.instances[0].spot


def test_named_zones_are_the_only_zones_tried(fast: AwsProvider, moto_env: dict[str, str]) -> None:
    """`resources.zones: [use1-az4]` (an id): only that zone, sent by its name; a region with none of the named
    zones is blocked, never tried as a whole."""
    from gpuplan.launching.placements import zones_to_try

    check = checked(fast, "us-east-1")["us-east-1"]
    inject(fast.launch_client("us-east-1"), "RunInstances", Injector("InsufficientInstanceCapacity"), server=False)
    named = request(options={"zones": ["use1-az4"]})
    with pytest.raises(FailoverExhausted) as info:
        launch_with_failover(named, offers(("us-east-1", "p4d.24xlarge"), ("us-west-2", "p4d.24xlarge")),
                             {"aws": fast}, zones_of=zones_to_try(named))
    assert [(a.placement.where, a.outcome, a.code) for a in info.value.attempts] == [
        ("us-east-1d", "capacity", "InsufficientInstanceCapacity"), ("us-west-2", "blocked", "NoNamedZone")]
    assert [c["Placement.AvailabilityZone"] for c in check.calls] == ["us-east-1d"]
