"""Durable run storage: the spec's `storage:`, the run's URLs, which cloud takes which storage, the AWS role."""

from __future__ import annotations

import pytest

from gpuplan.jobs.spec import parse_spec
from gpuplan.jobs.storage import check_storage, checkpoint_url, storage_misfit, storage_scheme
from gpuplan.providers.aws import iam as aws_iam

SPEC = "name: s\ncommand: python t.py\nstorage: {storage}\n"


@pytest.mark.parametrize(("value", "scheme"), [("s3://my-bucket/runs", "s3"), ("gs://b-1.x/a/b", "gs"),
                                                ("/shared/gpuplan", "path"), ("s3://my-bucket", "s3")])
def test_storage_values(value: str, scheme: str) -> None:
    assert storage_scheme(value) == scheme
    assert parse_spec(SPEC.format(storage=value + "/")).storage == value


@pytest.mark.parametrize("value", ["relative/dir", "s3://UPPER/x", "http://x/y", "/a/../b", "s3://b/$(id)",
                                   "/a\nb", "s3://ab"])
def test_bad_storage_is_a_spec_error(value: str) -> None:
    with pytest.raises(ValueError, match="storage"):
        check_storage(value)


def test_the_run_id_is_in_the_path() -> None:
    assert checkpoint_url("s3://b-b/p", "r-123") == "s3://b-b/p/r-123/checkpoints"


def test_each_cloud_takes_its_own_storage() -> None:
    assert storage_misfit("s3://bkt/p", "aws", ("s3",)) is None and storage_misfit("gs://bkt/p", "gcp", ("gs",)) is None
    assert storage_misfit("/shared", "slurm", ("path",)) is None and storage_misfit("gs://bkt/p", "plugin", ()) is None
    assert "gs:// prefix" in (storage_misfit("s3://bkt/p", "gcp", ("gs",)) or "")
    assert "s3:// prefix" in (storage_misfit("/shared", "aws", ("s3",)) or "")


def test_the_aws_role_may_touch_only_the_storage_prefix() -> None:
    policy = aws_iam.instance_policy("out", storage="s3://ckpt-bucket/team/runs")
    statements = [{k: v for k, v in s.items() if k != "Sid"} for s in policy["Statement"][1:3]]  # Sid: per prefix
    assert statements[0] == {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
                             "Resource": "arn:aws:s3:::ckpt-bucket/team/runs/*"}
    assert statements[1] == {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::ckpt-bucket",
                             "Condition": {"StringLike": {"s3:prefix": ["team/runs/*"]}}}
    assert "copying checkpoints to and from s3://ckpt-bucket/team/runs" in aws_iam.needed_for(
        secrets=False, bucket=None, storage="s3://ckpt-bucket/team/runs")
    assert aws_iam.needed_for(secrets=False, bucket=None, storage="/shared") == ()


def test_the_strict_s3_check_denies_what_the_role_does_not_allow() -> None:
    from support.s3_policy import allowed, s3_request

    role = aws_iam.instance_policy("out", storage="s3://ckpt-bucket/team/runs")
    assert allowed(role, s3_request("GET", "/ckpt-bucket?list-type=2&prefix=team/runs/r-1/checkpoints/"))
    assert allowed(role, s3_request("PUT", "/ckpt-bucket/team/runs/r-1/checkpoints/m.pt"))
    assert allowed(role, s3_request("HEAD", "/ckpt-bucket/team/runs/r-1/code.tar.gz"))
    assert allowed(role, s3_request("PUT", "/out/gpuplan/r-1/node-0/job.log"))
    assert not allowed(role, s3_request("GET", "/ckpt-bucket?list-type=2&prefix=other/"))
    assert not allowed(role, s3_request("GET", "/ckpt-bucket/other/secret"))
    assert not allowed(role, s3_request("GET", "/out/gpuplan/r-1/node-0/job.log"))  # outputs: write only
    assert not allowed(role, s3_request("DELETE", "/ckpt-bucket/team/runs/r-1/checkpoints/m.pt"))
