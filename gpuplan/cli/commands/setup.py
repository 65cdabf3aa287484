"""`gpuplan setup aws`: check, and on request create, what a cloud account needs before a launch can work."""

from __future__ import annotations

import json
import os
import re

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note
from gpuplan.errors import UserError

# IAM role and instance-profile names (https://docs.aws.amazon.com/IAM/latest/APIReference/API_CreateRole.html).
IAM_NAME = re.compile(r"[\w+=,.@-]{1,64}")

@click.group("setup")
def setup() -> None:
    """Prepare a cloud account for gpuplan (what its machines need to read secrets and ship outputs)."""


@setup.command("aws")
@click.option("--create", is_flag=True,
              help="Create (or update) the IAM role and instance profile. Without it nothing is changed: the "
                   "command says what is configured and which policy it would create.")
@click.option("--name", default="gpuplan-instance", show_default=True,
              help="Name of the IAM role and of the instance profile holding it.")
@click.option("--bucket", default=None, metavar="BUCKET",
              help="The S3 bucket runs ship their outputs to (default: GPUPLAN_AWS_BUCKET); the role may only "
                   "put objects under BUCKET/gpuplan/.")
@click.option("--kms-key", "kms_key", default=None, metavar="ARN",
              help="A customer-managed KMS key your SSM SecureStrings use: adds kms:Decrypt on that key only "
                   "(not needed for the default aws/ssm key).")
@click.option("--storage", default=None, metavar="s3://BUCKET/PREFIX",
              help="The durable storage runs keep checkpoints in (a spec's `storage:`; default: the config's "
                   "[defaults] storage when it is s3://): the role may list, read and write under PREFIX only.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@pass_app
def setup_aws(app: AppContext, create: bool, name: str, bucket: str | None, kms_key: str | None,
              storage: str | None, as_json: bool) -> None:
    """Check or create the instance profile gpuplan's AWS machines use.

    A run's machines read its secrets from SSM Parameter Store (/gpuplan/RUN_ID/NAME) and ship job.log, metrics
    and exit.json to s3://BUCKET/gpuplan/RUN_ID/; on EC2 that needs an instance profile, and `gpuplan launch`
    refuses a launch that needs one when none is usable. With --create this makes a least-privilege role
    (ssm:GetParameter on parameter/gpuplan/*, s3:PutObject on BUCKET/gpuplan/*, only EC2 may assume it), puts it
    in an instance profile of the same name, tags both gpuplan:created-by=gpuplan, and tells you to set
    GPUPLAN_AWS_INSTANCE_PROFILE. Running it again updates the policy; nothing is deleted. You need IAM
    permissions to create roles, and iam:PassRole on the role to launch with it.
    """
    if not IAM_NAME.fullmatch(name):
        raise UserError(f"--name {name!r} is not an IAM role name (1-64 of letters, digits and +=,.@_-)")
    if kms_key is not None and not kms_key.startswith("arn:"):
        raise UserError(f"--kms-key must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), not {kms_key!r}")
    from gpuplan.providers.aws import iam as aws_iam
    from gpuplan.providers.aws.provider import AwsProvider

    bucket = bucket or os.environ.get("GPUPLAN_AWS_BUCKET") or None
    storage = _s3_storage(storage)
    provider = AwsProvider(bucket=bucket)
    client = provider.client("iam", provider.region)
    if create:
        result = aws_iam.create_profile(client, name=name, bucket=bucket, kms_key_arn=kms_key, storage=storage)
        out = {**result.as_dict(), "created": True,
               "next": f"export GPUPLAN_AWS_INSTANCE_PROFILE={name}"}
        if as_json:
            emit_json(out)
            return
        for action in result.actions:
            note(action)
        # IAM is eventually consistent: EC2 may not know a new profile for some seconds (RunInstances answers
        # "Invalid IAM Instance Profile name": aws/aws-sdk-js-v3#5253, hashicorp/terraform-provider-aws#27516;
        # https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html "Changes that I make are not
        # always immediately visible").
        note("a new instance profile can take a few seconds to be usable by EC2")
        click.echo(json.dumps(result.policy, indent=2))
        click.echo(f"now set GPUPLAN_AWS_INSTANCE_PROFILE={name} (and GPUPLAN_AWS_BUCKET={bucket})" if bucket else
                   f"now set GPUPLAN_AWS_INSTANCE_PROFILE={name} (no bucket: outputs are not shipped)")
        return
    configured = provider.instance_profile
    needed = aws_iam.needed_for(secrets=True, bucket=bucket, storage=storage)
    check = aws_iam.check_profile(client, configured, needed)
    policy = aws_iam.instance_policy(bucket, kms_key_arn=kms_key, storage=storage)
    out = {"instance_profile": configured, "role": check.role, "usable": check.problem is None,
           "problem": check.problem, "policy_to_create": policy, "created": False}
    if as_json:
        emit_json(out)
        return
    if check.problem:
        click.echo(f"not ready: {check.problem}")
    else:
        click.echo(f"ready: instance profile {configured} (role {check.role})")
    click.echo(f"`gpuplan setup aws --create --name {name}` would create a role with:")
    click.echo(json.dumps(policy, indent=2))


def _s3_storage(storage: str | None) -> str | None:
    """--storage, else an s3:// `[defaults] storage`; one line and exit 2 for anything but s3://BUCKET[/PREFIX]."""
    from gpuplan.config import default_setting
    from gpuplan.jobs.storage import check_storage, storage_scheme

    if storage is None:
        default = default_setting("storage")
        return str(default).rstrip("/") if isinstance(default, str) and default.startswith("s3://") else None
    try:
        checked = check_storage(storage)
    except ValueError as exc:
        raise UserError(f"--storage: {exc}") from exc
    if checked is None or storage_scheme(checked) != "s3":
        raise UserError(f"--storage {storage!r}: an AWS role can only be given an s3://BUCKET/PREFIX storage")
    return checked
