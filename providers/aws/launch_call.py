"""The RunInstances call itself: its idempotency token, and which failures are retried (and which never are).

ClientToken (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html): "A client token is a
unique, case-sensitive string of up to 64 ASCII characters." "If you retry a request that completed successfully
using the same client token and the same parameters, the retry succeeds without performing any further actions. If
you retry a successful request using the same client token, but one or more of the parameters are different, other
than the Region or Availability Zone, the retry fails with an IdempotentParameterMismatch error." So one token per
distinct request: the run, the launch generation (a spot relaunch), the failover attempt, the zone, the instance
type and the node rank; the same request retried (a timeout, a 5xx, a crashed gpuplan launching the same run again
in the same order) carries the same token and gets the same machines back.

The two idempotency errors (errors-overview.html), and what gpuplan does:
- IdempotentInstanceTerminated ("uses the same client token as a previous request for which the instance has been
  terminated"): the earlier request's machines are gone, so nothing can double; this exact request can never
  succeed again. A placement error scoped to this zone and type (gpuplan.providers.aws.rules): failover moves on,
  and the next attempt has a new token.
- IdempotentParameterMismatch ("The request uses the same client token as a previous, but non-identical
  request"): an earlier request with this token succeeded, so its machines may be running, yet the tag look-up
  before the call did not see them (DescribeInstances is eventually consistent). Starting machines anywhere else
  could double them, so the launch stops (a plain ProviderError) and says to run `gpuplan reconcile`.

Retries: a capacity refusal (InsufficientInstanceCapacity) is a 500-series "server error" on the errors page, and
botocore's retry modes retry every 5xx, so a real "no capacity" costs several calls and many seconds per zone
(SkyPilot creates its RunInstances client with max_attempts=0 for this reason, sky/provision/aws/instance.py). The
launch client therefore has botocore retries off, and this module retries only what the docs say to retry with
backoff: throttling ("RequestLimitExceeded ... use an increasing or variable sleep interval") and the internal
server errors ("An internal error has occurred. Retry your request"), never capacity. A retry is the identical
request with the same token, which is what the idempotency page allows ("Retry ... with an appropriate backoff").

IAM propagation: a new instance profile reaches EC2 seconds after CreateInstanceProfile returns ("Changes that I make
are not always immediately visible", https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html
#troubleshoot_general_eventual-consistency), and meanwhile RunInstances answers InvalidParameterValue "Value (NAME)
for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name" (aws/aws-sdk-js-v3#5253,
hashicorp/terraform-provider-aws#27516). That says nothing about the placement, so it is retried, the identical
request with the same token, for up to `profile_wait` seconds (60 by default), as kops (spotinsttasks/elastigroup.go:
retries "Invalid IAM Instance Profile name") and Packer (GH-9946: the retry must not start a second spot instance)
do; only then does it end the launch (gpuplan.providers.aws.rules: never a reason to try other placements).
"""

from __future__ import annotations

import hashlib
import logging
import os
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

MAX_TOKEN = 64
RETRY_CODES = frozenset({"RequestLimitExceeded", "InternalError", "InternalFailure", "ServerInternal",
                         "ServiceUnavailable", "Unavailable"})
LAUNCH_TRIES = 5
PROFILE_WAIT = 60.0  # seconds a new instance profile may take to reach EC2 (see the module docstring)
PROFILE_STEPS = 12  # retries within that wait: every 5 s by default
_PROFILE_NOT_READY = "invalid iam instance profile"

log = logging.getLogger(__name__)


def default_profile_wait() -> float:
    """GPUPLAN_AWS_PROFILE_WAIT seconds, else PROFILE_WAIT: how long a launch waits for a new instance profile."""
    return float(os.environ.get("GPUPLAN_AWS_PROFILE_WAIT") or PROFILE_WAIT)


def profile_not_ready(code: str, message: str) -> bool:
    """EC2's answer while an instance profile is not (yet) visible to it: InvalidParameterValue naming
    iamInstanceProfile (the name or the ARN form)."""
    return code == "InvalidParameterValue" and _PROFILE_NOT_READY in message.lower()


def client_token(run_id: str, *, generation: int, attempt: int, zone: str | None, instance_type: str | None,
                 rank: int | None) -> str:
    """The request's token: readable when it fits in 64 ASCII characters, else the run id and a sha256 of the
    whole (deterministic: the same request always gets the same token). `rank` None: every node in one call."""
    node = "all" if rank is None else str(rank)
    text = f"{run_id}.g{generation}.a{attempt}.{zone or '-'}.{instance_type or '-'}.n{node}"
    if len(text) <= MAX_TOKEN and text.isascii():
        return text
    digest = hashlib.sha256(text.encode()).hexdigest()[:40]
    head = run_id.encode("ascii", "replace").decode()[:MAX_TOKEN - len(digest) - 1]
    return f"{head}.{digest}"


def run_instances(client: Any, params: Mapping[str, Any], *, tries: int = LAUNCH_TRIES, delay: float = 1.0,
                  sleep: Callable[[float], None] | None = None, profile_wait: float = PROFILE_WAIT) -> dict[str, Any]:
    """One RunInstances request, retried (same token) on throttling and internal errors, with jittered
    exponential backoff, and while its instance profile is not yet visible to EC2 (every profile_wait/12 s, for up
    to `profile_wait` s); any other error, capacity included, is raised at once."""
    from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

    sleep = sleep or time.sleep  # looked up per call, so a test can replace time.sleep here
    attempt = 0
    waits = 0  # retries while the instance profile propagates: PROFILE_STEPS of profile_wait / PROFILE_STEPS s
    while True:
        try:
            return dict(client.run_instances(**params))
        except ClientError as exc:
            error = exc.response.get("Error", {})
            code, message = str(error.get("Code") or ""), str(error.get("Message") or "")
            if profile_not_ready(code, message) and params.get("IamInstanceProfile") and waits < PROFILE_STEPS \
                    and profile_wait > 0:
                if waits == 0:
                    log.warning("EC2 does not see instance profile %s yet (IAM propagation): retrying the same "
                                "request for up to %g s", params["IamInstanceProfile"], profile_wait)
                sleep(profile_wait / PROFILE_STEPS)
                waits += 1
                continue
            if code not in RETRY_CODES or attempt == tries - 1:
                raise
        except (ReadTimeoutError, ConnectionClosedError):
            if attempt == tries - 1:
                raise
        sleep(min(delay * 2 ** attempt, 20.0) * random.uniform(0.5, 1.0))
        attempt += 1
