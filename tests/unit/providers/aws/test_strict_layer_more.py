"""The strict AWS layer (tests/support/strict_aws/), continued: placement groups (rule 7), injected EC2 errors with
their real bodies and statuses (rule 8), the checks on launched instances (rule 9: security-group reachability, EFA,
credentials for the boot script), and a child process reaching AWS only through the layer."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from botocore.exceptions import ClientError

from support.strict_aws.asserts import launch, refusal
from support.strict_aws.fixture import StrictAwsServer
from support.strict_aws.rules import INJECTABLE

# ---- rule 7: placement groups ----------------------------------------------------------------------------------


def test_moto_server_cannot_create_placement_groups(strict_aws: StrictAwsServer) -> None:
    """The evidence: moto_server answers CreatePlacementGroup with an HTML HTTP 500 (NotImplementedError)."""
    with pytest.raises(Exception) as caught:
        strict_aws.moto_client("ec2").create_placement_group(GroupName="g", Strategy="cluster")
    assert "500" in str(caught.value) or "Internal Server Error" in str(caught.value)


def test_placement_group_create_describe_delete(strict_aws: StrictAwsServer) -> None:
    ec2 = strict_aws.client("ec2")
    made = ec2.create_placement_group(GroupName="gpuplan-r1", Strategy="cluster", TagSpecifications=[
        {"ResourceType": "placement-group", "Tags": [{"Key": "gpuplan:run", "Value": "r1"}]}])["PlacementGroup"]
    assert (made["GroupName"], made["Strategy"], made["State"]) == ("gpuplan-r1", "cluster", "available")
    assert made["GroupId"].startswith("pg-")
    assert refusal(lambda: ec2.create_placement_group(GroupName="gpuplan-r1", Strategy="cluster"))[:2] == \
        ("InvalidPlacementGroup.Duplicate", 400)
    assert refusal(lambda: ec2.create_placement_group(GroupName="other", Strategy="cluster", TagSpecifications=[
        {"ResourceType": "placement-group", "Tags": [{"Key": "aws:x", "Value": "y"}]}]))[:2] == \
        ("InvalidTagKey.Malformed", 400)
    found = ec2.describe_placement_groups(Filters=[{"Name": "tag:gpuplan:run", "Values": ["r1"]}])["PlacementGroups"]
    assert [g["GroupName"] for g in found] == ["gpuplan-r1"]
    assert found[0]["Tags"] == [{"Key": "gpuplan:run", "Value": "r1"}]
    assert refusal(lambda: ec2.describe_placement_groups(GroupNames=["nope"]))[:2] == \
        ("InvalidPlacementGroup.Unknown", 400)
    assert strict_aws.client("ec2", "us-west-2").describe_placement_groups()["PlacementGroups"] == []
    ec2.delete_placement_group(GroupName="gpuplan-r1")
    assert ec2.describe_placement_groups()["PlacementGroups"] == []
    assert refusal(lambda: ec2.delete_placement_group(GroupName="gpuplan-r1"))[:2] == \
        ("InvalidPlacementGroup.Unknown", 400)


def test_run_instances_into_an_unknown_placement_group_is_refused(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    assert launch(strict_aws.moto_client("ec2"), ami, Placement={"GroupName": "nope"})["Instances"]
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, Placement={"GroupName": "nope"}))[:2] == \
        ("InvalidPlacementGroup.Unknown", 400)


def test_cluster_group_keeps_one_zone_and_is_in_use_until_terminated(strict_aws: StrictAwsServer) -> None:
    ami, ec2 = strict_aws.amis["us-east-1"], strict_aws.client("ec2")
    ec2.create_placement_group(GroupName="pg", Strategy="cluster")
    first = launch(ec2, ami, InstanceType="p4d.24xlarge", MinCount=2, MaxCount=2,
                   Placement={"GroupName": "pg", "AvailabilityZone": "us-east-1c"})
    ids = [i["InstanceId"] for i in first["Instances"]]
    assert {i["Placement"].get("GroupName") for i in first["Instances"]} == {"pg"}
    described = ec2.describe_instances(InstanceIds=ids)["Reservations"][0]["Instances"]
    assert {i["Placement"]["GroupName"] for i in described} == {"pg"}
    assert not strict_aws.moto_client("ec2").describe_instances(InstanceIds=ids)[
        "Reservations"][0]["Instances"][0]["Placement"].get("GroupName")  # moto drops it
    code, status, message = refusal(lambda: launch(ec2, ami, Placement={"GroupName": "pg",
                                                                         "AvailabilityZone": "us-east-1b"}))
    assert (code, status) == ("InvalidParameterValue", 400)
    assert "can't span multiple Availability Zones" in message
    later = launch(ec2, ami, Placement={"GroupName": "pg"})  # no zone: lands in the group's zone
    assert later["Instances"][0]["Placement"]["AvailabilityZone"] == "us-east-1c"
    ids.append(later["Instances"][0]["InstanceId"])
    assert refusal(lambda: ec2.delete_placement_group(GroupName="pg"))[:2] == ("InvalidPlacementGroup.InUse", 400)
    ec2.terminate_instances(InstanceIds=ids)
    ec2.delete_placement_group(GroupName="pg")


# ---- rule 8: injected errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize("code", sorted(INJECTABLE))
def test_each_injectable_error_arrives_as_ec2_sends_it(strict_aws: StrictAwsServer, code: str) -> None:
    ami, ec2 = strict_aws.amis["us-east-1"], strict_aws.client("ec2")
    strict_aws.layer.inject(code, zone="us-east-1b")
    got_code, status, message = refusal(lambda: launch(ec2, ami, Placement={"AvailabilityZone": "us-east-1b"}))
    assert (got_code, status) == (code, INJECTABLE[code][0])
    assert "{" not in message
    assert launch(ec2, ami, Placement={"AvailabilityZone": "us-east-1b"})["Instances"]  # times=1: used up


def test_injection_matches_zone_id_type_market_and_region(strict_aws: StrictAwsServer) -> None:
    ami, ec2 = strict_aws.amis["us-east-1"], strict_aws.client("ec2")
    ice = strict_aws.layer.inject("InsufficientInstanceCapacity", zone="use1-az6", instance_type="p4d.24xlarge",
                                  market="spot", times=None)
    spot = {"MarketType": "spot"}
    code, status, message = refusal(lambda: launch(ec2, ami, InstanceType="p4d.24xlarge", InstanceMarketOptions=spot,
                                                   Placement={"AvailabilityZone": "us-east-1a"}))
    assert (code, status) == ("InsufficientInstanceCapacity", 500)
    assert "p4d.24xlarge capacity in the Availability Zone you requested (us-east-1a)" in message
    assert "us-east-1b" in message
    assert launch(ec2, ami, InstanceType="p4d.24xlarge", Placement={"AvailabilityZone": "us-east-1a"})  # on-demand
    assert launch(ec2, ami, InstanceType="p4d.24xlarge", InstanceMarketOptions=spot,
                  Placement={"AvailabilityZone": "us-east-1b"})
    assert launch(ec2, ami, InstanceType="g5.xlarge", InstanceMarketOptions=spot,
                  Placement={"AvailabilityZone": "us-east-1a"})
    assert ice.hits == 1
    strict_aws.layer.inject("VcpuLimitExceeded", region="us-west-2", times=None)
    west = strict_aws.client("ec2", "us-west-2")
    assert refusal(lambda: launch(west, strict_aws.amis["us-west-2"]))[:2] == ("VcpuLimitExceeded", 400)
    assert launch(ec2, ami)["Instances"]


def test_botocore_retries_a_500_and_each_retry_is_a_request(strict_aws: StrictAwsServer) -> None:
    """What a default client does with EC2's 500 InsufficientInstanceCapacity: retry (5 attempts in legacy mode)."""
    ami = strict_aws.amis["us-east-1"]
    strict_aws.layer.inject("InsufficientInstanceCapacity", times=None)
    default = strict_aws.client("ec2", attempts=5)
    with pytest.raises(ClientError) as caught:
        launch(default, ami)
    assert caught.value.response["Error"]["Code"] == "InsufficientInstanceCapacity"
    assert len(strict_aws.layer.calls("RunInstances")) == 5
    strict_aws.layer.injections.clear()
    strict_aws.layer.inject("InsufficientInstanceCapacity", status=400, times=None)
    with pytest.raises(ClientError):
        launch(default, ami)
    assert len(strict_aws.layer.calls("RunInstances")) == 6  # a 4xx is not retried


