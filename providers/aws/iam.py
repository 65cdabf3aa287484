"""The instance profile a run's machines need, checked before launch, and created on request (`gpuplan setup aws`).

Why: code on an instance has AWS credentials only through an instance profile ("Amazon EC2 uses an instance
profile as a container for an IAM role", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-roles-for-amazon-ec2.html).
gpuplan's boot script reads the run's secrets from SSM (`aws ssm get-parameter`) and ships outputs to S3
(`aws s3 cp`); without a profile both fail with "Unable to locate credentials" after the GPU machine is billing.
So a launch that needs either refuses (exit 2, nothing recorded or started) unless a configured profile exists
(iam:GetInstanceProfile; `NoSuchEntity` when it does not, https://docs.aws.amazon.com/IAM/latest/APIReference/API_GetInstanceProfile.html)
and holds a role ("An instance profile can contain only one IAM role").

The role `gpuplan setup aws --create` makes is least privilege, the policy the README's AWS section shows:
`s3:PutObject` on `arn:aws:s3:::BUCKET/gpuplan/*` and `ssm:GetParameter` on `arn:aws:ssm:*:*:parameter/gpuplan/*`
(parameter ARNs drop the name's leading "/"; "Restricting access to specific parameters and paths",
https://docs.aws.amazon.com/systems-manager/latest/userguide/ps-restrict-parameter-access.html), plus
`kms:Decrypt` on a customer-managed key only when one is named (SecureStrings under the AWS-managed `aws/ssm` key
need no KMS statement in the role: the notes call this standard guidance, not quoted from AWS). Its trust policy
lets only EC2 assume it. Role and profile carry gpuplan's tag. The launching user also needs iam:PassRole on
the role (same page); EC2 answers `UnauthorizedOperation` without it, at RunInstances.

A run with durable storage (`storage: s3://BUCKET/PREFIX`, gpuplan.jobs.storage) also copies its checkpoints
there with `aws s3 sync` both ways, which lists the prefix and reads and writes objects (ListObjectsV2 needs
s3:ListBucket on the bucket; a multipart upload is covered by s3:PutObject). The role gets exactly that for
the prefix and nothing else: s3:GetObject/s3:PutObject on `arn:aws:s3:::BUCKET/PREFIX/*` and s3:ListBucket on the
bucket with the condition `StringLike s3:prefix PREFIX/*` (the "access to a folder in a bucket" example of
https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-policies-s3.html; actions per API in
https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-with-s3-policy-actions.html). The node's metrics
are kept there too (`<run>/node-<rank>/metrics.jsonl`), so a resumed run reads them back without any read access
to the outputs prefix.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplan.providers.aws.rules import map_client_error, tag_list
from gpuplan.providers.base import CREATED_BY, TAG_CREATED_BY

DEFAULT_NAME = "gpuplan-instance"  # the role and the instance profile `gpuplan setup aws --create` makes
POLICY_NAME = "gpuplan-instance"


def setup_fix(bucket: str | None = None, storage: str | None = None) -> str:
    """The command that makes a profile granting what this launch needs: `--bucket` for shipped outputs,
    `--storage` for a spec's s3:// `storage:` (a role made with only one of them cannot do the other)."""
    flags = "".join(f" {flag} {value}" for flag, value in (("--bucket", bucket), ("--storage", storage))
                    if value and (flag == "--bucket" or value.startswith("s3://")))
    return (f"create one with `gpuplan setup aws --create{flags}` (it records the profile in the config file as "
            "[providers.aws] instance_profile)")


FIX = setup_fix()


@dataclass(frozen=True)
class ProfileCheck:
    """Whether the machines' instance profile is usable: `problem` is one line for the user, None when fine."""

    name: str | None
    needed_for: tuple[str, ...]
    problem: str | None = None
    role: str | None = None
    role_arn: str | None = None


