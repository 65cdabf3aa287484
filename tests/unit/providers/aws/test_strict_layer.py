"""The strict AWS layer (tests/support/strict_aws/): for each documented EC2 rule moto ignores, the violating request
is accepted by plain moto (the evidence that moto is lenient there) and refused by the layer with EC2's documented
code and HTTP status; conforming requests pass through unchanged. Rules 1-6 here; placement groups, injected errors,
the instance checks and the subprocess path in test_strict_layer_more.py."""

from __future__ import annotations

import base64
import gzip
import io
from typing import Any

import pytest

from support.strict_aws.asserts import launch, refusal
from support.strict_aws.fixture import StrictAwsServer


def count_instances(ec2: Any) -> int:
    return sum(len(r["Instances"]) for r in ec2.describe_instances()["Reservations"])


# ---- conforming requests pass through --------------------------------------------------------------------------


def test_conforming_launch_describe_terminate_pass_through(strict_aws: StrictAwsServer) -> None:
    ec2, moto = strict_aws.client("ec2"), strict_aws.moto_client("ec2")
    started = launch(ec2, strict_aws.amis["us-east-1"], Placement={"AvailabilityZone": "us-east-1b"},
                     TagSpecifications=[{"ResourceType": "instance", "Tags": [{"Key": "gpuplan:run", "Value": "r1"}]}])
    instance_id = started["Instances"][0]["InstanceId"]
    assert started["Instances"][0]["Placement"]["AvailabilityZone"] == "us-east-1b"
    through = ec2.describe_instances(InstanceIds=[instance_id])["Reservations"]
    direct = moto.describe_instances(InstanceIds=[instance_id])["Reservations"]
    assert through == direct
    ec2.terminate_instances(InstanceIds=[instance_id])
    state = moto.describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]["State"]["Name"]
    assert state == "terminated"
    assert [r.status for r in strict_aws.layer.calls("RunInstances")] == [200]


def test_other_services_pass_through(strict_aws: StrictAwsServer) -> None:
    ssm = strict_aws.client("ssm")
    ssm.put_parameter(Name="/gpuplan/test/x", Value="v", Type="String")
    assert ssm.get_parameter(Name="/gpuplan/test/x")["Parameter"]["Value"] == "v"
    s3 = strict_aws.client("s3")
    s3.create_bucket(Bucket="gpuplan-out")
    s3.put_object(Bucket="gpuplan-out", Key="r1/log", Body=b"done")
    assert s3.get_object(Bucket="gpuplan-out", Key="r1/log")["Body"].read() == b"done"
    s3.put_object(Bucket="gpuplan-out", Key="r1/a b%2Fc.txt", Body=b"odd key")
    assert s3.get_object(Bucket="gpuplan-out", Key="r1/a b%2Fc.txt")["Body"].read() == b"odd key"
    s3.upload_fileobj(io.BytesIO(b"x" * 100_000), "gpuplan-out", "r1/big")  # s3transfer's streaming upload
    assert s3.head_object(Bucket="gpuplan-out", Key="r1/big")["ContentLength"] == 100_000
    iam = strict_aws.client("iam")
    iam.create_instance_profile(InstanceProfileName="gpuplan-node")
    assert strict_aws.moto_client("iam").get_instance_profile(InstanceProfileName="gpuplan-node")


# ---- rule 1: zone names, zone IDs, Local Zones -----------------------------------------------------------------


def test_zone_id_in_availability_zone_is_refused_with_ec2s_message(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    # moto refuses a zone ID too, but not in EC2's words.
    assert refusal(lambda: launch(strict_aws.moto_client("ec2"), ami, Placement={"AvailabilityZone": "use1-az4"})) \
        == ("InvalidParameterValue", 400, "Invalid Availability Zone (use1-az4)")
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, Placement={"AvailabilityZone": "use1-az4"})) \
        == ("InvalidParameterValue", 400, "Invalid availability zone: [use1-az4]")