# ---- rule 9: checks on launched instances ----------------------------------------------------------------------


def _two_nodes(strict_aws: StrictAwsServer) -> tuple[Any, str, list[str]]:
    ec2 = strict_aws.client("ec2")
    vpc = ec2.describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    group = ec2.create_security_group(GroupName="gpuplan", Description="gpuplan nodes", VpcId=vpc)["GroupId"]
    started = ec2.run_instances(ImageId=strict_aws.amis["us-east-1"], InstanceType="p4d.24xlarge", MinCount=2,
                                MaxCount=2, SecurityGroupIds=[group], Placement={"AvailabilityZone": "us-east-1a"})
    return ec2, group, [i["InstanceId"] for i in started["Instances"]]


def test_nodes_in_a_new_group_cannot_reach_each_other_until_a_self_rule(strict_aws: StrictAwsServer) -> None:
    ec2, group, (rank0, rank1) = _two_nodes(strict_aws)
    assert not strict_aws.reachable(rank1, rank0, port=29500)  # a new group: no inbound rule
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "tcp", "FromPort": 22, "ToPort": 22, "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}])
    assert strict_aws.reachable(rank1, rank0, port=22)
    assert not strict_aws.reachable(rank1, rank0, port=29500)
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=[
        {"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}])
    assert strict_aws.reachable(rank1, rank0, port=29500)
    assert strict_aws.reachable(rank0, rank1, protocol="udp", port=4791)


def test_the_vpc_default_group_lets_its_members_talk(strict_aws: StrictAwsServer) -> None:
    """Real default groups carry an inbound self rule that moto's lack; the check adds it."""
    ec2 = strict_aws.client("ec2")
    pair = launch(ec2, strict_aws.amis["us-east-1"], MinCount=2, MaxCount=2)["Instances"]
    default = ec2.describe_security_groups(Filters=[{"Name": "group-name", "Values": ["default"]}])["SecurityGroups"]
    assert default[0]["IpPermissions"] == []
    assert strict_aws.reachable(pair[0]["InstanceId"], pair[1]["InstanceId"], port=29500)
    assert not strict_aws.efa_ready(pair[0]["InstanceId"])  # no outbound self rule


def test_efa_needs_self_rules_in_and_out(strict_aws: StrictAwsServer) -> None:
    ec2, group, (rank0, _) = _two_nodes(strict_aws)
    self_rule = [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}]
    ec2.authorize_security_group_ingress(GroupId=group, IpPermissions=self_rule)
    assert not strict_aws.efa_ready(rank0)  # the default 0.0.0.0/0 egress does not count
    ec2.authorize_security_group_egress(GroupId=group, IpPermissions=self_rule)
    assert strict_aws.efa_ready(rank0)


BOOT_WITH_SSM = "#!/bin/bash\nTOKEN=$(aws ssm get-parameter --name /gpuplan/r1/hf --with-decryption)\npython train.py\n"


def test_boot_script_reading_ssm_needs_an_instance_profile(strict_aws: StrictAwsServer) -> None:
    from support.strict_aws.checks import user_data_needs_credentials

    ami, ec2 = strict_aws.amis["us-east-1"], strict_aws.client("ec2")
    assert user_data_needs_credentials(BOOT_WITH_SSM)
    assert user_data_needs_credentials(b"aws s3 cp /out s3://bucket/run/ --recursive")
    assert not user_data_needs_credentials("#!/bin/bash\npython train.py\n")
    import gzip

    assert user_data_needs_credentials(gzip.compress(BOOT_WITH_SSM.encode()))
    bare = launch(ec2, ami, UserData=BOOT_WITH_SSM)["Instances"][0]["InstanceId"]
    assert not strict_aws.credentials_on_instance(bare)
    assert not strict_aws.boot_has_credentials_it_needs(bare)
    iam = strict_aws.client("iam")
    iam.create_role(RoleName="gpuplan-node", AssumeRolePolicyDocument='{"Version":"2012-10-17","Statement":[]}')
    iam.create_instance_profile(InstanceProfileName="gpuplan-node")
    iam.add_role_to_instance_profile(InstanceProfileName="gpuplan-node", RoleName="gpuplan-node")
    ok = launch(ec2, ami, UserData=BOOT_WITH_SSM,
                IamInstanceProfile={"Name": "gpuplan-node"})["Instances"][0]["InstanceId"]
    assert strict_aws.credentials_on_instance(ok)
    assert strict_aws.boot_has_credentials_it_needs(ok)
    plain = launch(ec2, ami, UserData="#!/bin/bash\npython train.py\n")["Instances"][0]["InstanceId"]
    assert strict_aws.boot_has_credentials_it_needs(plain)


def test_unknown_instance_profile_is_ec2s_invalid_parameter_value(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    assert refusal(lambda: launch(strict_aws.moto_client("ec2"), ami, IamInstanceProfile={"Name": "nope"}))[:2] == \
        ("NoSuchEntity", 404)
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, IamInstanceProfile={"Name": "nope"})) == \
        ("InvalidParameterValue", 400,
         "Value (nope) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name")


