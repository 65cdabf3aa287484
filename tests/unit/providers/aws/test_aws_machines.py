"""What the AWS provider asks EC2 for, checked against EC2's documented rules rather than moto's answers.

moto (5.2) is lenient exactly where these rules bite: it accepts 20 KB user data, an x86_64 AMI on g5g, a
missing instance profile, ignores placement groups (CreatePlacementGroup is not implemented) and has no
security-group reachability. So each test captures what the provider *sends* (a botocore `before-call` hook on
RunInstances) and asserts the rule: one call with MinCount=nodes into the cluster group, a self-referencing
group, EFA where the type has it, the AMI's architecture among the type's, gzip user data within 16,384 bytes,
an instance profile whenever the machine needs credentials.
"""

from __future__ import annotations

import gzip
import os
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from gpuplan.errors import UserError
from gpuplan.providers.aws.image import DLAMI_PARAMETERS
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.aws.ranks import TAG_MASTER_ADDR, TAG_NODE_IPS, node_ips_tags
from gpuplan.providers.aws.rules import DEFAULT_AMI_PARAMETER, TAG_NODE_RANK
from gpuplan.providers.aws.userdata import USER_DATA_LIMIT, compress
from gpuplan.providers.base import TAG_RUN_ID, InstanceState, LaunchRequest, ProviderError

from support.awsmoto import (
    Clients,
    Injector,
    create_instance_profile,
    inject,
    register_test_ami,
    serve,
    user_data_of,
)

RUN = "r-0123456789"
SCRIPT = "#!/bin/bash\necho 'same script on every node'\n"


@dataclass
class Env:
    session: Any
    clients: Clients
    amis: dict[str, str]
    runs: list[dict[str, Any]] = field(default_factory=list)  # RunInstances as sent (query parameters)
    created_groups: list[dict[str, Any]] = field(default_factory=list)
    deleted_groups: list[dict[str, Any]] = field(default_factory=list)

    def ec2(self) -> Any:
        return self.clients("ec2", "us-east-1")


@pytest.fixture
def env(aws_session: Any, aws_clients: Clients, moto_env: dict[str, str]) -> Env:
    return Env(aws_session, aws_clients, moto_env)


def provider(env: Env, *, before_delete: Injector | None = None, **config: Any) -> AwsProvider:
    """An AwsProvider on moto whose RunInstances and placement-group calls are recorded (`before_delete` may fail
    DeletePlacementGroup calls first)."""
    config.setdefault("session", env.session)
    if "ami_parameter" not in config:
        config.setdefault("image_id", env.amis["us-east-1"])
    p = AwsProvider(waiter_delay=0.01, **config)
    client = p.client("ec2", "us-east-1")
    # RunInstances goes through the launch client (no botocore retries: gpuplan.providers.aws.launch_call).
    inject(p.launch_client("us-east-1"), "RunInstances", Injector("unused", when=lambda _: False, calls=env.runs),
           server=False)
    # moto does not implement placement groups: answer with EC2's documented response shapes.
    serve(client, "CreatePlacementGroup", {"PlacementGroup": {"GroupName": f"gpuplan-{RUN}", "Strategy": "cluster",
                                                              "State": "available"}}, env.created_groups)
    if before_delete is not None:  # botocore runs `register_first` handlers in the order they were registered
        inject(client, "DeletePlacementGroup", before_delete, server=False)
    serve(client, "DeletePlacementGroup", {}, env.deleted_groups)
    return p


def request(**overrides: Any) -> LaunchRequest:
    values: dict[str, Any] = dict(run_id=RUN, name="llama", command="torchrun train.py", run_dir="/tmp/x",
                                  instance_type="p4d.24xlarge", region="us-east-1", zones=("us-east-1b",),
                                  gpu="A100-40GB", gpus_per_node=8, nodes=2, price_per_hour=Decimal("32.77"),
                                  boot_script=SCRIPT)
    values.update(overrides)
    return LaunchRequest(**values)


def raw(env: Env, instance_id: str) -> dict[str, Any]:
    return dict(env.ec2().describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0])


def tags(item: dict[str, Any]) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in item.get("Tags", [])}


