"""The launch sequence's view of the run's storage: the spec's, else `[defaults] storage`; refused on the wrong
cloud; the options the providers' boot scripts read."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.run_storage import check_run_storage, storage_options
from gpuplan.providers.aws.provider import AwsProvider

SPEC = "name: s\ncommand: python t.py\ncheckpoint: {dir: ck, interval: 10m}\n"


def config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    path = tmp_path / "config.toml"
    path.write_text(text)
    monkeypatch.setenv("GPUPLAN_CONFIG", str(path))


def test_the_spec_storage_wins_and_names_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config(tmp_path, monkeypatch, '[defaults]\nstorage = "s3://default-bkt/x"\n')
    spec = parse_spec(SPEC + "storage: s3://mine-bkt/runs\n")
    options = storage_options(spec, "r-1", spot=True)
    assert options == {"run_storage_url": "s3://mine-bkt/runs/r-1",
                       "checkpoint_url": "s3://mine-bkt/runs/r-1/checkpoints",
                       "checkpoint_sync_seconds": pytest.approx(600.0), "interruption_watch": True,
                       "code_url": "s3://mine-bkt/runs/r-1/code.tar.gz"}


def test_the_config_default_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config(tmp_path, monkeypatch, '[defaults]\nstorage = "gs://default-bkt/x"\n')
    options = storage_options(parse_spec(SPEC), "r-2", spot=True)
    assert options["checkpoint_url"] == "gs://default-bkt/x/r-2/checkpoints"
    assert options["interruption_watch"] is True
    assert storage_options(parse_spec(SPEC), "r-2", spot=False)["interruption_watch"] is False
    with pytest.raises(UserError, match="cannot be used on aws"):
        check_run_storage(parse_spec(SPEC), AwsProvider(region="us-east-1"))


def test_no_storage_no_copies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config(tmp_path, monkeypatch, "")
    options = storage_options(parse_spec(SPEC), "r-3", spot=True)
    assert options["checkpoint_url"] is None and options["run_storage_url"] is None
    check_run_storage(parse_spec(SPEC), AwsProvider(region="us-east-1"))
