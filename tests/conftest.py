"""Shared fixtures: an isolated gpuplan home per test, SQLite and a throwaway PostgreSQL server.

No test may reach a real cloud: the guard below points every SDK at a dead loopback port and fake
credentials unless a test sets its own local endpoint.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

PG_BIN = Path("/usr/lib/postgresql/15/bin")

# moto fixtures (in-process and server) with the guards that keep AWS tests off real AWS, and `strict_aws`: a moto
# server behind the layer that enforces the documented EC2 rules moto ignores (tests/support/strict_aws/).
pytest_plugins = ["support.awsmoto", "support.strict_aws.fixture", "support.fake_arm.fixture"]


def pytest_configure(config: pytest.Config) -> None:
    """Give the CLI child processes a bytecode cache when the environment forbids writing one (as on these
    machines: PYTHONDONTWRITEBYTECODE=1 with no __pycache__ in the checkout, so every `python -m gpuplan` compiled
    gpuplan's sources again, ~0.15 s each). The cache lives in a temp folder, never in the checkout."""
    if os.environ.get("PYTHONDONTWRITEBYTECODE") and not os.environ.get("PYTHONPYCACHEPREFIX"):
        os.environ["PYTHONPYCACHEPREFIX"] = str(Path(tempfile.gettempdir()) / f"gpuplan-test-pycache-{os.getuid()}")
        del os.environ["PYTHONDONTWRITEBYTECODE"]


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own gpuplan home and database, and no route to a real cloud."""
    home = tmp_path / "gpuplan-home"
    monkeypatch.setenv("GPUPLAN_HOME", str(home))
    monkeypatch.setenv("GPUPLAN_DB", f"sqlite:///{home / 'gpuplan.db'}")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    # Anything that forgets to set its own endpoint fails fast on a closed loopback port, not on AWS.
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
    # ... at once: one attempt per call (providers/aws/retries.py honours it), not eight backed-off ones (~7 s). The
    # moto fixtures, which give a live endpoint, remove it again (support.awsmoto.live_endpoint).
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")
    # The public price sources (catalog refresh without credentials) too: a dead loopback port unless a test
    # serves recorded files.
    monkeypatch.setenv("GPUPLAN_AWS_PRICE_LIST_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("GPUPLAN_AZURE_PRICES_URL", "http://127.0.0.1:9/api/retail/prices")
    monkeypatch.delenv("GPUPLAN_GCP_API_KEY", raising=False)
    # Image-platform lookups (gpuplan.jobs.image_registry) go nowhere but a closed loopback port: "unreachable".
    monkeypatch.setenv("GPUPLAN_REGISTRY_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", "http://127.0.0.1:9/compute/v1/")
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE", "http://127.0.0.1:9/storage/v1/")
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER", "http://127.0.0.1:9/")
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER", "http://127.0.0.1:9/")
    monkeypatch.delenv("GPUPLAN_GCS_BUCKET", raising=False)
    monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "gpuplan-test")
    monkeypatch.delenv("GPUPLAN_DEBUG", raising=False)
    # Azure: Resource Manager on a closed loopback port, no subscription and no identity from the environment
    # (the `arm` fixture serves the fake and sets them).
    monkeypatch.setenv("GPUPLAN_AZURE_ARM_ENDPOINT", "https://127.0.0.1:9")
    for var in ("AZURE_SUBSCRIPTION_ID", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "AZURE_CLIENT_SECRET",
                "IDENTITY_ENDPOINT", "IDENTITY_HEADER", "MSI_ENDPOINT", "GPUPLAN_AZURE_SSH_FROM"):
        monkeypatch.delenv(var, raising=False)
    # The user's own ~/.config/gpuplan/config.toml must not reach a test: each gets an empty config home.
    monkeypatch.delenv("GPUPLAN_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config-home"))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A throwaway PostgreSQL 15 cluster on a loopback port (skipped only where PostgreSQL is absent)."""
    if not (PG_BIN / "initdb").exists():
        pytest.skip("PostgreSQL 15 is not installed here")
    if os.environ.get("GPUPLAN_TEST_PG_URL"):
        yield os.environ["GPUPLAN_TEST_PG_URL"]
        return
    folder = Path(tempfile.mkdtemp(prefix="gpuplan-pg-"))
    as_postgres: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres", "postgres")
        as_postgres = ["runuser", "-u", "postgres", "--"]
    port = free_port()
    data = folder / "data"
    subprocess.run([*as_postgres, str(PG_BIN / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust",
                    "-E", "UTF8", "--no-sync"], check=True, capture_output=True)
    options = (f"-c listen_addresses=127.0.0.1 -p {port} -k {folder} -c fsync=off "
               "-c synchronous_commit=off -c full_page_writes=off")
    subprocess.run([*as_postgres, str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(folder / "log"), "-w",
                    "-o", options, "start"], check=True, capture_output=True)
    try:
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        subprocess.run([*as_postgres, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                       capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def fresh_postgres_db(postgres_url: str) -> Iterator[str]:
    """A new, empty database on the session's PostgreSQL server, dropped afterwards."""
    from sqlalchemy import create_engine, text

    name = f"t_{os.getpid()}_{int(time.monotonic_ns() % 10**9)}"
    admin = create_engine(postgres_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield postgres_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Run a store test on SQLite and on PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'store.db'}"
    return request.getfixturevalue("fresh_postgres_db")


@pytest.fixture(scope="session")
def slurm() -> Iterator[object]:
    """A real one-node Slurm cluster on 127.0.0.1 for the whole session (tests/support/slurmhelp.py; skipped only where
    Slurm is not installed or we are not root)."""
    from support.slurmhelp import slurm_cluster, why_unavailable

    reason = why_unavailable()
    if reason:
        pytest.skip(reason)
    with slurm_cluster() as cluster:
        yield cluster


@pytest.fixture
def gce(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The fake Compute API (tests/support/fakes/gce_server.py) behind the strict layer of documented GCE rules
    (tests/support/strict_gce.py: labels, image families, Hyperdisk-only boot disks, Spot/Flex-only shapes; all on,
    `gce.strict` switches them) on a loopback port, found the way gcloud users point the real client elsewhere:
    CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE and GOOGLE_CLOUD_PROJECT."""
    from support.fakes.gce_server import FakeCompute
    from support.strict_gce import serve

    with serve(FakeCompute(project="gpuplan-test")) as fake:
        monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", fake.endpoint)
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "gpuplan-test")
        yield fake


@pytest.fixture
def secretmanager(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """The fake Secret Manager REST API (tests/support/fakes/secretmanager_server.py) on a loopback port, found through
    gcloud's CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER."""
    from support.fakes.secretmanager_server import FakeSecretManager, serve

    with serve(FakeSecretManager(project="gpuplan-test")) as fake:
        monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER", fake.endpoint)
        # Resource Manager's projects.testIamPermissions (the launch's permission check) is answered there too.
        monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER", fake.endpoint)
        yield fake
