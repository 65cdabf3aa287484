"""The AWS provider against moto in-process: what a launch asks EC2 for, idempotency, states, errors, teardown."""

from __future__ import annotations

from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import pytest

from gpuplan.providers.aws.launch_call import client_token
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.aws.rules import DEFAULT_AMI_PARAMETER, map_state
from gpuplan.providers.base import (
    TAG_CREATED_BY,
    TAG_NAME,
    TAG_PROJECT,
    TAG_RUN_ID,
    AuthError,
    CapacityError,
    InstanceState,
    LaunchRequest,
    PlacementError,
    ProviderError,
    QuotaError,
)
from gpuplan.providers.registry import get_provider

from support.awsmoto import TEST_AMI_PARAMETER, Clients, Injector, inject, publish_test_ami, user_data_of


@dataclass
class Moto:
    session: Any = None
    clients: Clients | None = None
    amis: dict[str, str] = field(default_factory=dict)


M = Moto()


@pytest.fixture(autouse=True)
def _moto(aws_session: Any, aws_clients: Clients, moto_env: dict[str, str]) -> None:
    M.session, M.clients, M.amis = aws_session, aws_clients, moto_env

BOOT = "#!/bin/bash\nset -euo pipefail\necho 'hello from gpuplan'\n"


def request(**overrides: Any) -> LaunchRequest:
    values: dict[str, Any] = dict(run_id="r-0123456789", name="tiny-gpt", command="python train.py", run_dir="/tmp/x",
                                  project="research", instance_type="p4d.24xlarge", region="us-east-1",
                                  zones=("us-east-1b",), gpu="A100-40GB", gpus_per_node=8,
                                  price_per_hour=Decimal("32.7726"), boot_script=BOOT, max_hours=2.0)
    values.update(overrides)
    return LaunchRequest(**values)


def provider(**config: Any) -> AwsProvider:
    config.setdefault("session", M.session)
    if "ami_parameter" not in config:
        config.setdefault("image_id", M.amis["us-east-1"])
    config.setdefault("waiter_delay", 0.05)
    return AwsProvider(**config)


def ec2(region: str = "us-east-1") -> Any:
    assert M.clients is not None
    return M.clients("ec2", region)


def raw_instance(instance_id: str, region: str = "us-east-1") -> dict[str, Any]:
    return ec2(region).describe_instances(InstanceIds=[instance_id])["Reservations"][0]["Instances"][0]


def tags_of(params: dict[str, Any], prefix: str) -> dict[str, str]:
    """Tags of one TagSpecification in serialised query parameters."""
    out, n = {}, 1
    while f"{prefix}.Tag.{n}.Key" in params:
        out[params[f"{prefix}.Tag.{n}.Key"]] = params[f"{prefix}.Tag.{n}.Value"]
        n += 1
    return out


def test_registered_under_aws_and_bills_per_second_with_a_minute_minimum() -> None:
    aws = get_provider("aws", region="eu-west-1")
    assert isinstance(aws, AwsProvider)
    assert aws.region == "eu-west-1" and aws.min_billed_seconds == 60


def test_launch_tags_instances_and_volumes_and_locks_the_machine_down() -> None:
    p = provider()
    [inst] = p.launch(request())
    assert inst.provider == "aws" and inst.cloud == "aws" and inst.region == "us-east-1"
    assert inst.zone == "us-east-1b" and inst.instance_type == "p4d.24xlarge"
    assert inst.run_id == "r-0123456789" and inst.state in (InstanceState.PENDING, InstanceState.RUNNING)
    assert inst.price_per_hour == Decimal("32.7726") and inst.gpu_count == 8 and inst.launched_at is not None

    raw = raw_instance(inst.instance_id)
    tags = {t["Key"]: t["Value"] for t in raw["Tags"]}
    assert tags[TAG_RUN_ID] == "r-0123456789" and tags[TAG_NAME] == "tiny-gpt"
    assert tags[TAG_PROJECT] == "research" and tags[TAG_CREATED_BY] == "gpuplan"

    volumes = ec2().describe_volumes(Filters=[{"Name": "attachment.instance-id",
                                               "Values": [inst.instance_id]}])["Volumes"]
    assert volumes, "the root volume is attached"
    for volume in volumes:
        vtags = {t["Key"]: t["Value"] for t in volume.get("Tags", [])}
        assert vtags[TAG_RUN_ID] == "r-0123456789" and vtags[TAG_CREATED_BY] == "gpuplan"

    assert raw["MetadataOptions"]["HttpTokens"] == "required"  # IMDSv2 only
    assert raw["MetadataOptions"]["HttpEndpoint"] == "enabled"
    behaviour = ec2().describe_instance_attribute(InstanceId=inst.instance_id,
                                                  Attribute="instanceInitiatedShutdownBehavior")
    assert behaviour["InstanceInitiatedShutdownBehavior"]["Value"] == "terminate"
    assert user_data_of(ec2(), inst.instance_id) == BOOT


