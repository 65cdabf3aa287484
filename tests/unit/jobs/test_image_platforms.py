"""The platforms of an image, read from a real registry on 127.0.0.1 (support.registry: Debian's docker-registry),
anonymously and through the Bearer-token flow Docker Hub, ghcr.io and public ECR use."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from gpuplan.jobs.image_registry import RegistryError, docker_credentials, image_platforms, parse_reference

from support.registry import serve_registry


@pytest.fixture(autouse=True)
def the_real_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPUPLAN_REGISTRY_ENDPOINT", raising=False)  # tests/conftest.py points it at a closed port


def test_a_single_arch_and_a_multi_arch_image(tmp_path: Path) -> None:
    with serve_registry(tmp_path / "reg") as (registry, _):
        registry.push_image("team/train", "amd64-only", ["amd64"])
        registry.push_image("team/train", "multi", ["amd64", "arm64"], attestation=True)
        single = image_platforms(f"{registry.host}/team/train:amd64-only")
        multi = image_platforms(f"{registry.host}/team/train:multi")
        with pytest.raises(RegistryError, match="HTTP 404"):
            image_platforms(f"{registry.host}/team/train:missing")
    assert single.architectures == {"amd64"}
    assert multi.architectures == {"amd64", "arm64"}  # the attestation entry (unknown/unknown) is no platform


def test_the_bearer_token_flow_with_the_users_docker_credentials(tmp_path: Path) -> None:
    config = tmp_path / "docker"
    config.mkdir()
    (config / "config.json").write_text(json.dumps({"auths": {"127.0.0.1": {}}}))
    with serve_registry(tmp_path / "reg", token_auth=True) as (registry, tokens):
        assert tokens is not None
        push = "Bearer " + tokens.token("repository:team/private:pull,push")
        registry.push_image("team/private", "1", ["arm64"], auth=push)
        anonymous = image_platforms(f"{registry.host}/team/private:1", config_dir=str(config))
        creds = base64.b64encode(b"alice:s3cret").decode()
        (config / "config.json").write_text(json.dumps({"auths": {registry.host: {"auth": creds}}}))
        signed_in = image_platforms(f"{registry.host}/team/private:1", config_dir=str(config))
    assert anonymous.architectures == signed_in.architectures == {"arm64"}
    asked = [r for r in tokens.requests if r["scope"]]
    assert [r["scope"] for r in asked] == ["repository:team/private:pull"] * 2
    assert all(r["service"] == "gpuplan-test-registry" for r in asked)
    assert asked[0]["authorization"] == "" and asked[1]["authorization"] == f"Basic {creds}"


def test_an_unreachable_registry_is_an_error_not_a_guess(tmp_path: Path) -> None:
    with pytest.raises(RegistryError, match="cannot be reached"):
        image_platforms("127.0.0.1:9/team/train:1", timeout=2)


def test_references_as_docker_reads_them(tmp_path: Path) -> None:
    hub = parse_reference("pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime")
    assert (hub.registry, hub.repository, hub.reference) == ("docker.io", "pytorch/pytorch",
                                                              "2.4.0-cuda12.1-cudnn9-runtime")
    assert hub.base_url() == "https://registry-1.docker.io/v2/pytorch/pytorch"
    assert parse_reference("ubuntu").repository == "library/ubuntu"
    assert parse_reference("ghcr.io/o/r@sha256:ab").reference == "sha256:ab"
    assert parse_reference("127.0.0.1:5000/o/r").base_url() == "http://127.0.0.1:5000/v2/o/r"
    (tmp_path / "config.json").write_text(json.dumps(
        {"auths": {"https://index.docker.io/v1/": {"auth": base64.b64encode(b"u:p").decode()}}}))
    assert docker_credentials("docker.io", str(tmp_path)) == "u:p"
    assert docker_credentials("ghcr.io", str(tmp_path)) is None
