"""`gpuplan setup aws`: check, and on request create, what a cloud account needs before a launch can work."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

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
@click.option("--print-policy", "print_policy", is_flag=True,
              help="Print the IAM policy the launching user needs (every call gpuplan makes: launch, spot, "
                   "multi-node, storage, secrets, and this setup), with --name and the --bucket/--storage buckets "
                   "filled in, and exit. Nothing is called.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON on stdout.")
@pass_app
def setup_aws(app: AppContext, create: bool, name: str, bucket: str | None, kms_key: str | None,
              storage: str | None, print_policy: bool, as_json: bool) -> None:
    """Check or create the instance profile gpuplan's AWS machines use.

    A run's machines read its secrets from SSM Parameter Store (/gpuplan/RUN_ID/NAME) and ship job.log, metrics
    and exit.json to s3://BUCKET/gpuplan/RUN_ID/; on EC2 that needs an instance profile, and `gpuplan launch`
    refuses a launch that needs one when none is usable. With --create this makes a least-privilege role
    (ssm:GetParameter on parameter/gpuplan/*, s3:PutObject on BUCKET/gpuplan/*, only EC2 may assume it), puts it
    in an instance profile of the same name, tags both gpuplan:created-by=gpuplan, and records the profile in
    the config file ([providers.aws] instance_profile), so the next launch uses it. Running it again updates
    the policy; nothing is deleted. You need IAM permissions to create roles, and iam:PassRole on the role to
    launch with it (`--print-policy` prints everything a launching user needs).

    \b
    Secrets: each is a SecureString parameter while its run lives. Up to 4 KB it is a Standard-tier parameter
    (free); above 4 KB (a service-account JSON, a kubeconfig) an Advanced-tier one, which AWS bills at $0.05 per
    parameter per month, prorated hourly; a secret over 8 KB is refused before anything starts.
    """
    if not IAM_NAME.fullmatch(name):
        raise UserError(f"--name {name!r} is not an IAM role name (1-64 of letters, digits and +=,.@_-)")
    if kms_key is not None and not kms_key.startswith("arn:"):
        raise UserError(f"--kms-key must be a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID), not {kms_key!r}")
    if print_policy:
        from gpuplan.providers.aws.policy import launch_policy

        stores = [check.split("://", 1)[1].split("/", 1)[0] for check in (_s3_storage(storage),) if check]
        buckets = tuple(dict.fromkeys([b for b in (bucket or os.environ.get("GPUPLAN_AWS_BUCKET"),) if b] + stores))
        click.echo(json.dumps(launch_policy(instance_profile=name, buckets=buckets), indent=2))
        return
    from gpuplan.providers.aws import iam as aws_iam
    from gpuplan.providers.aws.provider import AwsProvider

    given_bucket = bucket
    bucket = bucket or os.environ.get("GPUPLAN_AWS_BUCKET") or None
    storage = _s3_storage(storage)
    from gpuplan.config import provider_settings

    recorded_profile = provider_settings("aws").get("instance_profile")  # what an earlier --create recorded
    provider = AwsProvider(bucket=bucket, instance_profile=str(recorded_profile) if recorded_profile else None)
    client = provider.client("iam", provider.region)
    if create:
        result = aws_iam.create_profile(client, name=name, bucket=bucket, kms_key_arn=kms_key, storage=storage)
        recorded = _record_profile(name, given_bucket)
        out = {**result.as_dict(), "created": True, "config_file": str(recorded)}
        if as_json:
            emit_json(out)
            return
        for action in result.actions:
            note(action)
        note(f"recorded instance_profile = {name!r} under [providers.aws] in {recorded}")
        # IAM is eventually consistent: EC2 may not know a new profile for some seconds (RunInstances answers
        # "Invalid IAM Instance Profile name": aws/aws-sdk-js-v3#5253, hashicorp/terraform-provider-aws#27516;
        # https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html "Changes that I make are not
        # always immediately visible").
        note("a new instance profile can take a few seconds to be usable by EC2")
        click.echo(json.dumps(result.policy, indent=2))
        if not bucket:
            click.echo("no bucket: outputs are not shipped (run again with --bucket BUCKET to add one)")
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


def _record_profile(name: str, bucket: str | None) -> Path:
    """Write the profile (and an explicitly given bucket) to the config file's [providers.aws], which every
    command that builds the AWS provider reads: the next launch uses the profile without any export."""
    from gpuplan.cli.config_edit import write_setting
    from gpuplan.config import config_path

    path = config_path()
    write_setting(path, "providers.aws", "instance_profile", name)
    if bucket:
        write_setting(path, "providers.aws", "bucket", bucket)
    return path


def _s3_storage(storage: str | None) -> str | None:
    """--storage, else an S3 `[defaults] storage` (AwsProvider.storage_schemes); one line and exit 2 for anything but
    s3://BUCKET[/PREFIX]."""
    from gpuplan.config import default_setting
    from gpuplan.jobs.storage import check_storage, storage_scheme
    from gpuplan.providers.aws.provider import AwsProvider

    def reached(value: str) -> bool:
        return storage_scheme(value) in AwsProvider.storage_schemes

    if storage is None:
        default = default_setting("storage")
        try:
            checked = check_storage(default) if isinstance(default, str) else None
        except ValueError:
            return None  # `gpuplan config` words a bad [defaults] storage; here it is just not an S3 one
        return checked if checked is not None and reached(checked) else None
    try:
        checked = check_storage(storage)
    except ValueError as exc:
        raise UserError(f"--storage: {exc}") from exc
    if checked is None or not reached(checked):
        raise UserError(f"--storage {storage!r}: an AWS role can only be given an s3://BUCKET/PREFIX storage")
    return checked


@setup.command("gcp")
@click.option("--print-policy", "print_policy", is_flag=True,
              help="Print the IAM roles (or, for a custom role, the exact permissions) the launching user needs.")
@click.option("--json", "as_json", is_flag=True, help="Print the roles and permissions as JSON on stdout.")
def setup_gcp(print_policy: bool, as_json: bool) -> None:
    """What a GCP account needs before gpuplan can launch there: the launching user's roles.

    Grant the predefined roles on the project (`gcloud projects add-iam-policy-binding PROJECT
    --member=user:YOU --role=ROLE`), or make a custom role of exactly the listed permissions (`gcloud iam roles
    create gpuplan --project=PROJECT --permissions=...`). Without --print-policy this says the same in short.
    """
    from gpuplan.providers.gcp.permissions import launch_roles

    roles = launch_roles()
    if as_json:
        emit_json(roles)
        return
    if not print_policy:
        click.echo("the launching user needs these roles (or the permissions `--print-policy` lists):")
    for role in roles["roles"]:
        click.echo(f"role {role}")
    if print_policy:
        click.echo("custom role permissions: " + ",".join(roles["permissions"]))


_GUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


@setup.command("azure")
@click.option("--print-policy", "print_policy", is_flag=True,
              help="Print the custom role definitions (launcher, machine, machine-storage) as JSON for "
                   "`az role definition create --role-definition @FILE`, with the subscription filled in. "
                   "Nothing is called.")
@click.option("--subscription", default=None, metavar="ID",
              help="The subscription the roles are assignable in (default: AZURE_SUBSCRIPTION_ID).")
@click.option("--json", "as_json", is_flag=True, help="Print both roles as JSON on stdout.")
def setup_azure(print_policy: bool, subscription: str | None, as_json: bool) -> None:
    """What an Azure subscription needs before gpuplan can launch there: three least-privilege custom roles.

    `gpuplan launcher` for you (a run's resource group, network, VMs, Key Vault secrets, run storage), `gpuplan
    machine` for the user-assigned managed identity the VMs run as (delete itself, tag its run, read secrets),
    and `gpuplan machine storage` for that identity on the run storage's container only (read and write blobs).
    Without --print-policy this lists what each may do, in short.
    """
    from gpuplan.providers.azure.roles import custom_roles

    subscription_id = subscription or os.environ.get("AZURE_SUBSCRIPTION_ID")
    # A subscription ID is a GUID (https://learn.microsoft.com/azure/azure-portal/get-subscription-tenant-id).
    if subscription_id and not _GUID.fullmatch(subscription_id):
        where = "--subscription" if subscription else "AZURE_SUBSCRIPTION_ID"
        raise UserError(f"{where} {subscription_id!r} is not a subscription ID (a GUID such as "
                        "00000000-0000-0000-0000-000000000000; `az account show --query id` prints yours)")
    roles = custom_roles(subscription_id)
    if as_json or print_policy:
        emit_json(roles)
        return
    for key, role in roles.items():
        click.echo(f"role {role['Name']!r} ({key}): {len(role['Actions'])} actions, "
                   f"{len(role['DataActions'])} data actions")
        for action in [*role["Actions"], *role["DataActions"]]:
            click.echo(f"  {action}")
    click.echo("create them with `gpuplan setup azure --print-policy` and `az role definition create`")
