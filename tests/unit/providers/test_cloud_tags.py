"""Every cloud resource a launch creates carries gpuplan's marks, listed from the cloud's side afterwards.

AWS (moto in-process): instances, their volumes, the security groups (the shared one, open only between its
members, and the SSH one), and the run's SSM secret parameters. Resources of one run carry `gpuplan:run-id` and
`gpuplan:created-by`; the security groups are shared by every run in a VPC and carry `gpuplan:created-by`. GCP
(the fake Compute API): every VM and its boot disk of a multi-node run carry the run's labels. (The cluster
placement group is covered in tests/unit/providers/aws/test_aws_machines.py: moto 5 does not implement it.)
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import TAG_CREATED_BY, TAG_RUN_ID, LaunchRequest
from gpuplan.providers.gcp.provider import GcpProvider

from support.awsmoto import Clients, create_instance_profile
from support.fakes.gce_server import RunningFake

RUN = "r-7a9c0ffee1"


def tags(items: list[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or []}


def test_every_aws_resource_of_a_launch_is_tagged(aws_session: Any, aws_clients: Clients,
                                                  moto_env: dict[str, str]) -> None:
    provider = AwsProvider(session=aws_session, image_id=moto_env["us-east-1"], waiter_delay=0.05,
                           instance_profile=create_instance_profile(aws_clients("iam")))
    provider.launch(LaunchRequest(
        run_id=RUN, name="tagged", command="true", run_dir="/tmp/r", instance_type="g5.xlarge", region="us-east-1",
        zones=("us-east-1a",), gpu="A10G", gpus_per_node=1, price_per_hour=Decimal("1.006"),
        boot_script="#!/bin/bash\n",
        secrets={"API_TOKEN": "v", "HF_TOKEN": "w"}, options={"ssh_from": "198.51.100.4"}))
    ec2, ssm = aws_clients("ec2"), aws_clients("ssm")

    instances = [i for r in ec2.describe_instances()["Reservations"] for i in r["Instances"]]
    volumes = ec2.describe_volumes()["Volumes"]
    assert instances and volumes
    for resource in [*instances, *volumes]:
        marks = tags(resource.get("Tags"))
        assert marks.get(TAG_RUN_ID) == RUN and marks.get(TAG_CREATED_BY) == "gpuplan", resource

    groups = [g for g in ec2.describe_security_groups()["SecurityGroups"] if g["GroupName"] != "default"]
    assert sorted(g["GroupName"] for g in groups) == ["gpuplan", "gpuplan-ssh-198-51-100-4_32"]
    for group in groups:
        assert tags(group.get("Tags")).get(TAG_CREATED_BY) == "gpuplan", group
        ranges = [r["CidrIp"] for p in group["IpPermissions"] for r in p["IpRanges"]]
        assert ranges == (["198.51.100.4/32"] if "ssh" in group["GroupName"] else [])  # least privilege
        peers = [g["GroupId"] for p in group["IpPermissions"] for g in p["UserIdGroupPairs"]]
        assert peers == ([] if "ssh" in group["GroupName"] else [group["GroupId"]])  # only its own members

    names = sorted(p["Name"] for p in ssm.describe_parameters()["Parameters"])
    assert names == [f"/gpuplan/{RUN}/API_TOKEN", f"/gpuplan/{RUN}/HF_TOKEN"]
    for name in names:
        marks = tags(ssm.list_tags_for_resource(ResourceType="Parameter", ResourceId=name)["TagList"])
        assert marks.get(TAG_RUN_ID) == RUN and marks.get(TAG_CREATED_BY) == "gpuplan"


def test_every_gcp_vm_and_disk_of_a_launch_is_labelled(gce: RunningFake) -> None:
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    provider.launch(LaunchRequest(
        run_id=RUN, name="tagged", command="true", run_dir="/tmp/r", instance_type="g2-standard-4", gpu="L4",
        gpus_per_node=1, nodes=2, zones=("us-central1-a",), boot_script="#!/bin/bash\n",
        price_per_hour=Decimal("0.7")))
    vms = gce.state.live()
    assert len(vms) == 2
    for vm in vms:
        for labels in (vm["labels"], *(d["initializeParams"]["labels"] for d in vm["disks"])):
            assert labels["gpuplan-run-id"] == RUN and labels["gpuplan-created-by"] == "gpuplan", vm["name"]


def test_the_documented_instance_policy_is_scoped_to_gpuplans_prefixes() -> None:
    """The documented IAM policies (docs/providers/aws.md): the instance role's, only PutObject under gpuplan/
    and GetParameter under /gpuplan/ (least privilege: no wildcard action, no whole bucket, no other
    parameters); reconcile's, only listing parameter metadata and deleting under /gpuplan/."""
    import json
    import re
    from pathlib import Path

    page = (Path(__file__).resolve().parents[3] / "docs" / "providers" / "aws.md").read_text()
    policies = [json.loads(b)["Statement"] for b in re.findall(r"```json\n(.*?)```", page, re.S)
                if '"Statement"' in b]
    assert [{(s["Effect"], s["Action"], s["Resource"]) for s in statements} for statements in policies] == [
        {("Allow", "s3:PutObject", "arn:aws:s3:::BUCKET/gpuplan/*"),
         ("Allow", "ssm:GetParameter", "arn:aws:ssm:*:*:parameter/gpuplan/*")},
        # reconcile's leftover-secret check: listing cannot be scoped (metadata only), deleting is
        {("Allow", "ssm:DescribeParameters", "*"),
         ("Allow", "ssm:DeleteParameters", "arn:aws:ssm:*:ACCOUNT_ID:parameter/gpuplan/*")},
    ]
