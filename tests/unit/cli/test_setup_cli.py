"""`gpuplan setup aws` against moto in-process: the least-privilege role and instance profile, made on request.

And the other half of issue 20's item 7: `gpuplan launch` refuses (exit 2, no run recorded, nothing started) a
launch whose machines need credentials (secrets in SSM) when no usable instance profile is configured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpuplan.providers.aws import iam as aws_iam

from support.awsmoto import Clients
from support.clihelp import run_cli

BUCKET = "team-runs"


@pytest.fixture
def in_moto(moto_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The CLI builds its own AwsProvider: in-process moto answers it (AWS_ENDPOINT_URL is unset by moto_env)."""
    monkeypatch.setenv("GPUPLAN_AWS_IMAGE_ID", moto_env["us-east-1"])
    return moto_env


def test_help_explains_what_it_creates() -> None:
    result = run_cli("setup", "aws", "--help")
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    for fragment in ("--create", "instance profile", "ssm:GetParameter", "s3:PutObject",
                     "[providers.aws] instance_profile", "iam:PassRole", "--json"):
        assert fragment in text, fragment


def test_without_create_nothing_is_changed(in_moto: dict[str, str], aws_clients: Clients) -> None:
    result = run_cli("setup", "aws", "--bucket", BUCKET, "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["created"] is False and out["usable"] is False and "none is configured" in out["problem"]
    assert aws_clients("iam").list_roles()["Roles"] == []


def test_create_makes_a_least_privilege_tagged_role_in_a_profile(in_moto: dict[str, str],
                                                                  aws_clients: Clients) -> None:
    result = run_cli("setup", "aws", "--create", "--bucket", BUCKET, "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["instance_profile"] == out["role"] == aws_iam.DEFAULT_NAME
    iam = aws_clients("iam")
    role = iam.get_role(RoleName=aws_iam.DEFAULT_NAME)["Role"]
    trust = role["AssumeRolePolicyDocument"]
    trust = json.loads(trust) if isinstance(trust, str) else trust
    assert [s["Principal"] for s in trust["Statement"]] == [{"Service": "ec2.amazonaws.com"}]  # only EC2
    policy = iam.get_role_policy(RoleName=aws_iam.DEFAULT_NAME, PolicyName=aws_iam.POLICY_NAME)["PolicyDocument"]
    policy = json.loads(policy) if isinstance(policy, str) else policy
    assert {(s["Action"], s["Resource"]) for s in policy["Statement"]} == {
        ("s3:PutObject", f"arn:aws:s3:::{BUCKET}/gpuplan/*"),
        ("ssm:GetParameter", "arn:aws:ssm:*:*:parameter/gpuplan/*")}
    assert {t["Key"]: t["Value"] for t in iam.list_role_tags(RoleName=aws_iam.DEFAULT_NAME)["Tags"]}[
        "gpuplan:created-by"] == "gpuplan"
    profile = iam.get_instance_profile(InstanceProfileName=aws_iam.DEFAULT_NAME)["InstanceProfile"]
    assert [r["RoleName"] for r in profile["Roles"]] == [aws_iam.DEFAULT_NAME]
    # Again: idempotent, still one role in the profile.
    again = run_cli("setup", "aws", "--create", "--bucket", BUCKET, "--json")
    assert again.exit_code == 0, again.stderr
    assert "instance profile gpuplan-instance exists" in again.json()["actions"]
    profile = iam.get_instance_profile(InstanceProfileName=aws_iam.DEFAULT_NAME)["InstanceProfile"]
    assert len(profile["Roles"]) == 1
    # And the check now passes: --create recorded the profile in the config file (issue 32: no export needed).
    from gpuplan.config import provider_settings

    assert provider_settings("aws") == {"instance_profile": aws_iam.DEFAULT_NAME, "bucket": BUCKET}
    ready = run_cli("setup", "aws", "--json")
    assert ready.json()["usable"] is True


def test_the_created_policy_is_the_one_the_docs_show() -> None:
    """tests/unit/providers/test_cloud_tags.py reads the policy docs/providers/aws.md shows; the role gpuplan
    creates is that one."""
    policy = aws_iam.instance_policy("BUCKET")
    assert {(s["Effect"], s["Action"], s["Resource"]) for s in policy["Statement"]} == {
        ("Allow", "s3:PutObject", "arn:aws:s3:::BUCKET/gpuplan/*"),
        ("Allow", "ssm:GetParameter", "arn:aws:ssm:*:*:parameter/gpuplan/*")}
    kms = aws_iam.instance_policy(None, kms_key_arn="arn:aws:kms:us-east-1:111122223333:key/k")
    assert ("kms:Decrypt", "arn:aws:kms:us-east-1:111122223333:key/k") in {
        (s["Action"], s["Resource"]) for s in kms["Statement"]}


SPEC = """\
name: needs-credentials
command: python train.py
runtime: process
secrets: [HF_TOKEN]
resources:
  gpu: A10G:1
  regions: [us-east-1]
limits:
  max_hours: 1
"""


def test_launch_without_a_usable_profile_is_refused_before_anything_is_recorded(
        in_moto: dict[str, str], aws_clients: Clients, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    monkeypatch.setenv("HF_TOKEN", "value")
    for extra in ({}, {"GPUPLAN_AWS_INSTANCE_PROFILE": "missing-profile"}):
        result = run_cli("launch", str(spec), "--provider", "aws", "-y", "--detach", env=extra)
        assert result.exit_code == 2, result.stderr
        [line] = [x for x in result.stderr.splitlines() if x.startswith("error:")]
        assert "instance profile" in line and "gpuplan setup aws" in line
    runs = run_cli("runs", "--json")
    assert runs.json() == []  # nothing recorded
    assert _instances(aws_clients) == []  # nothing started
    assert aws_clients("ssm").describe_parameters()["Parameters"] == []  # no secret stored


def _instances(clients: Clients) -> list[Any]:
    return [i for r in clients("ec2").describe_instances()["Reservations"] for i in r["Instances"]]


def test_a_storage_prefix_adds_only_that_prefix_to_the_role(in_moto: dict[str, str], aws_clients: Clients) -> None:
    result = run_cli("setup", "aws", "--bucket", BUCKET, "--storage", "s3://ckpt-bkt/team", "--create", "--json")
    assert result.exit_code == 0, result.stderr
    iam = aws_clients("iam")
    policy = iam.get_role_policy(RoleName=aws_iam.DEFAULT_NAME, PolicyName=aws_iam.POLICY_NAME)["PolicyDocument"]
    policy = json.loads(policy) if isinstance(policy, str) else policy
    policy["Statement"] = [{k: v for k, v in s.items() if k != "Sid"} for s in policy["Statement"]]
    assert {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
            "Resource": "arn:aws:s3:::ckpt-bkt/team/*"} in policy["Statement"]
    assert {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::ckpt-bkt",
            "Condition": {"StringLike": {"s3:prefix": ["team/*"]}}} in policy["Statement"]


@pytest.mark.parametrize("storage", ["gs://b/p", "/shared", "s3://NO"])
def test_a_storage_the_role_cannot_use_is_one_line_exit_2(in_moto: dict[str, str], storage: str) -> None:
    result = run_cli("setup", "aws", "--storage", storage)
    assert result.exit_code == 2 and "--storage" in result.stderr and "Traceback" not in result.stderr


def test_print_policy_prints_the_shipped_launching_user_policy() -> None:
    """Issue 32 item 7: the policy a user pastes is the package data the strict layer enforces in the e2e tests."""
    from gpuplan.providers.aws.policy import launch_actions

    result = run_cli("setup", "aws", "--print-policy", "--name", "team-gpu", "--bucket", "outs",
                     "--storage", "s3://ckpt/team")
    assert result.exit_code == 0, result.stderr
    policy = json.loads(result.stdout)
    resources = {r for s in policy["Statement"] for r in ([s["Resource"]] if isinstance(s["Resource"], str)
                                                          else s["Resource"])}
    assert {"arn:aws:s3:::outs/*", "arn:aws:s3:::ckpt/*", "arn:aws:iam::*:role/team-gpu"} <= resources
    assert not any("BUCKET" in r or "INSTANCE_PROFILE" in r for r in resources)
    assert [a for s in policy["Statement"] for a in s["Action"]] == launch_actions()
    assert {"iam:PassRole", "ec2:CreatePlacementGroup", "ssm:AddTagsToResource"} <= set(launch_actions())


def test_setup_gcp_prints_the_roles_and_permissions() -> None:
    result = run_cli("setup", "gcp", "--json")
    assert result.exit_code == 0, result.stderr
    roles = result.json()
    assert "roles/compute.instanceAdmin.v1" in roles["roles"] and "compute.instances.create" in roles["permissions"]
    printed = run_cli("setup", "gcp", "--print-policy")
    assert "custom role permissions: " in printed.stdout and "iam.serviceAccounts.actAs" in printed.stdout