def test_availability_zone_id_is_honoured_where_moto_ignores_it(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    zones = {z["ZoneId"]: z["ZoneName"] for z in strict_aws.client("ec2").describe_availability_zones()
             ["AvailabilityZones"]}
    plain = launch(strict_aws.moto_client("ec2"), ami, Placement={"AvailabilityZoneId": "use1-az4"})
    assert plain["Instances"][0]["Placement"]["AvailabilityZone"] == "us-east-1a"  # moto drops the ID
    strict = launch(strict_aws.client("ec2"), ami, Placement={"AvailabilityZoneId": "use1-az4"})
    assert strict["Instances"][0]["Placement"]["AvailabilityZone"] == zones["use1-az4"] == "us-east-1d"
    both = {"AvailabilityZone": "us-east-1d", "AvailabilityZoneId": "use1-az4"}
    assert launch(strict_aws.moto_client("ec2"), ami, Placement=both)["Instances"]
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, Placement=both))[:2] == \
        ("InvalidParameterCombination", 400)
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, Placement={"AvailabilityZoneId": "use1-az99"})) \
        == ("InvalidParameterValue", 400, "Invalid availability zone: [use1-az99]")


def test_local_zones_are_listed_only_with_all_zones_until_opted_in(strict_aws: StrictAwsServer) -> None:
    ec2 = strict_aws.client("ec2")
    default = ec2.describe_availability_zones()["AvailabilityZones"]
    assert {z["ZoneType"] for z in default} == {"availability-zone"}
    assert all(z["OptInStatus"] == "opt-in-not-required" for z in default)
    everything = {z["ZoneName"]: z for z in ec2.describe_availability_zones(AllAvailabilityZones=True)
                  ["AvailabilityZones"]}
    atl = everything["us-east-1-atl-2a"]
    assert (atl["ZoneId"], atl["ZoneType"], atl["OptInStatus"], atl["GroupName"]) == \
        ("use1-atl2-az1", "local-zone", "not-opted-in", "us-east-1-atl-2")
    assert everything["us-east-1-wl1-bos-wlz-1"]["ZoneType"] == "wavelength-zone"
    only_azs = ec2.describe_availability_zones(AllAvailabilityZones=True,
                                              Filters=[{"Name": "zone-type", "Values": ["availability-zone"]}])
    assert len(only_azs["AvailabilityZones"]) == len(default)
    ec2.modify_availability_zone_group(GroupName="us-east-1-atl-2", OptInStatus="opted-in")
    listed = {z["ZoneName"]: z["OptInStatus"] for z in ec2.describe_availability_zones()["AvailabilityZones"]}
    assert listed["us-east-1-atl-2a"] == "opted-in"
    assert refusal(lambda: ec2.describe_availability_zones(ZoneNames=["us-east-1z"]))[:2] == \
        ("InvalidParameterValue", 400)


def test_local_zone_not_opted_in_refuses_run_instances(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    # moto has no Local Zones and ignores AvailabilityZoneId: the launch "succeeds" in us-east-1a.
    assert launch(strict_aws.moto_client("ec2"), ami, Placement={"AvailabilityZoneId": "use1-atl2-az1"})["Instances"]
    ec2 = strict_aws.client("ec2")
    for placement in ({"AvailabilityZoneId": "use1-atl2-az1"}, {"AvailabilityZone": "us-east-1-atl-2a"},
                      {"AvailabilityZone": "us-east-1-wl1-bos-wlz-1"}):
        code, status, message = refusal(lambda p=placement: launch(ec2, ami, Placement=p))
        assert (code, status) == ("InvalidParameterValue", 400)
        assert message.startswith("Invalid availability zone: [us-east-1-")
    strict_aws.layer.local_zone_error = ("OptInRequired", "zone {zone} is not enabled", 401)
    assert refusal(lambda: launch(ec2, ami, Placement={"AvailabilityZone": "us-east-1-atl-2a"})) == \
        ("OptInRequired", 401, "zone us-east-1-atl-2a is not enabled")


def test_subnet_filter_availability_zone_given_a_zone_id_matches_nothing(strict_aws: StrictAwsServer) -> None:
    """Documented filter semantics (API_DescribeSubnets: `availability-zone` is the zone name, `availability-zone-id`
    the ID); an unmatched filter value is no error — on real EC2, moto and the layer alike."""
    ec2 = strict_aws.client("ec2")
    assert ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["use1-az6"]}])["Subnets"] == []
    by_id = ec2.describe_subnets(Filters=[{"Name": "availability-zone-id", "Values": ["use1-az6"]}])["Subnets"]
    assert [s["AvailabilityZone"] for s in by_id] == ["us-east-1a"]


