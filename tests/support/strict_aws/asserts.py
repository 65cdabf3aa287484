"""Small helpers the strict-layer tests share: what a refused call answered, and a one-instance launch."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from botocore.exceptions import ClientError


def refusal(call: Callable[[], Any]) -> tuple[str, int, str]:
    """(code, HTTP status, message) of the ClientError `call` raises; fails the test if it raises none."""
    with pytest.raises(ClientError) as caught:
        call()
    error = caught.value.response
    return error["Error"]["Code"], error["ResponseMetadata"]["HTTPStatusCode"], error["Error"]["Message"]


def launch(ec2: Any, ami: str, **extra: Any) -> dict[str, Any]:
    """RunInstances of one t3.micro (unless `extra` says otherwise)."""
    extra.setdefault("InstanceType", "t3.micro")
    extra.setdefault("MinCount", 1)
    extra.setdefault("MaxCount", 1)
    return dict(ec2.run_instances(ImageId=ami, **extra))
