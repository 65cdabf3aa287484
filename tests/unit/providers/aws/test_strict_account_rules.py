"""The strict layer's account rules (tests/support/strict_aws/account.py, rules 11-14), each shown refusing what plain
moto accepts: IAM propagation of a new instance profile, SSM parameter tiers, iam:SimulatePrincipalPolicy (moto has
none), and the caller's own IAM policy."""

from __future__ import annotations

import json

import pytest
from botocore.exceptions import ClientError
from botocore.parsers import ResponseParserError

from support.strict_aws.asserts import launch, refusal
from support.strict_aws.fixture import StrictAwsServer


def _profile(iam: object, name: str = "fresh") -> None:
    iam.create_role(RoleName=name, AssumeRolePolicyDocument='{"Version":"2012-10-17","Statement":[]}')  # type: ignore[attr-defined]
    iam.create_instance_profile(InstanceProfileName=name)  # type: ignore[attr-defined]
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)  # type: ignore[attr-defined]


def test_rule_11_a_new_instance_profile_is_unknown_to_ec2_for_a_while(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    _profile(strict_aws.moto_client("iam"), "on-moto")
    assert launch(strict_aws.moto_client("ec2"), ami, IamInstanceProfile={"Name": "on-moto"})["Instances"]  # at once
    strict_aws.layer.account.profile_propagation = 2
    _profile(strict_aws.client("iam"))
    ec2 = strict_aws.client("ec2")
    for _ in range(2):
        assert refusal(lambda: launch(ec2, ami, IamInstanceProfile={"Name": "fresh"})) == (
            "InvalidParameterValue", 400,
            "Value (fresh) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name")
    assert launch(ec2, ami, IamInstanceProfile={"Name": "fresh"})["Instances"]


def test_rule_12_ssm_standard_tier_holds_4096_characters_advanced_8192(strict_aws: StrictAwsServer) -> None:
    big = "x" * 5000
    strict_aws.moto_client("ssm").put_parameter(Name="/t/plain", Value="y" * 9000, Type="SecureString")  # moto: fine
    ssm = strict_aws.client("ssm")
    code, status, message = refusal(lambda: ssm.put_parameter(Name="/t/big", Value=big, Type="SecureString"))
    assert (code, status) == ("ValidationException", 400) and "maximum parameter value of 4096" in message
    ssm.put_parameter(Name="/t/small", Value="x" * 4096, Type="SecureString")
    ssm.put_parameter(Name="/t/big", Value=big, Type="SecureString", Tier="Advanced")
    ssm.put_parameter(Name="/t/smart", Value=big, Type="SecureString", Tier="Intelligent-Tiering")
    code, status, message = refusal(lambda: ssm.put_parameter(Name="/t/huge", Value="z" * 8193, Type="SecureString",
                                                              Tier="Advanced"))
    assert (code, status) == ("ValidationException", 400) and "8192" in message


def test_rule_13_simulate_principal_policy_evaluates_the_roles_policies(strict_aws: StrictAwsServer) -> None:
    moto_iam = strict_aws.moto_client("iam")
    _profile(moto_iam, "node")
    moto_iam.put_role_policy(RoleName="node", PolicyName="p", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"], "Resource": "arn:aws:s3:::b/team/*"},
            {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::b",
             "Condition": {"StringLike": {"s3:prefix": ["team/*"]}}},
            {"Effect": "Deny", "Action": "s3:PutObject", "Resource": "arn:aws:s3:::b/team/locked/*"}]}))
    arn = moto_iam.get_role(RoleName="node")["Role"]["Arn"]
    with pytest.raises(ResponseParserError):  # moto does not implement it: an HTML 500 page
        moto_iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=["s3:PutObject"])
    iam = strict_aws.client("iam")

    def decide(action: str, resource: str, prefix: str | None = None) -> str:
        context = ([{"ContextKeyName": "s3:prefix", "ContextKeyValues": [prefix], "ContextKeyType": "string"}]
                   if prefix else [])
        answer = iam.simulate_principal_policy(PolicySourceArn=arn, ActionNames=[action], ResourceArns=[resource],
                                               ContextEntries=context)
        return str(answer["EvaluationResults"][0]["EvalDecision"])

    assert decide("s3:PutObject", "arn:aws:s3:::b/team/run/x") == "allowed"
    assert decide("s3:PutObject", "arn:aws:s3:::b/other/x") == "implicitDeny"
    assert decide("s3:PutObject", "arn:aws:s3:::b/team/locked/x") == "explicitDeny"
    assert decide("s3:ListBucket", "arn:aws:s3:::b", "team/run/") == "allowed"
    assert decide("s3:ListBucket", "arn:aws:s3:::b", "other/") == "implicitDeny"
    assert decide("s3:ListBucket", "arn:aws:s3:::b") == "implicitDeny"  # the condition's key is missing
    with pytest.raises(ClientError) as caught:
        iam.simulate_principal_policy(PolicySourceArn=arn.replace("node", "nobody"), ActionNames=["s3:PutObject"])
    assert caught.value.response["Error"]["Code"] == "NoSuchEntity"


def test_rule_14_a_call_outside_the_callers_policy_is_refused_as_each_service_does(
        strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    strict_aws.layer.account.caller_policy = {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": ["ec2:RunInstances", "ec2:Describe*", "ssm:PutParameter"], "Resource": "*"}]}
    assert launch(strict_aws.client("ec2"), ami)["Instances"]  # no tags: RunInstances alone
    tagged = {"TagSpecifications": [{"ResourceType": "instance", "Tags": [{"Key": "k", "Value": "v"}]}]}
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, **tagged))[:2] == ("UnauthorizedOperation", 403)
    assert refusal(lambda: strict_aws.client("iam").get_instance_profile(InstanceProfileName="x"))[:2] == \
        ("AccessDenied", 403)
    ssm = strict_aws.client("ssm")
    ssm.put_parameter(Name="/t/a", Value="v", Type="SecureString")
    assert refusal(lambda: ssm.put_parameter(Name="/t/b", Value="v", Type="SecureString",
                                             Tags=[{"Key": "k", "Value": "v"}]))[:2] == ("AccessDeniedException", 400)
    assert refusal(lambda: strict_aws.client("s3").list_objects_v2(Bucket="b"))[:2] == ("AccessDenied", 403)
    assert strict_aws.layer.account.denied == ["ec2:CreateTags", "iam:GetInstanceProfile", "ssm:AddTagsToResource",
                                               "s3:ListBucket"]
    assert launch(strict_aws.moto_client("ec2"), ami, **tagged)["Instances"]  # plain moto: anything goes


def _nics(subnet: str, *specs: tuple[int, int, str], public: bool = False) -> list[dict[str, object]]:
    nics: list[dict[str, object]] = [{"NetworkCardIndex": card, "DeviceIndex": device, "InterfaceType": kind,
                                      "SubnetId": subnet} for card, device, kind in specs]
    if public:
        nics[0]["AssociatePublicIpAddress"] = True
    return nics


@pytest.mark.parametrize(("specs", "public", "code"), [
    (((0, 0, "efa-only"),), False, "InvalidParameterValue"),  # EFA-only as the primary
    (((0, 0, "interface"), (4, 0, "efa-only")), False, "InvalidParameterValue"),  # p4d has cards 0-3
    (((0, 0, "interface"), (1, 0, "efa-only"), (1, 0, "efa-only")), False, "InvalidParameterValue"),  # twice
    (((0, 0, "efa"), (1, 1, "efa")), True, "InvalidParameterCombination"),  # public IP, two IP interfaces
])
def test_rule_15_network_interfaces_as_ec2_checks_them(strict_aws: StrictAwsServer, specs: tuple, public: bool,
                                                       code: str) -> None:
    ami = strict_aws.amis["us-east-1"]
    subnet = strict_aws.client("ec2").describe_subnets()["Subnets"][0]["SubnetId"]
    nics = _nics(subnet, *specs, public=public)
    assert launch(strict_aws.moto_client("ec2"), ami, InstanceType="p4d.24xlarge", NetworkInterfaces=nics)
    assert refusal(lambda: launch(strict_aws.client("ec2"), ami, InstanceType="p4d.24xlarge",
                                  NetworkInterfaces=nics))[:2] == (code, 400)


def test_rule_15_accepts_one_efa_per_card_with_a_public_primary(strict_aws: StrictAwsServer) -> None:
    ami = strict_aws.amis["us-east-1"]
    subnet = strict_aws.client("ec2").describe_subnets()["Subnets"][0]["SubnetId"]
    nics = _nics(subnet, (0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (2, 0, "efa-only"),
                 (3, 0, "efa-only"), public=True)
    assert launch(strict_aws.client("ec2"), ami, InstanceType="p4d.24xlarge", NetworkInterfaces=nics)["Instances"]
