"""pytest plugin: `strict_aws`, a moto server behind the strict layer, both on 127.0.0.1, shared by a test module and
reset before each test (registered in tests/conftest.py's pytest_plugins)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pytest

from . import checks
from .layer import StrictAws
from support.awsmoto import (
    FAKE_KEY,
    LOOPBACK,
    TEST_REGIONS,
    MotoServer,
    _enable_type_validation,
    assert_fake_credentials,
    guard_http,
    live_endpoint,
    register_test_ami,
)


@dataclass
class StrictAwsServer:
    """The layer (`endpoint`) in front of a moto server (`moto.endpoint`); `layer` holds the rules' state."""

    endpoint: str
    layer: StrictAws
    moto: MotoServer
    amis: dict[str, str] = field(default_factory=dict)
    _clients: dict[tuple[str, str, str, int], Any] = field(default_factory=dict, repr=False)

    def reset(self) -> None:
        self.moto.reset()
        self.layer.reset()

    def env(self) -> dict[str, str]:
        """The environment a `gpuplan` child process needs to talk to AWS through the layer, and nothing else."""
        assert urlparse(self.endpoint).hostname in LOOPBACK, self.endpoint
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": FAKE_KEY, "AWS_SECRET_ACCESS_KEY": FAKE_KEY,
                "AWS_DEFAULT_REGION": "us-east-1", "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
                **({"GPUPLAN_AWS_IMAGE_ID": self.amis["us-east-1"]} if self.amis else {})}

    def _client(self, endpoint: str, service: str, region: str, attempts: int) -> Any:
        import boto3
        from botocore.config import Config

        key = (endpoint, service, region, attempts)
        if key not in self._clients:
            session = boto3.session.Session(aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_KEY)
            self._clients[key] = session.client(service, region_name=region, endpoint_url=endpoint,
                                                config=Config(retries={"total_max_attempts": attempts}))
        return self._clients[key]

    def client(self, service: str, region: str = "us-east-1", *, attempts: int = 1) -> Any:
        """A botocore client through the layer. `attempts=1`: no retries, so a 5xx (InsufficientInstanceCapacity)
        surfaces at once; pass botocore's default (5 for legacy mode) to see what a default client does."""
        return self._client(self.endpoint, service, region, attempts)

    def moto_client(self, service: str, region: str = "us-east-1") -> Any:
        """A client straight to moto, bypassing the layer: plain moto's verdict on a request."""
        return self._client(self.moto.endpoint, service, region, 1)

    # The layer's checks, on the instances this server holds (see checks.py for the rules and their docs).
    def reachable(self, source: str, destination: str, **kwargs: Any) -> bool:
        return checks.reachable(self.layer.view, source, destination, **kwargs)

    def efa_ready(self, instance: str, **kwargs: Any) -> bool:
        return checks.efa_ready(self.layer.view, instance, **kwargs)

    def credentials_on_instance(self, instance: str, **kwargs: Any) -> bool:
        return checks.credentials_on_instance(self.layer.view, instance, **kwargs)

    def boot_has_credentials_it_needs(self, instance: str, **kwargs: Any) -> bool:
        return checks.boot_has_credentials_it_needs(self.layer.view, instance, **kwargs)


@pytest.fixture(scope="module")
def strict_aws_module() -> Iterator[StrictAwsServer]:
    """moto server + layer for one test module (starting moto costs ~1 s)."""
    from moto.server import ThreadedMotoServer

    from support.fakes.wsgi import serve_wsgi

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    with ExitStack() as stack:
        stack.callback(server.stop)
        host, port = server.get_host_and_port()
        moto = MotoServer(endpoint=f"http://{host}:{port}", server=server)
        layer = StrictAws(moto.endpoint)
        layer_port = stack.enter_context(serve_wsgi(layer, name="strict-aws"))
        yield StrictAwsServer(endpoint=f"http://127.0.0.1:{layer_port}", layer=layer, moto=moto)


@pytest.fixture
def strict_aws(strict_aws_module: StrictAwsServer, monkeypatch: pytest.MonkeyPatch) -> StrictAwsServer:
    """The module's strict layer and moto, both reset, a GPU-like test AMI registered in each test region, and this
    test's environment (AWS_ENDPOINT_URL, fake keys, GPUPLAN_AWS_IMAGE_ID) pointed at the layer."""
    assert_fake_credentials()
    _enable_type_validation(monkeypatch)
    strict_aws_module.reset()
    for key, value in strict_aws_module.env().items():
        monkeypatch.setenv(key, value)
    live_endpoint(monkeypatch)
    guard_http(monkeypatch)
    # Registered through the layer: moto drops RegisterImage's Architecture, the layer keeps it.
    strict_aws_module.amis = {r: register_test_ami(strict_aws_module.client("ec2", r)) for r in TEST_REGIONS}
    monkeypatch.setenv("GPUPLAN_AWS_IMAGE_ID", strict_aws_module.amis["us-east-1"])
    return strict_aws_module
