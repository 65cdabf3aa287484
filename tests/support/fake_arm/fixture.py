"""Serving the fake ARM (TLS on a free loopback port) and the `arm` pytest fixture.

The product finds it the way a user moves Azure Resource Manager (providers/azure/arm.py):
GPUPLAN_AZURE_ARM_ENDPOINT and AZURE_SUBSCRIPTION_ID; the certificate authority through REQUESTS_CA_BUNDLE (the
requests transport azure-core uses reads it). A CLI under test gets its token from `DefaultAzureCredential`
itself, through the App Service managed-identity variables (IDENTITY_ENDPOINT + IDENTITY_HEADER) pointing at the
fake's token endpoint; in-process tests pass `StaticToken`, a credential double that only hands out a token.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from werkzeug.serving import make_server

from support.fake_arm.model import ArmState
from support.fake_arm.server import IDENTITY_HEADER, TOKEN, FakeArmApp
from support.fake_arm.strict import StrictArmRules
from support.fake_arm.tls import make_certificate
from support.fakes.wsgi import QuietHandler


class KeepAliveHandler(QuietHandler):
    """HTTP/1.1, so azure-core's requests session keeps its TLS connection across the dozens of calls a launch
    makes (PUT, operation polls, GET per resource) instead of a handshake per request, as a real ARM allows."""

    protocol_version = "HTTP/1.1"


class StaticToken:
    """A credential double: azure-core's TokenCredential protocol, one fixed token (the fake checks only that a
    bearer token is sent)."""

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        from azure.core.credentials import AccessToken

        return AccessToken(TOKEN, int(time.time()) + 3600)


@dataclass
class RunningArm:
    state: ArmState
    rules: StrictArmRules
    endpoint: str
    ca_bundle: Path
    app: FakeArmApp

    def fresh(self) -> RunningArm:
        """The same server (port, certificate) over a new, empty ArmState and fresh rules: what one test sees when
        a module shares the server (starting one costs a certificate, a TLS listener and a thread per test)."""
        self.app.state = ArmState()
        self.app.rules = StrictArmRules()
        return dataclasses.replace(self, state=self.app.state, rules=self.app.rules)

    def env(self) -> dict[str, str]:
        """The environment a CLI under test needs to reach this fake (and nothing else)."""
        return {"GPUPLAN_AZURE_ARM_ENDPOINT": self.endpoint, "AZURE_SUBSCRIPTION_ID": self.state.subscription,
                "REQUESTS_CA_BUNDLE": str(self.ca_bundle), "IDENTITY_ENDPOINT": f"{self.endpoint}/msi/token",
                "IDENTITY_HEADER": IDENTITY_HEADER}


@contextmanager
def serve_arm(folder: Path, state: ArmState | None = None,
              rules: StrictArmRules | None = None) -> Iterator[RunningArm]:
    state = state or ArmState()
    rules = rules or StrictArmRules()
    app = FakeArmApp(state, rules)
    cert = make_certificate(folder)
    server = make_server("127.0.0.1", 0, app, threaded=True, request_handler=KeepAliveHandler,
                         ssl_context=(str(cert.cert), str(cert.key)))
    app.base = f"https://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-arm",
                              daemon=True)
    thread.start()
    try:
        yield RunningArm(state=state, rules=rules, endpoint=app.base, ca_bundle=cert.cert, app=app)
    finally:
        server.shutdown()
        thread.join(timeout=5)


@pytest.fixture(scope="session")
def ssh_key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One public key for every launch of the session (a user's ~/.ssh key, as the provider finds one): without
    it each launch makes a throwaway 3072-bit RSA key, ~0.2 s of CPU each (more on a loaded machine)."""
    from gpuplan.providers.azure.settings import throwaway_key

    path = tmp_path_factory.mktemp("ssh") / "id_rsa.pub"
    path.write_text(throwaway_key() + "\n")
    return path


@pytest.fixture(scope="module")
def arm_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningArm]:
    """One fake ARM server per test module; each test gets it with empty state (`arm`)."""
    with serve_arm(tmp_path_factory.mktemp("fake-arm")) as running:
        yield running


@pytest.fixture
def arm(arm_server: RunningArm, ssh_key_file: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunningArm]:
    """The fake ARM behind its strict layer, found through the environment like a moved endpoint; its state and
    rules are new for each test. Launches take the session's ssh key (GPUPLAN_AZURE_SSH_PUBLIC_KEY)."""
    monkeypatch.setenv("GPUPLAN_AZURE_SSH_PUBLIC_KEY", str(ssh_key_file))
    running = arm_server.fresh()
    for key, value in running.env().items():
        monkeypatch.setenv(key, value)
    yield running
