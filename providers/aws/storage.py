"""Where an AWS run keeps what is not on its machines: its secrets in SSM Parameter Store, its outputs in S3.

A mixin of AwsProvider (kept apart so the provider module stays the launch/describe/terminate flow). Secret values
never ride in user data: they are tagged SecureString parameters `/gpuplan/<run_id>/<NAME>` in the launch region,
read by the boot script (which needs an instance profile: gpuplan.providers.aws.iam), and deleted once the run has
no live instance left there. Each node ships job.log, metrics and exit.json to
`s3://BUCKET/gpuplan/<run_id>/node-<rank>/`, which `fetch_outputs` brings back into the run folder.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from gpuplan.providers.aws import secrets as aws_secrets
from gpuplan.providers.aws.rules import Where, map_client_error, run_tags, tag_list
from gpuplan.providers.base import CloudSecret, Instance, InstanceState, LaunchRequest, ProviderError
from gpuplan.providers.outputs import StoredObject, bucket_hint, node_prefix, run_url, sync_node_outputs

if TYPE_CHECKING:
    from collections.abc import Callable

log = logging.getLogger("gpuplan.providers.aws.provider")


class RunStorage:
    """Needs `name`, `region`, `regions`, `bucket`, `client(service, region)`, `secret_parameter`, `_error`,
    `_find`, `_region_of` and `_etags` from the provider."""

    name: ClassVar[str]
    region: str
    regions: list[str]
    bucket: str | None
    _region_of: dict[str, str]
    _etags: dict[str, str]
    client: Callable[..., Any]
    secret_parameter: Callable[[str, str], str]
    _error: Callable[..., ProviderError]
    _find: Callable[..., list[Instance]]

    def _put_secrets(self, region: str, request: LaunchRequest) -> None:
        """Store each secret value as a tagged SecureString `/gpuplan/<run_id>/<NAME>` in the launch region."""
        if not request.secrets:
            return
        ssm = self.client("ssm", region)
        tags = tag_list(run_tags(request))
        for name, value in sorted(request.secrets.items()):
            parameter = self.secret_parameter(request.run_id, name)
            try:
                tier = aws_secrets.parameter_tier(value)  # Advanced only above 4 KB (gpuplan.providers.aws.secrets)
                try:
                    ssm.put_parameter(Name=parameter, Value=value, Type="SecureString", Tags=tags, Tier=tier,
                                      Description=f"gpuplan secret {name} of run {request.run_id}")
                except Exception as exc:
                    if map_client_error(exc).code != "ParameterAlreadyExists":
                        raise
                    # A retried launch: overwrite (SSM refuses tags together with Overwrite; they are set).
                    ssm.put_parameter(Name=parameter, Value=value, Type="SecureString", Overwrite=True, Tier=tier)
            except Exception as exc:
                # The message names the parameter, never the value.
                raise self._error(exc, Where(region=region)) from None

    def _forget_secrets(self, region: str, run_id: str) -> None:
        """Delete the run's secret parameters in one region (best effort: reconcile-style leftovers are logged)."""
        ssm = self.client("ssm", region)
        try:
            names = [p["Name"] for page in ssm.get_paginator("get_parameters_by_path").paginate(
                Path=f"/gpuplan/{run_id}/", Recursive=True) for p in page.get("Parameters", [])]
            for start in range(0, len(names), 10):
                ssm.delete_parameters(Names=names[start:start + 10])
        except Exception as exc:
            log.warning("could not delete the secrets of run %s in %s: %s", run_id, region,
                        map_client_error(exc, region=region))

    def _forget_secrets_if_done(self, region: str, run_id: str | None) -> None:
        if run_id and not self._find(region, run_id):
            self._forget_secrets(region, run_id)

    def list_secrets(self) -> list[CloudSecret]:
        """gpuplan's secret parameters in every configured region (names only): reconcile's leftover check."""
        found: list[CloudSecret] = []
        for region in list(self.regions):
            found.extend(aws_secrets.list_secrets(self.client("ssm", region), region, self.name))
        return found

    def delete_secrets(self, secrets: Sequence[CloudSecret]) -> dict[CloudSecret, str]:
        failed: dict[CloudSecret, str] = {}
        by_region: dict[str, list[CloudSecret]] = {}
        for secret in secrets:
            by_region.setdefault(secret.region or self.region, []).append(secret)
        for region, items in by_region.items():
            failed.update(aws_secrets.delete_secrets(self.client("ssm", region), region, items))
        return failed

    def outputs_url(self, run_id: str) -> str | None:
        return run_url("s3", self.bucket, run_id)

    def outcome_hint(self) -> str | None:
        if self.bucket:
            return None
        return "no exit record: " + bucket_hint("GPUPLAN_AWS_BUCKET",
                           "an instance profile, GPUPLAN_AWS_INSTANCE_PROFILE, with s3:PutObject on BUCKET/gpuplan/*")

    def fetch_outputs(self, instance: Instance, run_dir: str) -> None:
        """Download what the node shipped to `s3://BUCKET/gpuplan/<run_id>/node-<rank>/` (only changed objects),
        and, once the machine is gone and the run has no live instance left, delete the run's SSM secrets."""
        region = instance.region or self._region_of.get(instance.instance_id) or self.region
        if instance.state in InstanceState.GONE:
            self._forget_secrets_if_done(region, instance.run_id)
        if not self.bucket or not instance.run_id or not run_dir:
            return
        s3 = self.client("s3", region)
        bucket = self.bucket
        prefix = node_prefix(instance.run_id, instance.node_rank)
        try:
            listing = s3.list_objects_v2(Bucket=bucket, Prefix=prefix)
            objects = [StoredObject(o["Key"], o.get("ETag", "")) for o in listing.get("Contents", [])]
            sync_node_outputs(objects, prefix, lambda key: s3.get_object(Bucket=bucket, Key=key)["Body"].read(),
                              run_dir, instance.node_rank, self._etags)
        except Exception as exc:
            raise map_client_error(exc, region=region) from exc