# ---- a child process goes through the layer --------------------------------------------------------------------

CHILD = """
import os
import boto3, botocore.config, botocore.exceptions
ec2 = boto3.client("ec2", config=botocore.config.Config(retries={"total_max_attempts": 1}))
print(len(ec2.describe_availability_zones()["AvailabilityZones"]))
try:
    ec2.run_instances(ImageId=os.environ["GPUPLAN_AWS_IMAGE_ID"], InstanceType="t3.micro",
                      MinCount=1, MaxCount=1, Placement={"AvailabilityZone": "use1-az4"})
except botocore.exceptions.ClientError as e:
    print(e.response["Error"]["Code"], e.response["Error"]["Message"])
try:
    boto3.client("ec2", region_name="ap-east-1").describe_instances()
except botocore.exceptions.ClientError as e:
    print(e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
"""


def test_a_child_process_with_the_env_goes_through_the_layer(strict_aws: StrictAwsServer) -> None:
    env = {**os.environ, **strict_aws.env()}
    done = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["6", "InvalidParameterValue Invalid availability zone: [use1-az4]",
                                        "AuthFailure 401"]
    assert [r.action for r in strict_aws.layer.requests if r.service == "ec2"][-3:] == \
        ["DescribeAvailabilityZones", "RunInstances", "DescribeInstances"]