def needed_for(*, secrets: bool, bucket: str | None, storage: str | None = None) -> tuple[str, ...]:
    """What on the machine needs AWS credentials (empty: no profile needed)."""
    reasons = []
    if secrets:
        reasons.append("reading the run's secrets from SSM")
    if bucket:
        reasons.append(f"shipping outputs to s3://{bucket}")
    if storage and storage.startswith("s3://"):
        reasons.append(f"copying checkpoints to and from {storage}")
    return tuple(reasons)


def sid(kind: str, *parts: str) -> str:
    """A statement id naming what the statement is for (`GpuplanStorageObjects` + a digest of the bucket and prefix):
    statements of one kind for another bucket or prefix have another id, so merge_policy keeps them."""
    digest = hashlib.sha256("/".join(parts).encode()).hexdigest()[:12] if parts else ""
    return f"Gpuplan{kind}{digest}"


def storage_statements(storage: str) -> list[dict[str, Any]]:
    """Least privilege for one s3:// storage: list, read and write under its prefix only (see the docstring)."""
    rest = storage.removeprefix("s3://").strip("/")
    bucket, _, prefix = rest.partition("/")
    objects = f"{prefix}/*" if prefix else "*"
    statements: list[dict[str, Any]] = [
        {"Sid": sid("StorageObjects", bucket, prefix), "Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
         "Resource": f"arn:aws:s3:::{bucket}/{objects}"},
        {"Sid": sid("StorageList", bucket, prefix), "Effect": "Allow", "Action": "s3:ListBucket",
         "Resource": f"arn:aws:s3:::{bucket}"},
    ]
    if prefix:
        statements[1]["Condition"] = {"StringLike": {"s3:prefix": [objects]}}
    return statements


def profile_name(profile: str) -> str:
    """The profile's name from a name or an ARN (`arn:aws:iam::ACCOUNT:instance-profile/PATH/NAME`)."""
    return profile.rsplit("/", 1)[-1] if profile.startswith("arn:") else profile


def check_profile(iam: Any, profile: str | None, needed: Sequence[str], *, fix: str = FIX) -> ProfileCheck:
    """A usable profile when the machines need one: configured, existing, with a role. `fix` is the command that
    would make one granting what is needed (setup_fix)."""
    if not needed:
        return ProfileCheck(profile, ())
    why = " and ".join(needed)
    if not profile:
        return ProfileCheck(None, tuple(needed), f"the AWS machines need an instance profile for {why}, and none "
                                                 f"is configured: {fix}")
    name = profile_name(profile)
    try:
        found = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"]
    except Exception as exc:
        error = map_client_error(exc)
        if error.code == "NoSuchEntity":
            return ProfileCheck(profile, tuple(needed), f"the instance profile {name} does not exist (needed for "
                                                        f"{why}): {fix}")
        raise error from exc
    roles = found.get("Roles") or []
    if not roles:
        return ProfileCheck(profile, tuple(needed), f"the instance profile {name} has no role, so the machines get "
                                                    f"no credentials for {why}: add one, or {fix}")
    return ProfileCheck(profile, tuple(needed), role=str(roles[0].get("RoleName")),
                        role_arn=str(roles[0].get("Arn") or "") or None)


def instance_policy(bucket: str | None, *, kms_key_arn: str | None = None,
                    storage: str | None = None) -> dict[str, Any]:
    """The role's permissions: what the boot script does and nothing else (the README's AWS policy)."""
    statements: list[dict[str, Any]] = []
    if bucket:
        statements.append({"Sid": sid("Outputs", bucket), "Effect": "Allow", "Action": "s3:PutObject",
                           "Resource": f"arn:aws:s3:::{bucket}/gpuplan/*"})
    if storage:
        statements.extend(storage_statements(storage))
    statements.append({"Sid": sid("Secrets"), "Effect": "Allow", "Action": "ssm:GetParameter",
                       "Resource": "arn:aws:ssm:*:*:parameter/gpuplan/*"})
    if kms_key_arn:
        statements.append({"Sid": sid("Kms", kms_key_arn), "Effect": "Allow", "Action": "kms:Decrypt",
                           "Resource": kms_key_arn})
    return {"Version": "2012-10-17", "Statement": statements}


