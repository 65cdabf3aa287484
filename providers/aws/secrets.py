"""Find and delete a run's leftover secrets in AWS SSM Parameter Store: what `gpuplan reconcile` cleans up.

An AWS run's secrets are SecureString parameters `/gpuplan/<run_id>/<NAME>` tagged like the run, in the launch
region (providers/aws.py puts them and deletes them when the run ends). A crash, or a delete that failed, leaves
them behind; this module lists them and deletes the ones reconcile names.

Listing uses DescribeParameters, which returns metadata only: no value (not even an encrypted one) is ever read.
It is filtered to gpuplan's path, the SecureString type and gpuplan's `gpuplan:created-by` tag, so a parameter of
the user's own that happens to sit under `/gpuplan/` (a plain String such as an AMI id) is never touched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpuplan.providers.aws.rules import map_client_error
from gpuplan.providers.base import CREATED_BY, TAG_CREATED_BY, CloudSecret

SECRET_PATH = "/gpuplan"
_DELETE_BATCH = 10  # DeleteParameters takes at most 10 names


def run_of(parameter: str) -> str | None:
    """The run of `/gpuplan/<run_id>/<NAME>`; None for any other shape (never guessed, so never deleted)."""
    parts = parameter.split("/")
    if len(parts) != 4 or parts[0] or parts[1] != SECRET_PATH.strip("/") or not parts[2] or not parts[3]:
        return None
    return parts[2]


def list_secrets(ssm: Any, region: str, provider: str) -> list[CloudSecret]:
    """gpuplan's secret parameters in one region (names, runs, last-modified times; never values).

    Raises the mapped ProviderError when the region cannot be listed (no ssm:DescribeParameters, no endpoint)."""
    filters = [{"Key": "Path", "Option": "Recursive", "Values": [SECRET_PATH]},
               {"Key": "Type", "Option": "Equals", "Values": ["SecureString"]},
               {"Key": f"tag:{TAG_CREATED_BY}", "Option": "Equals", "Values": [CREATED_BY]}]
    try:
        found = []
        for page in ssm.get_paginator("describe_parameters").paginate(ParameterFilters=filters):
            for meta in page.get("Parameters", []):
                name = str(meta["Name"])
                found.append(CloudSecret(provider=provider, name=name, run_id=run_of(name), region=region,
                                         created_at=meta.get("LastModifiedDate")))
        return found
    except Exception as exc:
        raise map_client_error(exc, region=region) from None


def delete_secrets(ssm: Any, region: str, secrets: Sequence[CloudSecret]) -> dict[CloudSecret, str]:
    """Delete these parameters of one region in batches of ten; returns the refused ones with why.

    A name DeleteParameters reports invalid is already gone, which is what was asked. A refused batch
    (AccessDenied, throttling past botocore's retries) is reported for each of its names, never raised, so the
    other batches still go."""
    failed: dict[CloudSecret, str] = {}
    items = list(secrets)
    for start in range(0, len(items), _DELETE_BATCH):
        batch = items[start:start + _DELETE_BATCH]
        try:
            ssm.delete_parameters(Names=[s.name for s in batch])
        except Exception as exc:
            why = str(map_client_error(exc, region=region))
            failed.update({s: why for s in batch})
    return failed
