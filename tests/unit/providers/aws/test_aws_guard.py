"""The AWS test set-up refuses, loudly, anything that could reach real AWS."""

from __future__ import annotations

from typing import Any

import pytest

from support.awsmoto import assert_fake_credentials, guard_http


def test_real_looking_credentials_or_a_profile_stop_the_aws_fixtures(monkeypatch: pytest.MonkeyPatch) -> None:
    assert_fake_credentials()  # the conftest's fake pair passes
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    with pytest.raises(RuntimeError, match="could reach real AWS"):
        assert_fake_credentials()
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_PROFILE", "prod")
    with pytest.raises(RuntimeError, match="AWS_PROFILE is set"):
        assert_fake_credentials()


def test_a_request_to_a_non_loopback_host_is_refused(monkeypatch: pytest.MonkeyPatch, aws_session: Any) -> None:
    from botocore.config import Config

    guard_http(monkeypatch)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # no moto here: the request would go to amazonaws.com
    ec2 = aws_session.client("ec2", region_name="us-east-1", config=Config(retries={"max_attempts": 1}))
    with pytest.raises(RuntimeError, match="not loopback"):
        ec2.describe_regions()


def test_the_default_endpoint_of_every_test_is_a_dead_loopback_port() -> None:
    import os
    from urllib.parse import urlparse

    assert urlparse(os.environ["AWS_ENDPOINT_URL"]).hostname == "127.0.0.1"
