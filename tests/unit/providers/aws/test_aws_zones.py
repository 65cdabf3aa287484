"""Zone ids vs names, Local Zones, opt-in regions, ClientTokens and labels: what the AWS provider sends to EC2.

moto is lenient exactly here (it answers from disabled regions, ignores ClientToken, keeps one fixed zone mapping),
so these tests check the parameters the provider sends (support.run_instances_check, on the launch client before
moto sees the call) and serve the account's own answers (an account-specific zone mapping, a Local Zone, a
disabled region) through botocore's hooks instead of relying on moto's.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpuplan.providers.aws.launch_call import client_token
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.aws.zones import instance_family, standard_zone
from gpuplan.providers.base import TAG_RUN_ID, AuthError, LaunchRequest, PlacementError, Scope

from support.awsmoto import Clients, Injector, create_instance_profile, inject, serve
from support.run_instances_check import attach

# This account's mapping (names are per account: az-ids.html): not moto's fixed one (us-east-1d = use1-az4 there),
# so a provider that sends the id, or guesses a name, fails.
ACCOUNT_ZONES = [("us-east-1a", "use1-az4", "availability-zone"), ("us-east-1b", "use1-az6", "availability-zone"),
                 ("us-east-1c", "use1-az1", "availability-zone"), ("us-east-1d", "use1-az2", "availability-zone"),
                 ("us-east-1-atl-2a", "use1-atl2-az1", "local-zone")]


def request(**overrides: Any) -> LaunchRequest:
    values: dict[str, Any] = dict(run_id="r-2one5zone1", name="zones", command="true", run_dir="/tmp/z",
                                  instance_type="p4d.24xlarge", region="us-east-1", gpu="A100-40GB",
                                  gpus_per_node=8, price_per_hour=Decimal("32.77"), boot_script="#!/bin/sh\n")
    values.update(overrides)
    return LaunchRequest(**values)


def serve_zones(aws: AwsProvider, region: str = "us-east-1", zones: list[tuple[str, str, str]] = ACCOUNT_ZONES
                ) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    serve(aws.client("ec2", region), "DescribeAvailabilityZones", {"AvailabilityZones": [
        {"ZoneName": n, "ZoneId": i, "ZoneType": t, "State": "available", "RegionName": region}
        for n, i, t in zones]}, calls)
    return calls


def serve_regions(aws: AwsProvider, status: dict[str, str]) -> list[dict[str, Any]]:
    calls: list[dict[str, Any]] = []
    serve(aws.client("ec2", aws.region, retries=2), "DescribeRegions", {"Regions": [
        {"RegionName": r, "Endpoint": f"ec2.{r}.amazonaws.com", "OptInStatus": s} for r, s in status.items()]},
        calls)
    return calls


def test_a_catalog_zone_id_is_sent_as_this_accounts_zone_name(aws: AwsProvider) -> None:
    serve_zones(aws)
    check = attach(aws.launch_client("us-east-1"),
                   zone_names=frozenset(n for n, _, _ in ACCOUNT_ZONES))
    [inst] = aws.launch(request(zones=("use1-az4",)))
    assert check.calls[0]["Placement.AvailabilityZone"] == "us-east-1a"
    assert inst.zone == "us-east-1a"  # the default subnet found by the zone's name, not by its id
    [name_given] = aws.launch(request(run_id="r-2one5zone2", zones=("us-east-1c",)))
    assert check.calls[1]["Placement.AvailabilityZone"] == "us-east-1c" and name_given.zone == "us-east-1c"


def test_zones_are_asked_once_per_region_and_never_include_a_local_zone(aws: AwsProvider) -> None:
    calls = serve_zones(aws)
    assert aws.zones("us-east-1") == ["us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d"]
    assert aws.zones("us-east-1") == aws.zones("us-east-1") and len(calls) == 1
    assert aws.named_zones("us-east-1", ["use1-atl2-az1", "us-east-1b", "use1-az99"]) == [
        "us-east-1-atl-2a", "us-east-1b"]


def test_a_zone_the_account_does_not_have_blocks_that_zone_only(aws: AwsProvider) -> None:
    serve_zones(aws)
    with pytest.raises(PlacementError) as info:
        aws.launch(request(zones=("use1-az99",)))
    assert info.value.scope == Scope(region="us-east-1", zone="use1-az99")


def test_a_local_zone_is_used_only_when_the_spec_names_it(aws: AwsProvider) -> None:
    serve_zones(aws)
    check = attach(aws.launch_client("us-east-1"),
                   zone_names=frozenset(n for n, _, _ in ACCOUNT_ZONES))
    with pytest.raises(PlacementError, match="local-zone: used only when the spec names it") as info:
        aws.launch(request(zones=("use1-atl2-az1",)))
    assert info.value.scope == Scope(region="us-east-1", zone="us-east-1-atl-2a")
    assert check.calls == []  # refused before any RunInstances
    # Named (by id) in resources.zones: sent as the zone's name (moto has no Local Zone subnet, so the call
    # is answered by an injected capacity error once its parameters are checked).
    subnet = aws.client("ec2", "us-east-1").describe_subnets(Filters=[
        {"Name": "default-for-az", "Values": ["true"]}])["Subnets"][0]["SubnetId"]
    inject(aws.launch_client("us-east-1"), "RunInstances", Injector("InsufficientInstanceCapacity"),
           server=False)
    with pytest.raises(PlacementError):
        aws.launch(request(zones=("use1-atl2-az1",), options={"zones": ["use1-atl2-az1"], "subnet_id": subnet}))
    assert check.calls[0]["Placement.AvailabilityZone"] == "us-east-1-atl-2a"


def test_standard_zones_and_quota_families_from_their_documented_forms() -> None:
    assert standard_zone("use1-az4") and standard_zone("us-east-1a") and standard_zone("apne1-az1")
    assert not standard_zone("use1-atl2-az1") and not standard_zone("us-east-1-atl-2a")
    assert not standard_zone("use1-wl1-bos-wlz1")
    assert [instance_family(t) for t in ("p4d.24xlarge", "p5.48xlarge", "g5g.xlarge", "vt1.3xlarge", "dl1.24xlarge",
                                         "trn1.32xlarge", "inf2.xlarge", "m5.large", "x2idn.32xlarge")] == [
        "P", "P", "G", "G", "DL", "Trn", "Inf", "Standard", "X"]


def test_enabled_regions_come_from_describe_regions_opt_in_status(aws: AwsProvider) -> None:
    serve_regions(aws, {"us-east-1": "opt-in-not-required", "ap-east-1": "not-opted-in", "me-south-1": "opted-in"})
    assert aws.enabled_regions() == frozenset({"us-east-1", "me-south-1"})


def test_bad_credentials_when_asking_for_regions_are_an_auth_error(aws: AwsProvider) -> None:
    inject(aws.client("ec2", "us-east-1", retries=2), "DescribeRegions",
           Injector("AuthFailure", "AWS was not able to validate the provided access credentials", status=401),
           server=False)
    with pytest.raises(AuthError):
        aws.enabled_regions()


def test_a_disabled_region_is_skipped_by_the_already_running_lookup(aws: AwsProvider, aws_clients: Clients) -> None:
    serve_regions(aws, {"us-east-1": "opt-in-not-required", "us-west-2": "opt-in-not-required",
                        "ap-east-1": "not-opted-in"})
    refused = inject(aws.client("ec2", "ap-east-1"), "DescribeInstances",
                     Injector("AuthFailure", "AWS was not able to validate the provided access credentials",
                              status=401), server=False)
    aws.include_regions(["ap-east-1"])
    assert aws.list_tagged("r-2one5zone1") == [] and refused.calls == []


def test_auth_failure_in_an_opt_in_region_blocks_the_region_but_in_a_default_region_it_is_bad_credentials(
        aws: AwsProvider) -> None:
    serve_regions(aws, {"us-east-1": "opt-in-not-required", "ap-east-1": "not-opted-in"})
    for region in ("ap-east-1", "us-east-1"):
        inject(aws.client("ec2", region), "DescribeAvailabilityZones",
               Injector("AuthFailure", "AWS was not able to validate the provided access credentials", status=401),
               server=False)
    with pytest.raises(PlacementError) as info:
        aws.zones("ap-east-1")
    assert info.value.scope == Scope(region="ap-east-1") and info.value.code == "AuthFailure"
    with pytest.raises(AuthError):
        aws.zones("us-east-1")


def test_client_tokens_differ_per_distinct_request_and_fit_64_ascii_characters() -> None:
    base = dict(generation=0, attempt=1, zone="us-east-1a", instance_type="p4d.24xlarge", rank=0)
    tokens = {client_token("r-0123456789", **{**base, **change}) for change in (
        {}, {"instance_type": "g5.48xlarge"}, {"attempt": 2}, {"zone": "us-east-1b"}, {"rank": 1}, {"rank": None},
        {"generation": 1})}
    assert len(tokens) == 7 and all(len(t) <= 64 and t.isascii() for t in tokens)
    long = dict(base, zone="us-east-1-wl1-bos-wlz-1", instance_type="p6-b200.48xlarge")
    token = client_token("r-" + "x" * 60, **long)
    assert len(token) == 64 and token.isascii() and token == client_token("r-" + "x" * 60, **long)
    assert token != client_token("r-" + "x" * 60, **{**long, "rank": 1})


def test_spec_labels_are_tags_on_the_instance_its_volumes_and_its_secrets(aws: AwsProvider,
                                                                          aws_clients: Clients) -> None:
    labels = {"team": "nlp", "cost-center": "CC 42/b", "gpuplan:run-id": "not-this"}
    aws.instance_profile = create_instance_profile(aws_clients("iam"))  # the machines read the secret from SSM
    [inst] = aws.launch(request(zones=("us-east-1b",), labels=labels, secrets={"HF_TOKEN": "hf_secret"}))
    ec2 = aws_clients("ec2")
    raw = ec2.describe_instances(InstanceIds=[inst.instance_id])["Reservations"][0]["Instances"][0]
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert tags["team"] == "nlp" and tags["cost-center"] == "CC 42/b"
    assert tags[TAG_RUN_ID] == "r-2one5zone1"  # gpuplan's own tag wins a clash
    [volume] = ec2.describe_volumes(Filters=[{"Name": "attachment.instance-id",
                                              "Values": [inst.instance_id]}])["Volumes"]
    assert {t["Key"]: t["Value"] for t in volume["Tags"]}["team"] == "nlp"
    ssm = aws_clients("ssm")
    [param] = ssm.describe_parameters()["Parameters"]
    ptags = {t["Key"]: t["Value"] for t in ssm.list_tags_for_resource(ResourceType="Parameter",
                                                                      ResourceId=param["Name"])["TagList"]}
    assert ptags["team"] == "nlp" and ptags[TAG_RUN_ID] == "r-2one5zone1"