# ---- rule 2: opt-in regions ------------------------------------------------------------------------------------


@pytest.mark.parametrize("region", ["ap-east-1", "af-south-1", "me-central-1"])
def test_not_enabled_opt_in_region_answers_auth_failure(strict_aws: StrictAwsServer, region: str) -> None:
    assert strict_aws.moto_client("ec2", region).describe_instances()["Reservations"] == []
    ec2 = strict_aws.client("ec2", region)
    assert refusal(ec2.describe_instances) == \
        ("AuthFailure", 401, "AWS was not able to validate the provided access credentials")
    assert refusal(ec2.describe_regions)[:2] == ("AuthFailure", 401)
    strict_aws.layer.enable_region(region)
    assert ec2.describe_instances()["Reservations"] == []


def test_describe_regions_answers_the_accounts_opt_in_state(strict_aws: StrictAwsServer) -> None:
    moto_all = {r["RegionName"]: r["OptInStatus"] for r in strict_aws.moto_client("ec2").describe_regions(
        AllRegions=True)["Regions"]}
    assert moto_all["af-south-1"] == "opt-in-not-required"  # moto's mistake
    assert "ap-east-1" in {r["RegionName"] for r in strict_aws.moto_client("ec2").describe_regions()["Regions"]}
    ec2 = strict_aws.client("ec2")
    enabled = {r["RegionName"] for r in ec2.describe_regions()["Regions"]}
    assert {"us-east-1", "eu-north-1", "ap-northeast-3"} <= enabled
    assert not enabled & {"af-south-1", "ap-east-1", "eu-south-1", "ap-southeast-3"}
    every = {r["RegionName"]: r["OptInStatus"] for r in ec2.describe_regions(AllRegions=True)["Regions"]}
    assert every["af-south-1"] == every["ap-east-1"] == "not-opted-in"
    strict_aws.layer.enable_region("ap-east-1")
    assert {r["RegionName"]: r["OptInStatus"] for r in ec2.describe_regions(
        Filters=[{"Name": "opt-in-status", "Values": ["opted-in"]}])["Regions"]} == {"ap-east-1": "opted-in"}


def test_other_services_refuse_a_not_enabled_region(strict_aws: StrictAwsServer) -> None:
    strict_aws.moto_client("ssm", "ap-east-1").put_parameter(Name="/x", Value="v", Type="String")
    assert refusal(lambda: strict_aws.client("ssm", "ap-east-1").get_parameter(Name="/x"))[:2] == \
        ("UnrecognizedClientException", 400)
    assert refusal(lambda: strict_aws.client("sts", "ap-east-1").get_caller_identity())[:2] == \
        ("InvalidClientTokenId", 403)


# ---- rule 3: ClientToken ---------------------------------------------------------------------------------------


def test_client_token_over_64_characters_is_refused(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    assert launch(strict_aws.moto_client("ec2"), ami, ClientToken="x" * 65)["Instances"]
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, ClientToken="x" * 65))[:2] == \
        ("InvalidClientToken", 400)
    assert launch(strict_aws.client("ec2"), ami, ClientToken="y" * 64)["Instances"]


