"""gpuplan's AWS clients retry as the user's AWS setting says (AWS_MAX_ATTEMPTS / the config file's max_attempts,
total attempts), else gpuplan's default; the launch client's fixed 0 retries win over both."""

from __future__ import annotations

from pathlib import Path

import boto3
import pytest

from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.aws.retries import DEFAULT_RETRIES, retries_config


def _retries(client: object) -> dict:
    return dict(client.meta.config.retries)  # type: ignore[attr-defined]


def test_the_users_max_attempts_wins_over_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "3")
    provider = AwsProvider(session=boto3.session.Session())
    assert _retries(provider.client("ec2", "us-east-1"))["total_max_attempts"] == 3
    assert _retries(provider.launch_client("us-east-1"))["total_max_attempts"] == 1  # RunInstances: sent once


def test_without_a_setting_the_default_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    provider = AwsProvider(session=boto3.session.Session())
    assert _retries(provider.client("ec2", "us-east-1"))["total_max_attempts"] == DEFAULT_RETRIES + 1
    assert retries_config(boto3.session.Session(), "adaptive", None) == {"mode": "adaptive",
                                                                          "max_attempts": DEFAULT_RETRIES}


def test_the_config_files_max_attempts_counts_too(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    config = tmp_path / "aws-config"
    config.write_text("[default]\nmax_attempts = 2\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    assert retries_config(boto3.session.Session(), "standard", None) == {"mode": "standard", "total_max_attempts": 2}