def test_security_group_is_created_once_per_vpc_open_only_between_its_members() -> None:
    p = provider()
    [a] = p.launch(request(run_id="r-aaaaaaaaaa"))
    [b] = p.launch(request(run_id="r-bbbbbbbbbb", zones=("us-east-1c",)))
    groups = ec2().describe_security_groups(Filters=[{"Name": "group-name", "Values": ["gpuplan"]}])
    [group] = groups["SecurityGroups"]
    gid = group["GroupId"]
    # Inbound: all traffic from members of the group itself, nothing from any address (least privilege).
    assert [(p["IpProtocol"], [g["GroupId"] for g in p["UserIdGroupPairs"]], p.get("IpRanges"), p.get("Ipv6Ranges"))
            for p in group["IpPermissions"]] == [("-1", [gid], [], [])]
    # Outbound: EFA needs all traffic to the group itself too, besides the default all-outbound rule.
    assert any(p["IpProtocol"] == "-1" and [g["GroupId"] for g in p["UserIdGroupPairs"]] == [gid]
               for p in group["IpPermissionsEgress"])
    assert {t["Key"]: t["Value"] for t in group["Tags"]}[TAG_CREATED_BY] == "gpuplan"
    for inst in (a, b):
        assert [g["GroupId"] for g in raw_instance(inst.instance_id)["SecurityGroups"]] == [group["GroupId"]]


def test_ssh_is_opened_only_to_one_address_and_only_when_asked() -> None:
    p = provider()
    [inst] = p.launch(request(options={"ssh_from": "203.0.113.7"}))
    group_ids = [g["GroupId"] for g in raw_instance(inst.instance_id)["SecurityGroups"]]
    groups = ec2().describe_security_groups(GroupIds=group_ids)["SecurityGroups"]
    rules = [(perm["FromPort"], r["CidrIp"]) for g in groups for perm in g["IpPermissions"]
             for r in perm["IpRanges"]]
    assert rules == [(22, "203.0.113.7/32")]
    with pytest.raises(ProviderError, match="single address"):
        p.launch(request(run_id="r-cccccccccc", options={"ssh_from": "0.0.0.0/0"}))


def test_spot_goes_through_instance_market_options_one_time_terminate() -> None:
    calls: list[dict[str, Any]] = []
    p = provider()
    inject(p.launch_client("us-east-1"), "RunInstances",
           Injector("unused", when=lambda _: False, calls=calls), server=False)
    [inst] = p.launch(request(spot=True, options={"spot_max_price": "12.5"}))
    assert inst.spot
    assert calls[0]["InstanceMarketOptions.MarketType"] == "spot"
    assert calls[0]["InstanceMarketOptions.SpotOptions.SpotInstanceType"] == "one-time"
    assert calls[0]["InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior"] == "terminate"
    assert calls[0]["InstanceMarketOptions.SpotOptions.MaxPrice"] == "12.5"
    assert raw_instance(inst.instance_id).get("InstanceLifecycle") == "spot"


