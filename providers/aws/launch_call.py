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
"""

from __future__ import annotations

import hashlib
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

MAX_TOKEN = 64
RETRY_CODES = frozenset({"RequestLimitExceeded", "InternalError", "InternalFailure", "ServerInternal",
                         "ServiceUnavailable", "Unavailable"})
LAUNCH_TRIES = 5


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
                  sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """One RunInstances request, retried (same token) only on throttling and internal errors, with jittered
    exponential backoff; any other error, capacity included, is raised at once."""
    from botocore.exceptions import ClientError, ConnectionClosedError, ReadTimeoutError

    for attempt in range(tries):
        try:
            return dict(client.run_instances(**params))
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code") or "")
            if code not in RETRY_CODES or attempt == tries - 1:
                raise
        except (ReadTimeoutError, ConnectionClosedError):
            if attempt == tries - 1:
                raise
        sleep(min(delay * 2 ** attempt, 20.0) * random.uniform(0.5, 1.0))
    raise AssertionError("unreachable")