def sent(params: dict[str, Any], prefix: str) -> list[str]:
    """Values of a serialised list parameter (`SecurityGroupId.1`, `SecurityGroupId.2`, ...)."""
    out, n = [], 1
    while f"{prefix}.{n}" in params:
        out.append(params[f"{prefix}.{n}"])
        n += 1
    return out


# ---- item 5: multi-node -----------------------------------------------------------------------------------------


def test_all_nodes_start_in_one_call_into_the_cluster_group_and_learn_rank_and_master_from_tags(env: Env) -> None:
    p = provider(env)
    nodes = p.launch(request(nodes=3))
    [call] = env.runs  # ONE RunInstances for the whole run (AWS: one launch request for a cluster group)
    assert call["MinCount"] == call["MaxCount"] == "3"  # all or nothing
    assert call["Placement.GroupName"] == f"gpuplan-{RUN}" and call["Placement.AvailabilityZone"] == "us-east-1b"
    [group] = env.created_groups
    assert group["Strategy"] == "cluster" and group["GroupName"] == f"gpuplan-{RUN}"
    assert group["TagSpecification.1.ResourceType"] == "placement-group"
    assert call["MetadataOptions.InstanceMetadataTags"] == "enabled"  # the boot script reads the tags from IMDS

    assert [n.node_rank for n in nodes] == [0, 1, 2]
    by_index = {int(raw(env, n.instance_id)["AmiLaunchIndex"]): raw(env, n.instance_id) for n in nodes}
    master = by_index[0]["PrivateIpAddress"]
    for index, item in by_index.items():
        assert tags(item)[TAG_NODE_RANK] == str(index)  # rank = launch index in the one request
        assert tags(item)[TAG_MASTER_ADDR] == master  # rank 0's private address, on every node
        # Every node's private address, rank order, on every node: GPUPLAN_NODE_IPS / SKYPILOT_NODE_IPS.
        assert tags(item)[TAG_NODE_IPS] == ",".join(by_index[i]["PrivateIpAddress"] for i in range(3))
        assert user_data_of(env.ec2(), item["InstanceId"]) == SCRIPT  # the same script everywhere
    # Retried (a crash after the call): the same machines, no second RunInstances.
    again = provider(env).launch(request(nodes=3))
    assert [n.instance_id for n in again] == [n.instance_id for n in nodes] and len(env.runs) == 1


def test_the_group_lets_nodes_reach_each_other_and_nothing_else(env: Env) -> None:
    p = provider(env)
    [node, _] = p.launch(request(instance_type="g5.xlarge", gpus_per_node=1))
    [call] = env.runs
    group_ids = sent(call, "SecurityGroupId")
    assert group_ids == [g["GroupId"] for g in raw(env, node.instance_id)["SecurityGroups"]]
    [group] = env.ec2().describe_security_groups(GroupIds=group_ids)["SecurityGroups"]
    gid = group["GroupId"]
    # Rank 1 reaches rank 0's rendezvous port only through a rule naming the group itself (AWS: members of a
    # group do not talk unless a rule allows it); no address range is open.
    assert [(r["IpProtocol"], [g["GroupId"] for g in r["UserIdGroupPairs"]], r["IpRanges"]) for r in
            group["IpPermissions"]] == [("-1", [gid], [])]
    assert any(r["IpProtocol"] == "-1" and [g["GroupId"] for g in r["UserIdGroupPairs"]] == [gid]
               for r in group["IpPermissionsEgress"])
    assert "NetworkInterface.1.InterfaceType" not in call  # g5 has no EFA: plain subnet + groups


def test_a_group_made_without_the_self_rule_gets_it(env: Env) -> None:
    vpc = env.ec2().describe_vpcs(Filters=[{"Name": "is-default", "Values": ["true"]}])["Vpcs"][0]["VpcId"]
    old = env.ec2().create_security_group(GroupName="gpuplan", Description="old gpuplan", VpcId=vpc)["GroupId"]
    provider(env).launch(request(nodes=1))
    [group] = env.ec2().describe_security_groups(GroupIds=[old])["SecurityGroups"]
    assert [[g["GroupId"] for g in r["UserIdGroupPairs"]] for r in group["IpPermissions"]] == [[old]]


