"""What a user sets up before launching a process job on AWS: a run storage for its code and checkpoints.

Since a `runtime: process` job whose command names a file of its folder is refused on a cloud without a way to
ship that folder (gpuplan.launching.code_upload), tests that launch such a job on AWS (moto, or the strict layer in
front of it) give it one: an S3 bucket as `[defaults] storage` in a config file, and an instance profile, which
the machines need to use it (gpuplan.providers.aws.iam).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from support.awsmoto import create_instance_profile


def use_s3_storage(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bucket: str = "gpuplan-test-storage") -> str:
    """Create the bucket and profile through the test's AWS endpoint (AWS_ENDPOINT_URL); returns the storage."""
    import boto3

    boto3.client("s3", region_name="us-east-1").create_bucket(Bucket=bucket)
    monkeypatch.setenv("GPUPLAN_AWS_INSTANCE_PROFILE", create_instance_profile(boto3.client("iam",
                                                                                             region_name="us-east-1")))
    storage = f"s3://{bucket}/runs"
    config = tmp_path / "gpuplan-config.toml"
    config.write_text(f'[defaults]\nstorage = "{storage}"\n')
    monkeypatch.setenv("GPUPLAN_CONFIG", str(config))
    return storage