def test_relaunch_of_the_same_run_returns_the_existing_machines() -> None:
    """moto ignores ClientToken: the tag look-up before RunInstances is what stops a second set."""
    p = provider()
    first = p.launch(request(nodes=1))
    again = provider().launch(request(nodes=1))  # a fresh process: nothing cached
    assert [i.instance_id for i in again] == [i.instance_id for i in first]
    reservations = ec2().describe_instances(Filters=[{"Name": f"tag:{TAG_RUN_ID}", "Values": ["r-0123456789"]}])
    assert sum(len(r["Instances"]) for r in reservations["Reservations"]) == 1


def test_client_token_names_run_generation_attempt_zone_type_and_rank() -> None:
    calls: list[dict[str, Any]] = []
    p = provider()
    inject(p.launch_client("us-east-1"), "RunInstances",
           Injector("unused", when=lambda _: False, calls=calls), server=False)
    p.launch(request(options={"attempt": 3}))
    assert calls[0]["ClientToken"] == "r-0123456789.g0.a3.us-east-1b.p4d.24xlarge.nall"
    assert client_token("r-1", generation=2, attempt=1, zone="us-east-1c", instance_type="g5.xlarge",
                        rank=0) == "r-1.g2.a1.us-east-1c.g5.xlarge.n0"


@pytest.mark.parametrize(("code", "error"), [
    ("InsufficientInstanceCapacity", CapacityError),
    ("Unsupported", CapacityError),
    ("SpotMaxPriceTooLow", CapacityError),
    ("InstanceLimitExceeded", QuotaError),
    ("MaxSpotInstanceCountExceeded", QuotaError),
    ("VcpuLimitExceeded", QuotaError),
    ("UnauthorizedOperation", AuthError),
    ("AuthFailure", AuthError),
    ("InvalidParameterCombination", PlacementError),
    ("IdempotentParameterMismatch", ProviderError),
])
def test_ec2_errors_map_to_typed_errors(code: str, error: type[ProviderError]) -> None:
    p = provider()
    injector = inject(p.launch_client("us-east-1"), "RunInstances",
                      Injector(code, f"{code} from the test"), server=False)
    with pytest.raises(error) as info:
        p.launch(request())
    assert type(info.value) is error
    assert info.value.code == code and info.value.zone == "us-east-1b" and info.value.region == "us-east-1"
    assert code in str(info.value) and "us-east-1b" in str(info.value)
    assert injector.failed == 1
    assert p.list_tagged() == []  # the injected failure created nothing


def test_unknown_instance_type_is_refused_by_moto_validation() -> None:
    with pytest.raises(ProviderError, match="InvalidInstanceType"):
        provider().launch(request(instance_type="p9.imaginary"))


def test_default_ami_parameter_is_the_dlami_and_a_missing_one_is_a_clear_error() -> None:
    p = AwsProvider(session=M.session)
    assert p.ami_parameter == DEFAULT_AMI_PARAMETER
    assert "deeplearning" in DEFAULT_AMI_PARAMETER and "nvidia-driver" in DEFAULT_AMI_PARAMETER
    with pytest.raises(ProviderError, match="does not exist in us-east-1"):
        p.launch(request())


def test_ami_comes_from_the_ssm_parameter_unless_an_image_id_is_given() -> None:
    assert M.clients is not None
    publish_test_ami(M.clients("ssm"), M.amis["us-east-1"])
    [inst] = provider(ami_parameter=TEST_AMI_PARAMETER).launch(request())
    assert raw_instance(inst.instance_id)["ImageId"] == M.amis["us-east-1"]
    image = ec2().register_image(Name="other", RootDeviceName="/dev/xvda")["ImageId"]
    [other] = provider(ami_parameter="/no/such/parameter", image_id=image).launch(request(run_id="r-1111111111"))
    assert raw_instance(other.instance_id)["ImageId"] == image


def test_describe_maps_states_and_unknown_ids_come_back_terminated() -> None:
    p = provider()
    [inst] = p.launch(request())
    [seen, ghost] = p.describe([inst.instance_id, "i-0000000000000dead"])
    assert seen.state in (InstanceState.PENDING, InstanceState.RUNNING)
    assert ghost.state == InstanceState.TERMINATED and ghost.state_reason == "not found"