def test_efa_interface_on_types_that_support_it(env: Env) -> None:
    supported = env.ec2().describe_instance_types(InstanceTypes=["p4d.24xlarge"])["InstanceTypes"][0]
    assert supported["NetworkInfo"]["EfaSupported"] is True
    p = provider(env)
    nodes = p.launch(request(nodes=2))
    [call] = env.runs
    # The primary an ENA interface, then one EFA-only device per network card (issue 32: p4d has 4).
    assert call["NetworkInterface.1.InterfaceType"] == "interface"
    assert call["NetworkInterface.1.DeviceIndex"] == "0"
    assert [call[f"NetworkInterface.{n}.InterfaceType"] for n in range(2, 6)] == ["efa-only"] * 4
    groups = sent(call, "NetworkInterface.1.SecurityGroupId")
    assert groups and "SecurityGroupId.1" not in call and "SubnetId" not in call  # carried by the interface
    [group] = env.ec2().describe_security_groups(GroupIds=groups)["SecurityGroups"]
    gid = group["GroupId"]
    # EFA: "a security group that allows all inbound and outbound traffic to and from the security group itself"
    assert any([g["GroupId"] for g in r["UserIdGroupPairs"]] == [gid] for r in group["IpPermissions"])
    assert any([g["GroupId"] for g in r["UserIdGroupPairs"]] == [gid] for r in group["IpPermissionsEgress"])
    assert len(nodes) == 2


def test_a_single_node_launch_stays_simple(env: Env) -> None:
    p = provider(env)
    [node] = p.launch(request(nodes=1))
    [call] = env.runs
    assert call["MinCount"] == call["MaxCount"] == "1"
    assert "Placement.GroupName" not in call and not env.created_groups  # no cluster group for one machine
    assert "NetworkInterface.1.InterfaceType" not in call  # no EFA for one machine, even on p4d
    assert tags(raw(env, node.instance_id))[TAG_NODE_RANK] == "0"
    assert TAG_MASTER_ADDR not in tags(raw(env, node.instance_id))