def test_same_token_same_parameters_returns_the_first_launch(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    moto = strict_aws.moto_client("ec2")
    first, again = (launch(moto, ami, ClientToken="run-1-a0") for _ in range(2))
    assert first["Instances"][0]["InstanceId"] != again["Instances"][0]["InstanceId"]  # moto: two instances
    strict_aws.reset()
    strict_aws.amis["us-east-1"] = ami = _register(strict_aws)
    ec2 = strict_aws.client("ec2")
    first, again = (launch(ec2, ami, ClientToken="run-1-a0", Placement={"AvailabilityZone": "us-east-1b"})
                    for _ in range(2))
    assert first["ReservationId"] == again["ReservationId"]
    assert first["Instances"][0]["InstanceId"] == again["Instances"][0]["InstanceId"]
    assert count_instances(ec2) == 1


def test_same_token_different_parameters_is_a_mismatch(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    moto = strict_aws.moto_client("ec2")
    launch(moto, ami, ClientToken="tok")
    assert launch(moto, ami, ClientToken="tok", InstanceType="t3.small")["Instances"]
    ec2 = strict_aws.client("ec2")
    launch(ec2, ami, ClientToken="tok2")
    assert refusal(lambda: launch(ec2, ami, ClientToken="tok2", InstanceType="t3.small"))[:2] == \
        ("IdempotentParameterMismatch", 400)


def test_token_of_terminated_instances_is_refused(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    moto = strict_aws.moto_client("ec2")
    gone = launch(moto, ami, ClientToken="tok")["Instances"][0]["InstanceId"]
    moto.terminate_instances(InstanceIds=[gone])
    assert launch(moto, ami, ClientToken="tok")["Instances"][0]["InstanceId"] != gone
    ec2 = strict_aws.client("ec2")
    gone = launch(ec2, ami, ClientToken="tok3")["Instances"][0]["InstanceId"]
    ec2.terminate_instances(InstanceIds=[gone])
    assert refusal(lambda: launch(ec2, ami, ClientToken="tok3"))[:2] == ("IdempotentInstanceTerminated", 400)


def test_token_idempotency_is_zonal_when_a_zone_or_subnet_is_given(strict_aws: StrictAwsServer) -> None:
    """"the same client token can be used to launch instances in other Availability Zones" (ec2-api-idempotency)."""
    ami = strict_aws.amis["us-east-1"]
    ec2 = strict_aws.client("ec2")
    in_a = launch(ec2, ami, ClientToken="z", Placement={"AvailabilityZone": "us-east-1a"})
    in_b = launch(ec2, ami, ClientToken="z", Placement={"AvailabilityZone": "us-east-1b"})
    assert in_a["Instances"][0]["InstanceId"] != in_b["Instances"][0]["InstanceId"]
    subnet_b = ec2.describe_subnets(Filters=[{"Name": "availability-zone", "Values": ["us-east-1b"]}])["Subnets"][0]
    # SubnetId pins us-east-1b implicitly: same zone, same token, but a different parameter (SubnetId).
    assert refusal(lambda: launch(ec2, ami, ClientToken="z", SubnetId=subnet_b["SubnetId"]))[0] == \
        "IdempotentParameterMismatch"
    assert count_instances(ec2) == 2


# ---- rule 4: user data -----------------------------------------------------------------------------------------


def test_user_data_over_16384_bytes_is_refused(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    big = "#!/bin/bash\n" + "x" * (16385 - 12)
    assert len(big.encode()) == 16385
    assert launch(strict_aws.moto_client("ec2"), ami, UserData=big)["Instances"]
    ec2 = strict_aws.client("ec2")
    assert refusal(lambda: launch(ec2, ami, UserData=big)) == \
        ("InvalidParameterValue", 400, "User data is limited to 16384 bytes")
    assert launch(ec2, ami, UserData=big[:16384])["Instances"]


def test_gzip_user_data_counts_compressed_bytes(strict_aws: StrictAwsServer) -> None:
    script = ("#!/bin/bash\n" + "echo 'a long but repetitive boot script line'\n" * 2000).encode()
    assert len(script) > 16384
    packed = gzip.compress(script)
    ec2 = strict_aws.client("ec2")
    instance = launch(ec2, strict_aws.amis["us-east-1"], UserData=packed)["Instances"][0]["InstanceId"]
    stored = ec2.describe_instance_attribute(InstanceId=instance, Attribute="userData")["UserData"]["Value"]
    assert gzip.decompress(base64.b64decode(stored)) == script


# ---- rule 5: AMI and architecture ------------------------------------------------------------------------------


def _register(strict_aws: StrictAwsServer, arch: str = "x86_64", region: str = "us-east-1") -> str:
    image = strict_aws.client("ec2", region).register_image(
        Name=f"gpuplan-test-{arch}", Architecture=arch, RootDeviceName="/dev/sda1", VirtualizationType="hvm")
    return str(image["ImageId"])


@pytest.mark.parametrize(("arch", "instance_type", "type_arch"), [("x86_64", "g5g.xlarge", "arm64"),
                                                                   ("arm64", "g5.xlarge", "x86_64")])
def test_ami_architecture_must_match_the_instance_type(strict_aws: StrictAwsServer, arch: str, instance_type: str,
                                                       type_arch: str) -> None:
    ami = _register(strict_aws, arch)
    assert strict_aws.client("ec2").describe_images(ImageIds=[ami])["Images"][0]["Architecture"] == arch
    assert "Architecture" not in strict_aws.moto_client("ec2").describe_images(ImageIds=[ami])["Images"][0]
    assert launch(strict_aws.moto_client("ec2"), ami, InstanceType=instance_type)["Instances"]
    code, status, message = refusal(lambda: launch(strict_aws.client("ec2"), ami, InstanceType=instance_type))
    assert (code, status) == ("InvalidParameterValue", 400)
    assert message.startswith(f"The architecture '{type_arch}' of the specified instance type does not match the "
                              f"architecture '{arch}' of the specified AMI.")


def test_unknown_ami_is_refused(strict_aws: StrictAwsServer) -> None:
    assert launch(strict_aws.moto_client("ec2"), "ami-0123456789abcdef0")["Instances"]
    assert refusal(lambda: launch(strict_aws.client("ec2"), "ami-0123456789abcdef0")) == \
        ("InvalidAMIID.NotFound", 400, "The image id '[ami-0123456789abcdef0]' does not exist")
    # AMI IDs are regional: the us-east-1 test AMI does not exist in us-west-2's images.
    west = strict_aws.client("ec2", "us-west-2")
    assert refusal(lambda: launch(west, strict_aws.amis["us-east-1"]))[0] == "InvalidAMIID.NotFound"


# ---- rule 6: tags ----------------------------------------------------------------------------------------------


def _tags(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"ResourceType": "instance", "Tags": [{"Key": k, "Value": v} for k, v in pairs]}]


@pytest.mark.parametrize(("tag", "code"), [(("aws:cost", "x"), "InvalidTagKey.Malformed"),
                                           (("k" * 129, "x"), "InvalidParameterValue"),
                                           (("gpuplan:run", "v" * 257), "InvalidParameterValue")])
def test_tag_restrictions_moto_ignores(strict_aws: StrictAwsServer, tag: tuple[str, str], code: str) -> None:
    ami = strict_aws.amis["us-east-1"]
    moto = strict_aws.moto_client("ec2")
    instance = launch(moto, ami, TagSpecifications=_tags(tag))["Instances"][0]["InstanceId"]
    moto.create_tags(Resources=[instance], Tags=[{"Key": tag[0], "Value": tag[1]}])
    ec2 = strict_aws.client("ec2")
    assert refusal(lambda: launch(ec2, ami, TagSpecifications=_tags(tag)))[:2] == (code, 400)
    assert refusal(lambda: ec2.create_tags(Resources=[instance], Tags=[{"Key": tag[0], "Value": tag[1]}]))[:2] == \
        (code, 400)
    assert refusal(lambda: ec2.create_security_group(
        GroupName="g", Description="d", TagSpecifications=[{"ResourceType": "security-group",
                                                              "Tags": [{"Key": tag[0], "Value": tag[1]}]}]))[:2] == \
        (code, 400)


def test_at_most_50_tags_per_resource(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    fifty = [(f"k{i}", "v") for i in range(50)]
    ec2 = strict_aws.client("ec2")
    assert launch(ec2, ami, TagSpecifications=_tags(*fifty))["Instances"]
    assert refusal(lambda: launch(ec2, ami, TagSpecifications=_tags(*fifty, ("k50", "v"))))[:2] == \
        ("TagLimitExceeded", 400)
    assert launch(ec2, ami, TagSpecifications=_tags(("k" * 128, "v" * 256)))["Instances"]
    instance = launch(ec2, ami, TagSpecifications=_tags(*fifty))["Instances"][0]["InstanceId"]
    ec2.delete_tags(Resources=[instance], Tags=[{"Key": k} for k, _ in [*fifty, ("k50", "v")]])
    assert ec2.describe_tags(Filters=[{"Name": "resource-id", "Values": [instance]}])["Tags"] == []
