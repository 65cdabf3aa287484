"""Issue 20's acceptance, end to end: the `gpuplan` CLI as a child process against moto behind the strict AWS layer
(tests/support/strict_aws/), which refuses what real EC2 refuses (zone ids as names, disabled regions, tokens,
user-data size, AMI architecture, tags, placement groups) and lets a test plant EC2's own errors.

Each launch either ends running in a later placement, or is refused with one line and exit 2 before anything
bills (no run recorded, no RunInstances sent).
"""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from gpuplan.providers.aws.policy import launch_policy

from support.clihelp import Result, run_subprocess
from support.run_storage import use_s3_storage
from support.strict_aws.fixture import StrictAwsServer

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
AMI_PARAMETER = "/gpuplan-test/dlami"  # an account's own AMI parameter: the public /aws/ names cannot be seeded

# Two regions, so an error that blocks a whole region still leaves a later placement.
JOB = """\
name: failover-drill
runtime: process
command: python train.py --steps 100
resources:
  gpu: A10G:1
  regions: [us-east-1, us-west-2]
limits:
  max_hours: 1
project: demo
"""


def gpuplan(*args: str, env: dict[str, str] | None = None) -> Result:
    return run_subprocess(*args, timeout=180, env=env)


@pytest.fixture
def per_region_ami(strict_aws: StrictAwsServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine image by parameter, in every region the catalog may choose (an explicit AMI id exists in one
    region only; AWS's public DLAMI parameters exist everywhere but moto cannot hold /aws/ names)."""
    from botocore.exceptions import ClientError

    from gpuplan.catalog import load_offers

    from support.awsmoto import register_test_ami

    for region in sorted({o.region for o in load_offers(clouds=["aws"]) if o.region}):
        try:
            image_id = strict_aws.amis.get(region) or register_test_ami(strict_aws.client("ec2", region))
        except ClientError:  # an opt-in region this account has not enabled: the layer refuses it, as EC2 does
            continue
        strict_aws.client("ssm", region).put_parameter(Name=AMI_PARAMETER, Value=image_id, Type="String")
    monkeypatch.delenv("GPUPLAN_AWS_IMAGE_ID", raising=False)
    monkeypatch.setenv("GPUPLAN_AWS_AMI_PARAMETER", AMI_PARAMETER)


@pytest.fixture
def drill(tmp_path: Path) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(JOB)
    return path


def _zone_names(strict_aws: StrictAwsServer, region: str) -> set[str]:
    zones = strict_aws.client("ec2", region).describe_availability_zones()["AvailabilityZones"]
    return {z["ZoneName"] for z in zones}


def _recorded_runs() -> list[dict[str, object]]:
    listed = gpuplan("runs", "--json")
    assert listed.exit_code == 0, listed.stderr
    return list(listed.json())


def test_tiny_gpt_example_launches_on_the_default_catalog_choice(strict_aws: StrictAwsServer, per_region_ami: None,
                                                                  tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The issue's first failure (`no default subnet in eus2-az1`): the catalog's zone ids reach EC2 as names."""
    use_s3_storage(monkeypatch, tmp_path)  # the example's `python tiny_gpt.py` needs its folder shipped
    # Issue 32 item 7: the on-demand + storage path needs nothing outside the documented launching-user policy.
    strict_aws.layer.account.caller_policy = launch_policy()
    launched = gpuplan("launch", str(EXAMPLES / "tiny-gpt.yaml"), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    [run] = [c for c in strict_aws.layer.calls("RunInstances") if c.status == 200]
    zone = run.params["Placement.AvailabilityZone"]
    assert zone in _zone_names(strict_aws, run.region)  # a name of this account's zones, never an id
    assert len(run.params["ClientToken"]) <= 64
    stopped = gpuplan("stop", launched.json()["run_id"])
    assert stopped.exit_code == 0, stopped.stderr
    assert strict_aws.layer.account.denied == []
    assert {"s3:PutObject", "ec2:RunInstances", "ec2:TerminateInstances"} <= _called(strict_aws)


def _called(strict_aws: StrictAwsServer) -> set[str]:
    """The IAM actions of every request the layer saw (rule 14's mapping)."""
    from support.strict_aws.account import s3_action

    return {f"{r.service}:{r.action}" if r.service in ("ec2", "iam") else
            s3_action(*r.action.split(" ", 1), "") if r.service == "s3" else r.action
            for r in strict_aws.layer.requests}


def test_llama_7b_example_two_spot_nodes_with_secrets(strict_aws: StrictAwsServer, per_region_ami: None,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """2 x 8 H100 spot with two secrets: refused (exit 2, nothing recorded or sent) while no instance profile can
    give the machines their secrets; after `gpuplan setup aws --create`, one RunInstances for both nodes into a
    cluster placement group, nodes that can reach each other, and credentials on the machines for SSM."""
    monkeypatch.setenv("HF_TOKEN", "hf-secret-value")
    monkeypatch.setenv("WANDB_API_KEY", "wandb-secret-value")
    spec = str(EXAMPLES / "llama-7b-aws.yaml")
    # Issue 32 item 7: spot, two nodes in a placement group with EFA, secrets, setup and teardown need nothing outside
    # the documented launching-user policy (rule 14 refuses anything else).
    strict_aws.layer.account.caller_policy = launch_policy()

    refused = gpuplan("launch", spec, "--provider", "aws", "-y", "--detach")
    assert refused.exit_code == 2, refused.stderr
    assert "instance profile" in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()[-1]) > 0
    assert _recorded_runs() == [] and strict_aws.layer.calls("RunInstances") == []

    # Issue 32 item 1: EC2 does not see the new profile for the first RunInstances (IAM propagation, strict layer rule
    # 11); the launch waits on the same placement with the same ClientToken instead of failing over, and finds the
    # profile in the config file `setup aws --create` wrote (no export).
    strict_aws.layer.account.profile_propagation = 2
    monkeypatch.setenv("GPUPLAN_AWS_PROFILE_WAIT", "0.6")  # 12 retries 0.05 s apart instead of 5 s
    created = gpuplan("setup", "aws", "--create", "--json")
    assert created.exit_code == 0, created.stderr
    profile = created.json()["instance_profile"]
    assert f'instance_profile = "{profile}"' in Path(created.json()["config_file"]).read_text()

    launched = gpuplan("launch", spec, "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    sent = strict_aws.layer.calls("RunInstances")
    assert [c.status for c in sent] == [400, 400, 200]  # refused twice while propagating, then started
    assert len({(c.region, c.params["ClientToken"], c.params["InstanceType"]) for c in sent}) == 1  # one placement
    [run] = [c for c in strict_aws.layer.calls("RunInstances") if c.status == 200]
    assert run.params["MinCount"] == run.params["MaxCount"] == "2"  # all nodes in one request
    assert run.params["Placement.GroupName"].startswith("gpuplan-")
    assert run.params["InstanceMarketOptions.MarketType"] == "spot"
    assert run.params["IamInstanceProfile.Name"] == profile
    user_data = gzip.decompress(base64.b64decode(run.params["UserData"]))
    assert len(base64.b64decode(run.params["UserData"])) <= 16384 and b"hf-secret-value" not in user_data
    nodes = [i["instance_id"] for i in launched.json()["instances"]]
    assert len(nodes) == 2
    region = run.region
    assert strict_aws.reachable(nodes[1], nodes[0], region=region)  # rank 1 reaches rank 0 ...
    assert strict_aws.reachable(nodes[0], nodes[1], region=region)  # ... and back
    # The one request carries the profile, so EC2 gives it to every instance it starts; moto attaches it to the
    # first instance of a multi-count request only, so the layer's instance check is asked about that one.
    assert strict_aws.boot_has_credentials_it_needs(nodes[0], region=region)
    from support.strict_aws.checks import user_data_needs_credentials

    assert user_data_needs_credentials(user_data)  # the boot script reads SSM: without the profile it would fail
    stopped = gpuplan("stop", launched.json()["run_id"])
    assert stopped.exit_code == 0, stopped.stderr
    assert strict_aws.layer.account.denied == []
    assert {"ec2:CreatePlacementGroup", "ec2:DeletePlacementGroup", "AmazonSSM.PutParameter",
            "AmazonSSM.DeleteParameters", "iam:SimulatePrincipalPolicy"} <= _called(strict_aws)


# Every kind of refusal the issue lists, planted in the first placement failover tries.
REFUSALS = [
    "InsufficientInstanceCapacity", "InstanceLimitExceeded", "VcpuLimitExceeded", "MaxSpotInstanceCountExceeded",
    "Unsupported", "InvalidParameterValue", "InvalidParameterCombination", "InvalidAMIID.NotFound",
    "VPCIdNotSpecified", "OptInRequired",
]


@pytest.mark.parametrize("code", REFUSALS)
def test_a_refusal_in_the_first_placement_ends_running_in_a_later_one(strict_aws: StrictAwsServer, per_region_ami: None,
                                                                       drill: Path, code: str) -> None:
    strict_aws.layer.inject(code, times=1)  # the first RunInstances, wherever failover sends it
    launched = gpuplan("launch", str(drill), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    calls = strict_aws.layer.calls("RunInstances")
    assert calls[0].status >= 400 and calls[-1].status == 200
    first, last = calls[0], calls[-1]
    assert (first.region, first.params.get("Placement.AvailabilityZone"), first.params["InstanceType"]) != \
        (last.region, last.params.get("Placement.AvailabilityZone"), last.params["InstanceType"])
    stopped = gpuplan("stop", launched.json()["run_id"])
    assert stopped.exit_code == 0, stopped.stderr


def test_refused_credentials_end_the_launch_with_one_line_before_anything_bills(strict_aws: StrictAwsServer,
                                                                                per_region_ami: None,
                                                                                drill: Path) -> None:
    env = {"AWS_ACCESS_KEY_ID": "AKIA-NOT-A-REAL-KEY", "AWS_SECRET_ACCESS_KEY": "wrong"}
    strict_aws.layer.inject("AuthFailure", times=None)
    refused = gpuplan("launch", str(drill), "--provider", "aws", "-y", "--detach", env=env)
    assert refused.exit_code == 2, refused.stderr
    assert "Traceback" not in refused.stderr
    assert not [c for c in strict_aws.layer.calls("RunInstances") if c.status == 200]


def test_an_opt_in_region_the_account_has_not_enabled_is_never_asked_to_launch(strict_aws: StrictAwsServer,
                                                                               per_region_ami: None,
                                                                               tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text(JOB.replace("regions: [us-east-1, us-west-2]", "regions: [ap-east-1, us-east-1]"))
    launched = gpuplan("launch", str(job), "--provider", "aws", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    assert {c.region for c in strict_aws.layer.calls("RunInstances")} == {"us-east-1"}
    gpuplan("stop", launched.json()["run_id"])


def test_dry_run_json_says_which_machine_image_architecture(strict_aws: StrictAwsServer,
                                                            per_region_ami: None, drill: Path) -> None:
    planned = gpuplan("launch", str(drill), "--provider", "aws", "--dry-run", "--json")
    assert planned.exit_code == 0, planned.stderr
    data = json.loads(planned.stdout)
    assert data["dry_run"] is True and data.get("machine")
