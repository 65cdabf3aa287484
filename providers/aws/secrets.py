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

# Parameter tiers (https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html):
# "Maximum size of a parameter value: Standard 4 KB, Advanced 8 KB"; Standard has "No additional charge", Advanced
# "Charges apply" ($0.05 per advanced parameter per month, prorated hourly: https://aws.amazon.com/systems-manager/
# pricing/). A Standard PutParameter over the limit answers ValidationException "Standard tier parameters support a
# maximum parameter value of 4096 characters" (aws/aws-sdk-net#3157), and the account's default tier is Standard
# unless its owner changed it, so gpuplan names the tier itself: Standard when the value fits (free), else Advanced.
# Sizes are counted in UTF-8 bytes, never fewer than characters, so a value that passes here passes either count.
STANDARD_MAX_BYTES = 4096
ADVANCED_MAX_BYTES = 8192
ADVANCED_COST = "$0.05 per secret per month, prorated hourly"


def parameter_tier(value: str) -> str:
    """The SSM tier a secret value needs: Standard (free) up to 4 KB, Advanced above."""
    return "Standard" if len(value.encode()) <= STANDARD_MAX_BYTES else "Advanced"


def too_big(name: str, value: str) -> str | None:
    """One line when a secret cannot be stored in SSM at all (over 8 KB), else None. The value is never quoted."""
    size = len(value.encode())
    if size <= ADVANCED_MAX_BYTES:
        return None
    return (f"secret {name} is {size} bytes; AWS SSM Parameter Store holds at most {ADVANCED_MAX_BYTES} bytes "
            "(Advanced tier): pass a smaller value, e.g. a path or a URL the job fetches with its own credentials")


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
