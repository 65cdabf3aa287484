"""Providers are found by name through the `gpuplan.providers` entry-point group."""

from __future__ import annotations

import pytest

from gpuplan.providers.base import LaunchRequest, ProviderError
from gpuplan.providers.registry import load_provider_class, provider_names


def test_builtin_names_are_registered() -> None:
    assert {"local", "aws", "gcp", "slurm"} <= set(provider_names())


def test_unknown_provider_lists_known_ones() -> None:
    with pytest.raises(ProviderError, match=r"known: .*local"):
        load_provider_class("no-such-cloud")


def test_secrets_stay_out_of_repr_and_tags() -> None:
    request = LaunchRequest(run_id="r-1", name="n", command="true", run_dir="/tmp",
                            secrets={"WANDB_API_KEY": "s3cr3t"})
    assert "s3cr3t" not in repr(request)
    assert "s3cr3t" not in str(request.tags())