def test_state_mapping_knows_spot_interruptions() -> None:
    assert map_state("running", None) == InstanceState.RUNNING
    assert map_state("shutting-down", None) == InstanceState.STOPPING
    assert map_state("terminated", "Client.InstanceInitiatedShutdown") == InstanceState.TERMINATED
    assert map_state("terminated", "Server.SpotInstanceTermination") == InstanceState.PREEMPTED
    assert map_state("shutting-down", "Server.SpotInstanceTermination") == InstanceState.PREEMPTED
    assert map_state("weird", None) == InstanceState.UNKNOWN


def test_terminate_waits_for_terminated_and_is_idempotent() -> None:
    p = provider()
    nodes = [*p.launch(request(zones=("us-east-1a",))), *p.launch(request(run_id="r-2222222222"))]
    ids = [n.instance_id for n in nodes]
    p.terminate(ids)
    assert {i.state for i in p.describe(ids)} == {InstanceState.TERMINATED}
    assert {raw_instance(i)["State"]["Name"] for i in ids} == {"terminated"}
    p.terminate(ids)  # again: not an error
    p.terminate(["i-0000000000000dead"])
    assert p.list_tagged() == []


def test_list_tagged_searches_every_configured_region() -> None:
    p = provider(regions=["us-west-2"])
    [east] = p.launch(request(run_id="r-eeeeeeeeee"))
    [west] = p.launch(request(run_id="r-wwwwwwwwww", region="us-west-2", zones=("us-west-2a",),
                              options={"image_id": M.amis["us-west-2"]}))
    ec2().run_instances(ImageId=raw_instance(east.instance_id)["ImageId"], InstanceType="t3.micro",
                        MinCount=1, MaxCount=1)  # not gpuplan's: never listed
    fresh = provider(regions=["us-west-2"])
    assert {(i.instance_id, i.region, i.run_id) for i in fresh.list_tagged()} == {
        (east.instance_id, "us-east-1", "r-eeeeeeeeee"), (west.instance_id, "us-west-2", "r-wwwwwwwwww")}
    assert [i.instance_id for i in fresh.list_tagged("r-wwwwwwwwww")] == [west.instance_id]
    assert [i.region for i in fresh.describe([west.instance_id])] == ["us-west-2"]


def test_list_tagged_with_include_ended_adds_the_run_s_ended_machines() -> None:
    """Adoption (gpuplan.supervise.adopt) asks for a run's ended machines too: EC2 lists them for about an hour."""
    p = provider()
    [gone] = p.launch(request(run_id="r-eeeeeeeeee"))
    p.terminate([gone.instance_id])
    [live] = p.launch(request(run_id="r-eeeeeeeeee", options={"generation": 1}))  # as a spot relaunch does
    assert [i.instance_id for i in p.list_tagged("r-eeeeeeeeee")] == [live.instance_id]
    both = {i.instance_id: i for i in p.list_tagged("r-eeeeeeeeee", include_ended=True)}
    assert set(both) == {gone.instance_id, live.instance_id}
    assert both[gone.instance_id].state == InstanceState.TERMINATED and both[gone.instance_id].ended_at is not None
    with pytest.raises(ValueError, match="run id"):
        p.list_tagged(include_ended=True)  # reconcile's listing of everyone stays live-only


def test_ended_instances_carry_the_time_ec2_stopped_them() -> None:
    from gpuplan.providers.aws.rules import ended_at

    stamp = ended_at({"StateTransitionReason": "User initiated (2024-05-01 12:00:07 GMT)"})
    assert stamp.isoformat() == "2024-05-01T12:00:07+00:00"
    p = provider()
    [inst] = p.launch(request())
    p.terminate([inst.instance_id])
    [gone] = p.describe([inst.instance_id])
    assert gone.ended_at is not None and inst.launched_at is not None
    assert gone.ended_at >= inst.launched_at.replace(microsecond=0)
