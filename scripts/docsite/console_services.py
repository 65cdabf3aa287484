"""The services a docs page may ask for with `<!-- console-env: NAME -->`: each starts on 127.0.0.1 and gives
the environment its commands need. Nothing reaches a real cloud: fake credentials, no instance metadata, the
endpoint a loopback server. Used by tests/docs/test_examples.py and scripts/docsite/accept_examples.py.

- `aws`: a moto server (the `test` extra installs moto[server]), with an x86_64 image registered in us-east-1
  standing in for the Deep Learning AMI (GPUPLAN_AWS_IMAGE_ID; moto cannot hold AWS's public /aws/ parameters), and
  the S3 bucket `my-runs` the AWS page ships run outputs to.
- `gcp`: the test suite's fake Compute API behind its strict layer of documented GCE rules, and its fake Secret
  Manager (tests/support), for the real google-cloud-compute and secret-manager clients, found the way gcloud
  users move an endpoint: CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE / _SECRETMANAGER and GOOGLE_CLOUD_PROJECT.
- `gcp-catalog`: the test suite's fake Cloud Billing catalog and Compute machine/accelerator types
  (tests/support/fakes/gcp_catalog_server.py) for `catalog refresh --cloud gcp` with the real clients.
- `slurm`: a one-node Slurm cluster on loopback ports (scripts/start_slurm.sh through tests/support/slurmhelp.py),
  found through SLURM_CONF. It needs slurm-wlm and munge and root; where they are absent the page's examples
  are skipped with that reason (`ServiceUnavailable`), except under CI, where scripts/test-services.sh installs
  them and an absent Slurm is a failure.
- `ledger`: not a service but a state: the books tests' hand-built ledger (tests/support/ledger_fixture.py)
  written into the page's database before its first command, with GPUPLAN_NOW at its fixed clock.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

TESTS = Path(__file__).resolve().parents[2] / "tests"
T = TypeVar("T")


class ServiceUnavailable(Exception):
    """A service this machine cannot run (Slurm not installed, not root): the page's examples are skipped."""


def _support_on_path() -> None:
    """The fakes live with the test suite (tests/support), importable as `support.*` as the tests import them."""
    if str(TESTS) not in sys.path:
        sys.path.insert(0, str(TESTS))


@dataclass
class ConsoleServices:
    """Starts the services pages ask for, once each per page, and stops them all at the end."""

    stops: list[Callable[[], None]] = field(default_factory=list)

    def names(self) -> list[str]:
        return ["aws", "azure-prices", "gcp", "gcp-catalog", "slurm", "ledger"]

    def start(self, name: str, page_env: Mapping[str, str]) -> dict[str, str]:
        """Start service `name` for a page whose commands run with `page_env`; the variables it adds."""
        starters: dict[str, Callable[[Mapping[str, str]], dict[str, str]]] = {
            "aws": self._aws, "azure-prices": self._azure_prices, "gcp": self._gcp, "gcp-catalog": self._gcp_catalog,
            "slurm": self._slurm, "ledger": self._ledger}
        if name not in starters:
            raise KeyError(f"no console-env {name!r}; known: {', '.join(self.names())}")
        return starters[name](page_env)

    def _enter(self, manager: AbstractContextManager[T]) -> T:
        value = manager.__enter__()

        def stop() -> None:
            manager.__exit__(None, None, None)

        self.stops.append(stop)
        return value

    def _aws(self, page_env: Mapping[str, str]) -> dict[str, str]:
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        self.stops.append(server.stop)
        host, port = server.get_host_and_port()
        if host != "127.0.0.1":  # pragma: no cover - the address is asked for above
            raise RuntimeError(f"moto listens on {host}, not loopback")
        env = {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
               "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
               "AWS_EC2_METADATA_DISABLED": "true"}
        _support_on_path()
        import boto3

        from support.awsmoto import register_test_ami

        ec2 = boto3.client("ec2", region_name="us-east-1", endpoint_url=env["AWS_ENDPOINT_URL"],
                           aws_access_key_id="testing", aws_secret_access_key="testing")
        s3 = boto3.client("s3", region_name="us-east-1", endpoint_url=env["AWS_ENDPOINT_URL"],
                          aws_access_key_id="testing", aws_secret_access_key="testing")
        s3.create_bucket(Bucket="my-runs")
        return {**env, "GPUPLAN_AWS_IMAGE_ID": register_test_ami(ec2)}

    def _gcp(self, page_env: Mapping[str, str]) -> dict[str, str]:
        _support_on_path()
        from support.fakes.gce_server import FakeCompute
        from support.fakes.secretmanager_server import FakeSecretManager
        from support.fakes.secretmanager_server import serve as serve_secrets
        from support.strict_gce import serve as serve_gce

        project = "gpuplan-test"
        gce = self._enter(serve_gce(FakeCompute(project=project)))
        secrets = self._enter(serve_secrets(FakeSecretManager(project=project)))
        return {"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": gce.endpoint,
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER": secrets.endpoint,
                "GOOGLE_CLOUD_PROJECT": project}

    def _gcp_catalog(self, page_env: Mapping[str, str]) -> dict[str, str]:
        _support_on_path()
        from support.fakes.gcp_catalog_server import FakeGcpCatalog

        catalog = self._enter(FakeGcpCatalog())
        return {**catalog.env(), "GOOGLE_CLOUD_PROJECT": "gpuplan-test"}

    def _slurm(self, page_env: Mapping[str, str]) -> dict[str, str]:
        _support_on_path()
        from support.slurmhelp import slurm_cluster, why_unavailable

        reason = why_unavailable()
        if reason:
            if os.environ.get("CI"):
                raise RuntimeError(f"CI must run the Slurm examples (scripts/test-services.sh): {reason}")
            raise ServiceUnavailable(reason)
        cluster = self._enter(slurm_cluster())
        return cluster.env()

    def _ledger(self, page_env: Mapping[str, str]) -> dict[str, str]:
        _support_on_path()
        from support import ledger_fixture

        Path(page_env["GPUPLAN_HOME"]).mkdir(parents=True, exist_ok=True)
        ledger_fixture.seed(page_env["GPUPLAN_DB"])
        return {"GPUPLAN_NOW": ledger_fixture.NOW_TEXT}

    def _azure_prices(self, page_env: Mapping[str, str]) -> dict[str, str]:
        """Azure's Retail Prices API: the recorded pages of tests/data/azure_prices."""
        _support_on_path()
        from support.fakes.azure_prices_server import serve_prices

        api = self._enter(serve_prices())
        return {"GPUPLAN_AZURE_PRICES_URL": api.url}

    def stop_all(self) -> None:
        for stop in reversed(self.stops):
            stop()
        self.stops.clear()
