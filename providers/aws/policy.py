"""The launching user's own AWS permissions, as a policy to paste: shipped as package data (launch_policy.json).

Why a file and not prose: the same document is what `gpuplan setup aws --print-policy` prints, what
docs/providers/aws-permissions.md shows, and what the tests hand the strict AWS layer as the caller's only permissions
(tests/support/strict_aws/account.py rule 14), so every launch path (on demand, spot, multi-node with a placement group
and EFA, storage, secrets) is shown to need nothing outside it. Statements, least privilege per need:
- GpuplanMachines: the EC2 calls of a launch, its watch and its teardown. RunInstances also needs ec2:CreateTags for
  its TagSpecifications (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/supported-iam-actions-tagging.html).
- GpuplanInstanceRole: read, pass (https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_switch-role-ec2.html)
  and simulate (gpuplan.providers.aws.role_check) the machines' role only.
- GpuplanSecrets: the run's SecureString parameters (PutParameter with Tags needs ssm:AddTagsToResource,
  https://docs.aws.amazon.com/systems-manager/latest/userguide/sysman-paramstore-su-tag.html) and the AMI's public
  parameter.
- GpuplanStorage: the bucket runs ship outputs to and keep checkpoints and code in.
- GpuplanSetupOnce: what `gpuplan setup aws --create` needs; drop it afterwards.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from gpuplan.providers.aws.iam import DEFAULT_NAME

PROFILE_PLACEHOLDER = "INSTANCE_PROFILE"
BUCKET_PLACEHOLDER = "BUCKET"


def launch_policy(*, instance_profile: str = DEFAULT_NAME, buckets: tuple[str, ...] = ()) -> dict[str, Any]:
    """The policy document, for this instance profile's name and these buckets (none: the BUCKET placeholder)."""
    text = resources.files("gpuplan.providers.aws").joinpath("launch_policy.json").read_text()
    policy: dict[str, Any] = json.loads(text.replace(PROFILE_PLACEHOLDER, instance_profile))
    if buckets:
        for statement in policy["Statement"]:
            resource = statement["Resource"]
            if isinstance(resource, list) and any(BUCKET_PLACEHOLDER in r for r in resource):
                statement["Resource"] = [r.replace(BUCKET_PLACEHOLDER, b) for b in buckets for r in resource]
    return policy


def launch_actions() -> list[str]:
    """Every action the policy allows, in the file's order."""
    return [a for s in launch_policy()["Statement"] for a in s["Action"]]
