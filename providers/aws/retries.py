"""How often gpuplan's AWS clients send a request: the user's own AWS retry setting where there is one.

AWS SDKs read `max_attempts` (total attempts, the first included) from AWS_MAX_ATTEMPTS or the shared config
file: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html. botocore ignores both once a
client is given an explicit retry Config, so gpuplan reads the setting itself and uses its own default only
without one. A user who is offline, or whose endpoint is down, can make a dry run give up at once
(AWS_MAX_ATTEMPTS=1) instead of waiting out eight backed-off attempts per call.
"""

from __future__ import annotations

from typing import Any

DEFAULT_RETRIES = 8  # retries after the first request, botocore's `max_attempts` (throttling is common on EC2)


def retries_config(session: Any, mode: str, retries: int | None) -> dict[str, Any]:
    """botocore's `retries` for one client: `retries` when the caller fixes them (the launch client: 0),
    else the user's configured max_attempts, else DEFAULT_RETRIES."""
    if retries is not None:
        return {"mode": mode, "max_attempts": retries}
    configured = getattr(session, "_session", session).get_config_variable("max_attempts")
    if configured is not None:
        return {"mode": mode, "total_max_attempts": max(1, int(configured))}
    return {"mode": mode, "max_attempts": DEFAULT_RETRIES}
