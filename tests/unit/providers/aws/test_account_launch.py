"""Issue 32 on the AWS provider, through moto behind the strict layer's account rules (tests/support/strict_aws/
account.py): a new instance profile waited for on the same placement (item 1), secrets in the SSM tier their size
needs (item 2)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from gpuplan.errors import UserError
from gpuplan.providers.aws import iam as aws_iam
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import LaunchRequest, PlacementError, ProviderError

from support.strict_aws.fixture import StrictAwsServer

SCRIPT = "#!/bin/bash\necho hi\n"


def request(run_id: str, **extra: object) -> LaunchRequest:
    fields: dict[str, object] = {"run_id": run_id, "name": "acct", "command": "true", "run_dir": "",
                                 "instance_type": "g5.xlarge", "region": "us-east-1", "boot_script": SCRIPT}
    fields.update(extra)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


def fresh_profile(strict_aws: StrictAwsServer, propagation: int) -> str:
    """`gpuplan setup aws --create`'s profile, made through the layer, which EC2 then misses `propagation` times."""
    strict_aws.layer.account.profile_propagation = propagation
    return aws_iam.create_profile(strict_aws.client("iam"), bucket=None).instance_profile


def test_a_new_instance_profile_is_waited_for_on_the_same_placement(strict_aws: StrictAwsServer,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplan.providers.aws import launch_call

    profile = fresh_profile(strict_aws, propagation=3)
    waits: list[float] = []
    monkeypatch.setattr(launch_call, "time", SimpleNamespace(sleep=waits.append))  # this module's sleeps only
    provider = AwsProvider(instance_profile=profile, profile_wait=1.2, waiter_delay=0.01)
    [node] = provider.launch(request("r-prof", secrets={"HF_TOKEN": "v"}))
    sent = strict_aws.layer.calls("RunInstances")
    assert [c.status for c in sent] == [400, 400, 400, 200]
    assert len({(c.params["ClientToken"], c.params["Placement.AvailabilityZone"]) for c in sent}) == 1
    assert waits == pytest.approx([0.1, 0.1, 0.1])  # profile_wait / 12 each, not a 60 s sleep in a test
    assert node.instance_type == "g5.xlarge"


def test_a_profile_ec2_never_sees_ends_the_launch_instead_of_failing_over(strict_aws: StrictAwsServer) -> None:
    profile = fresh_profile(strict_aws, propagation=100)
    provider = AwsProvider(instance_profile=profile, profile_wait=0.06, waiter_delay=0.01)
    with pytest.raises(ProviderError) as caught:
        provider.launch(request("r-never", secrets={"HF_TOKEN": "v"}))
    assert not isinstance(caught.value, PlacementError)  # no other zone or type would do better
    assert "Invalid IAM Instance Profile" in str(caught.value)
    assert len(strict_aws.layer.calls("RunInstances")) == 13  # the first try and 12 retries within the wait


def test_the_missing_profile_hint_names_the_flag_that_grants_storage(strict_aws: StrictAwsServer) -> None:
    provider = AwsProvider(waiter_delay=0.01)
    storage = request("r-hint", options={"run_storage_url": "s3://ckpt/team/r-hint"})
    with pytest.raises(UserError) as caught:
        provider.check_launch(storage)
    assert "gpuplan setup aws --create --storage s3://ckpt/team/r-hint" in str(caught.value)
    assert "--bucket" not in str(caught.value)


def test_secrets_get_the_tier_their_size_needs(strict_aws: StrictAwsServer) -> None:
    profile = fresh_profile(strict_aws, propagation=0)
    provider = AwsProvider(instance_profile=profile, waiter_delay=0.01)
    secrets = {"SMALL": "s" * 4096, "SA_JSON": "j" * 6000}
    launch = request("r-tier", secrets=secrets)
    check = provider.check_launch(launch)
    assert any("SA_JSON over 4 KB" in n and "$0.05" in n for n in check.notes)
    provider.launch(launch)
    ssm = strict_aws.client("ssm")
    tiers = {p["Name"]: p["Tier"] for p in ssm.describe_parameters()["Parameters"]}
    assert tiers == {"/gpuplan/r-tier/SMALL": "Standard", "/gpuplan/r-tier/SA_JSON": "Advanced"}
    assert ssm.get_parameter(Name="/gpuplan/r-tier/SA_JSON", WithDecryption=True)["Parameter"]["Value"] == "j" * 6000


def test_a_secret_over_8_kb_is_refused_before_anything_starts(strict_aws: StrictAwsServer) -> None:
    provider = AwsProvider(instance_profile="any", waiter_delay=0.01)
    with pytest.raises(UserError) as caught:
        provider.check_launch(request("r-huge", secrets={"KUBECONFIG": "k" * 9000}))
    message = str(caught.value)
    assert "KUBECONFIG is 9000 bytes" in message and "8192" in message and "kkkk" not in message
    assert "\n" not in message
    assert strict_aws.layer.calls("RunInstances") == [] and strict_aws.layer.calls("AmazonSSM.PutParameter") == []


# ---- item 6: the role's permissions, and one statement per storage prefix -----------------------------------------


def test_a_second_storage_setup_keeps_the_first_prefix(strict_aws: StrictAwsServer) -> None:
    iam = strict_aws.client("iam")
    aws_iam.create_profile(iam, bucket="outs", storage="s3://ckpt/one")
    policy = aws_iam.create_profile(iam, bucket=None, storage="s3://ckpt/two").policy
    objects = {s["Resource"] for s in policy["Statement"] if s["Action"] == ["s3:GetObject", "s3:PutObject"]}
    assert objects == {"arn:aws:s3:::ckpt/one/*", "arn:aws:s3:::ckpt/two/*"}
    prefixes = [s["Condition"]["StringLike"]["s3:prefix"] for s in policy["Statement"]
                if s["Action"] == "s3:ListBucket"]
    assert sorted(prefixes) == [["one/*"], ["two/*"]]
    assert "arn:aws:s3:::outs/gpuplan/*" in {s["Resource"] for s in policy["Statement"]}  # outputs kept too
    assert aws_iam.current_policy(iam, aws_iam.DEFAULT_NAME) == policy
    again = aws_iam.create_profile(iam, bucket=None, storage="s3://ckpt/two").policy
    assert again["Statement"] == policy["Statement"]  # the same setup again adds nothing


def test_a_role_made_for_another_prefix_is_refused_before_launch(strict_aws: StrictAwsServer) -> None:
    """The role exists and has a role, so the old check passed; the simulator says it cannot write the run's
    storage prefix, which the machine would learn only as AccessDenied while billing."""
    profile = aws_iam.create_profile(strict_aws.client("iam"), bucket=None, storage="s3://ckpt/other").instance_profile
    provider = AwsProvider(instance_profile=profile, waiter_delay=0.01)
    launch = request("r-role", options={"run_storage_url": "s3://ckpt/team/r-role"})
    with pytest.raises(UserError) as caught:
        provider.check_launch(launch)
    message = str(caught.value)
    assert "may not s3:PutObject on arn:aws:s3:::ckpt/team/r-role/checkpoint" in message
    assert "gpuplan setup aws --create --storage s3://ckpt/team/r-role" in message and "\n" not in message
    aws_iam.create_profile(strict_aws.client("iam"), bucket=None, storage="s3://ckpt/team")
    check = provider.check_launch(launch)
    assert any("may do all 3 thing(s)" in n for n in check.notes)
    assert strict_aws.layer.calls("SimulatePrincipalPolicy")


def test_without_permission_to_simulate_the_role_is_not_checked(strict_aws: StrictAwsServer) -> None:
    from gpuplan.providers.aws.policy import launch_policy

    profile = aws_iam.create_profile(strict_aws.client("iam"), bucket=None, storage="s3://ckpt/other").instance_profile
    policy = launch_policy()
    policy["Statement"] = [dict(s, Action=[a for a in s["Action"] if a != "iam:SimulatePrincipalPolicy"])
                           for s in policy["Statement"]]
    strict_aws.layer.account.caller_policy = policy
    provider = AwsProvider(instance_profile=profile, waiter_delay=0.01)
    check = provider.check_launch(request("r-nosim", options={"run_storage_url": "s3://ckpt/team/r-nosim"}))
    assert any("permissions not checked" in n and "AccessDenied" in n for n in check.notes)


# ---- item 3: one EFA device per network card -----------------------------------------------------------------------


@pytest.mark.parametrize(("instance_type", "efa_devices"), [("p5.48xlarge", 32), ("p4d.24xlarge", 4)])
def test_multi_node_gets_an_efa_device_per_network_card(strict_aws: StrictAwsServer, instance_type: str,
                                                        efa_devices: int) -> None:
    """p5.48xlarge has 32 EFA-capable cards, p4d.24xlarge 4; one interface left NCCL on 1/32 (1/4) of the fabric."""
    from support.strict_aws.efa import efa_devices as count
    from support.strict_aws.efa import interfaces_of

    provider = AwsProvider(waiter_delay=0.01)
    nodes = provider.launch(request(f"r-efa-{efa_devices}", instance_type=instance_type, nodes=2))
    assert len(nodes) == 2
    [sent] = [c for c in strict_aws.layer.calls("RunInstances") if c.status == 200]
    assert count(sent.params) == efa_devices
    nics = interfaces_of(sent.params)
    assert (nics[0]["NetworkCardIndex"], nics[0]["DeviceIndex"], nics[0]["InterfaceType"]) == ("0", "0", "interface")
    assert sorted(int(n["NetworkCardIndex"]) for n in nics if n["InterfaceType"] == "efa-only") == list(
        range(efa_devices))
    assert all(strict_aws.efa_ready(n.instance_id) for n in nodes)


def test_p6_b300_gets_its_16_efa_devices_on_cards_1_to_16(strict_aws: StrictAwsServer) -> None:
    """p6-b300.48xlarge: card 0 is ENA only (InterfaceTypes ["interface"]), cards 1-16 offer EFA at 400 Gbit/s each
    (the 6,400 its network row counts). EC2 refuses an EFA on card 0 (the strict layer's rule 15); gpuplan asked for
    exactly that, so a multi-node p6-b300 run could not launch."""
    from support.strict_aws.efa import efa_devices as count
    from support.strict_aws.efa import interfaces_of

    nodes = AwsProvider(waiter_delay=0.01).launch(request("r-efa-b300", instance_type="p6-b300.48xlarge", nodes=2))
    assert len(nodes) == 2
    [sent] = [c for c in strict_aws.layer.calls("RunInstances") if c.status == 200]
    nics = interfaces_of(sent.params)
    assert (nics[0]["NetworkCardIndex"], nics[0]["DeviceIndex"], nics[0]["InterfaceType"]) == ("0", "0", "interface")
    assert count(sent.params) == 16 and [(int(n["NetworkCardIndex"]), n["DeviceIndex"]) for n in nics[1:]] == [
        (card, "0") for card in range(1, 17)]