def merge_policy(existing: Mapping[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """`new`'s statements and every earlier one it neither replaces (same Sid) nor repeats: running `setup aws
    --create --storage s3://b/two` after `--storage s3://b/one` grants both prefixes, never revokes the first
    (one statement per prefix, told apart by its Sid). Removing a grant is the user's edit, not a side effect."""
    fresh = list(new["Statement"])
    ids = {s.get("Sid") for s in fresh}
    bodies = [_body(s) for s in fresh]
    earlier = (existing or {}).get("Statement") or []
    kept = [s for s in ([earlier] if isinstance(earlier, dict) else earlier)
            if s.get("Sid") not in ids and _body(s) not in bodies]
    return {"Version": "2012-10-17", "Statement": kept + fresh}


def _body(statement: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in statement.items() if k != "Sid"}


def current_policy(iam: Any, role: str) -> dict[str, Any] | None:
    """The role's gpuplan inline policy as it is now (None: none yet); IAM returns it URL-decoded JSON."""
    try:
        document = iam.get_role_policy(RoleName=role, PolicyName=POLICY_NAME)["PolicyDocument"]
    except Exception as exc:
        if _code(exc) == "NoSuchEntity":
            return None
        raise
    return dict(json.loads(document) if isinstance(document, str) else document)


def trust_policy() -> dict[str, Any]:
    """Only EC2 may assume the role."""
    return {"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]}


@dataclass
class SetupResult:
    """What `gpuplan setup aws --create` did: each resource and whether it was created or already there."""

    role: str
    instance_profile: str
    policy: dict[str, Any]
    actions: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "instance_profile": self.instance_profile, "policy": self.policy,
                "actions": list(self.actions)}


def _code(exc: Exception) -> str | None:
    from botocore.exceptions import ClientError

    return str(exc.response.get("Error", {}).get("Code")) if isinstance(exc, ClientError) else None


def create_profile(iam: Any, *, name: str = DEFAULT_NAME, bucket: str | None, kms_key_arn: str | None = None,
                   tags: Mapping[str, str] | None = None, storage: str | None = None) -> SetupResult:
    """Create (or bring up to date) the role, its inline policy and the instance profile holding it; idempotent."""
    marks = tag_list({TAG_CREATED_BY: CREATED_BY, **(tags or {})})
    policy = instance_policy(bucket, kms_key_arn=kms_key_arn, storage=storage)
    result = SetupResult(role=name, instance_profile=name, policy=policy)
    try:
        try:
            iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust_policy()), Tags=marks,
                            Description="gpuplan machines: read gpuplan's SSM secrets, ship outputs to S3")
            result.actions.append(f"created role {name}")
        except Exception as exc:
            if _code(exc) != "EntityAlreadyExists":
                raise
            result.actions.append(f"role {name} exists")
        result.policy = policy = merge_policy(current_policy(iam, name), policy)
        iam.put_role_policy(RoleName=name, PolicyName=POLICY_NAME, PolicyDocument=json.dumps(policy))
        result.actions.append(f"set policy {POLICY_NAME} on role {name}")
        try:
            iam.create_instance_profile(InstanceProfileName=name, Tags=marks)
            result.actions.append(f"created instance profile {name}")
        except Exception as exc:
            if _code(exc) != "EntityAlreadyExists":
                raise
            result.actions.append(f"instance profile {name} exists")
        roles = iam.get_instance_profile(InstanceProfileName=name)["InstanceProfile"].get("Roles") or []
        if not any(r.get("RoleName") == name for r in roles):
            iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
            result.actions.append(f"added role {name} to instance profile {name}")
    except Exception as exc:
        raise map_client_error(exc) from exc
    return result