def test_nodes_that_cannot_be_tagged_are_all_terminated(env: Env) -> None:
    p = provider(env)
    failing = Injector("UnauthorizedOperation", "not allowed to CreateTags")
    inject(p.client("ec2", "us-east-1"), "CreateTags", failing, server=False)
    with pytest.raises(ProviderError):
        p.launch(request(nodes=2))
    assert failing.failed == 1
    assert p.list_tagged() == []  # nothing left billing
    states = {i["State"]["Name"] for r in env.ec2().describe_instances(
        Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": [RUN]}])["Reservations"] for i in r["Instances"]}
    assert states == {"terminated"}
    assert env.deleted_groups and env.deleted_groups[-1]["GroupName"] == f"gpuplan-{RUN}"


def test_a_launch_that_died_before_tagging_is_finished_on_retry(env: Env) -> None:
    p = provider(env)
    untagged = p._run(request(nodes=2), "us-east-1", "us-east-1b", count=2, user_data=SCRIPT)
    assert all(TAG_NODE_RANK not in tags(raw(env, n.instance_id)) for n in untagged)
    nodes = provider(env).launch(request(nodes=2))
    assert sorted(n.instance_id for n in nodes) == sorted(n.instance_id for n in untagged)
    master = raw(env, nodes[0].instance_id)["PrivateIpAddress"]
    assert [tags(raw(env, n.instance_id))[TAG_MASTER_ADDR] for n in nodes] == [master, master]


def test_a_run_left_with_part_of_its_nodes_is_ended_not_topped_up(env: Env) -> None:
    p = provider(env)
    nodes = p.launch(request(nodes=2))
    env.ec2().terminate_instances(InstanceIds=[nodes[1].instance_id])  # e.g. one node went away
    with pytest.raises(ProviderError) as info:
        provider(env).launch(request(nodes=2))
    assert info.value.code == "IncompleteNodes" and len(env.runs) == 1  # no second RunInstances
    assert p.list_tagged() == []  # the remaining node does not bill alone


def test_teardown_deletes_the_placement_group_once_the_machines_are_gone(env: Env) -> None:
    in_use = Injector("InvalidPlacementGroup.InUse", "The specified placement group is in use.",
                      when=lambda _: in_use.failed == 0)
    p = provider(env, before_delete=in_use)
    nodes = p.launch(request(nodes=2))
    p.terminate([n.instance_id for n in nodes])
    assert {i.state for i in p.describe([n.instance_id for n in nodes])} == {InstanceState.TERMINATED}
    assert in_use.failed == 1  # EC2 still saw the group in use once: retried, then deleted
    assert [c["GroupName"] for c in env.deleted_groups] == [f"gpuplan-{RUN}"]


# ---- item 6: architecture -----------------------------------------------------------------------------------------


def _ssm_answers(p: AwsProvider, values: dict[str, str]) -> list[str]:
    """moto's SSM has no DLAMI parameters (and refuses to create /aws/ ones): answer GetParameter for them."""
    from botocore.awsrequest import AWSResponse

    asked: list[str] = []

    def handler(params: dict[str, Any], **_: Any) -> Any:
        import json

        name = json.loads(params["body"])["Name"] if isinstance(params.get("body"), (str, bytes)) else \
            params["body"]["Name"]
        asked.append(name)
        if name not in values:
            return None
        return AWSResponse("https://ssm.amazonaws.com/", 200, {}, None), {
            "Parameter": {"Name": name, "Type": "String", "Value": values[name]}}

    p.client("ssm", "us-east-1").meta.events.register_first("before-call.ssm.GetParameter", handler)
    return asked


def _arm_image(env: Env) -> str:
    return register_test_ami(env.ec2(), "arm64")


@pytest.mark.parametrize("instance_type", ["g5g.xlarge", "g5.xlarge"])
def test_the_default_image_matches_the_instance_types_architecture(env: Env, instance_type: str) -> None:
    arm = _arm_image(env)
    p = provider(env, ami_parameter=DEFAULT_AMI_PARAMETER)
    asked = _ssm_answers(p, {DLAMI_PARAMETERS["x86_64"]: env.amis["us-east-1"], DLAMI_PARAMETERS["arm64"]: arm})
    p.launch(request(nodes=1, instance_type=instance_type, gpus_per_node=1))
    [call] = env.runs
    wanted = env.ec2().describe_instance_types(InstanceTypes=[instance_type])["InstanceTypes"][0][
        "ProcessorInfo"]["SupportedArchitectures"]
    image_arch = env.ec2().describe_images(ImageIds=[call["ImageId"]])["Images"][0]["Architecture"]
    assert image_arch in wanted  # EC2 refuses a mismatch; moto would not
    assert asked == [DLAMI_PARAMETERS["arm64" if "arm64" in wanted else "x86_64"]]


def test_a_configured_image_of_the_wrong_architecture_is_refused_before_run_instances(env: Env) -> None:
    p = provider(env)  # image_id: the x86_64 test AMI
    with pytest.raises(ProviderError, match="arm64") as info:
        p.launch(request(nodes=1, instance_type="g5g.xlarge", gpus_per_node=1))
    assert info.value.code == "ArchitectureMismatch" and env.runs == []
    with pytest.raises(UserError, match="x86_64"):
        p.check_launch(request(nodes=1, instance_type="g5g.xlarge", gpus_per_node=1))


def test_check_launch_says_which_image_and_architecture(env: Env) -> None:
    check = provider(env).check_launch(request(nodes=1, instance_type="g5.xlarge", gpus_per_node=1))
    assert check.details["machine"]["architecture"] == "x86_64"
    assert check.details["machine"]["image_id"] == env.amis["us-east-1"]
    assert any("x86_64" in line and "g5.xlarge" in line for line in check.notes)


# ---- item 7: instance profile -------------------------------------------------------------------------------------


def test_a_launch_needing_credentials_without_a_profile_is_refused(env: Env) -> None:
    with pytest.raises(UserError, match=r"instance profile.*secrets.*gpuplan setup aws"):
        provider(env).check_launch(request(nodes=1, secrets={"HF_TOKEN": ""}))
    with pytest.raises(UserError, match="s3://runs-bucket"):
        provider(env, bucket="runs-bucket").check_launch(request(nodes=1))
    with pytest.raises(UserError, match="does not exist"):
        provider(env, instance_profile="nope").check_launch(request(nodes=1, secrets={"HF_TOKEN": ""}))
    provider(env).check_launch(request(nodes=1))  # nothing needs credentials: no profile needed
    with pytest.raises(ProviderError, match="instance profile") as info:  # and launch itself never starts one
        provider(env).launch(request(nodes=1, secrets={"HF_TOKEN": "x"}))
    assert info.value.code == "NoInstanceProfile"
    assert env.runs == [] and env.clients("ssm").describe_parameters()["Parameters"] == []


def test_a_profile_without_a_role_is_refused(env: Env) -> None:
    env.clients("iam").create_instance_profile(InstanceProfileName="empty")
    with pytest.raises(UserError, match="no role"):
        provider(env, instance_profile="empty").check_launch(request(nodes=1, secrets={"HF_TOKEN": ""}))


def test_the_profile_is_attached_when_secrets_or_outputs_need_it(env: Env) -> None:
    name = create_instance_profile(env.clients("iam"))
    p = provider(env, instance_profile=name, bucket="runs-bucket")
    check = p.check_launch(request(nodes=1, secrets={"HF_TOKEN": "x"}))
    assert check.details["instance_profile"] == name
    p.launch(request(nodes=1, secrets={"HF_TOKEN": "x"}))
    [call] = env.runs
    assert call["IamInstanceProfile.Name"] == name


# ---- item 8: user data ------------------------------------------------------------------------------------------


def test_user_data_is_gzip_within_16_kib_and_unpacks_to_the_script(env: Env) -> None:
    script = SCRIPT + "".join(f"export VAR_{i}='a fairly repetitive value number {i}'\n" for i in range(600))
    assert len(script.encode()) > USER_DATA_LIMIT  # would be refused raw
    p = provider(env)
    [node] = p.launch(request(nodes=1, boot_script=script))
    assert user_data_of(env.ec2(), node.instance_id) == script


def test_user_data_too_big_even_compressed_is_refused_before_any_call(env: Env) -> None:
    noise = os.urandom(20000).hex()  # does not compress below 16 KB
    p = provider(env)
    with pytest.raises(UserError, match="16384"):
        p.check_launch(request(nodes=1, boot_script=SCRIPT + f"# {noise}\n"))
    with pytest.raises(ProviderError, match="16384") as info:
        p.launch(request(nodes=1, boot_script=SCRIPT + f"# {noise}\n"))
    assert info.value.code == "UserDataTooLarge" and env.runs == []
    assert gzip.decompress(compress(SCRIPT).payload).decode() == SCRIPT


def test_orchestration_renders_the_tag_reading_script_for_a_multi_node_aws_launch(env: Env) -> None:
    from gpuplan.launching.placements import with_boot_scripts

    p = provider(env, bucket="runs-bucket", instance_profile=create_instance_profile(env.clients("iam")))
    rendered = with_boot_scripts(request(nodes=2, boot_script=None, options={"argv": ["torchrun", "train.py"]}), p)
    nodes = p.launch(rendered)
    for node in nodes:
        script = user_data_of(env.ec2(), node.instance_id)
        assert f"RANK_TAG={TAG_NODE_RANK}" in script and f"MASTER_TAG={TAG_MASTER_ADDR}" in script
        assert f"STORAGE_URL=s3://runs-bucket/gpuplan/{RUN}\n" in script  # /node-<rank> added at boot
        assert "export NODE_RANK=" not in script


def test_with_an_explicit_x86_image_planning_leaves_arm_types_out(env: Env) -> None:
    """EC2 refuses an AMI of another architecture than the type's (image.py); with an explicit AMI the planner
    must not choose such a type (g5g is arm64), and with the per-architecture DLAMI parameter every type is fine."""
    explicit = provider(env)  # image_id: the registered x86_64 test AMI
    assert explicit.usable_instance_type("g5.xlarge") is True
    assert explicit.usable_instance_type("g5g.xlarge") is False
    by_parameter = provider(env, ami_parameter="/aws/service/deeplearning/ami/x86_64/test/latest/ami-id")
    assert by_parameter.image_id is None
    assert by_parameter.usable_instance_type("g5g.xlarge") is True


def test_a_long_node_address_list_continues_in_more_tags_of_256_characters() -> None:
    addresses = [f"172.31.{i}.{100 + i}" for i in range(40)]  # 13 characters each, 16 or 17 to a tag
    chunks = node_ips_tags(addresses)
    assert list(chunks) == [TAG_NODE_IPS, f"{TAG_NODE_IPS}-1", f"{TAG_NODE_IPS}-2"]
    assert all(len(v) <= 256 for v in chunks.values())
    assert ",".join(chunks.values()).split(",") == addresses
