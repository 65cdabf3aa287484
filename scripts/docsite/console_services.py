"""The services a docs page may ask for with `<!-- console-env: NAME -->`: each starts on 127.0.0.1 and gives
the environment its commands need. Nothing reaches a real cloud: fake credentials, no instance metadata, the
endpoint a loopback server. Used by tests/docs/test_examples.py and scripts/docsite/accept_examples.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class ConsoleServices:
    """Starts the services pages ask for, once each per page, and stops them all at the end."""

    stops: list[Callable[[], None]] = field(default_factory=list)

    def names(self) -> list[str]:
        return ["aws", "azure-prices"]

    def start(self, name: str) -> dict[str, str]:
        if name == "aws":
            return self._aws()
        if name == "azure-prices":
            return self._azure_prices()
        raise KeyError(f"no console-env {name!r}; known: {', '.join(self.names())}")

    def _aws(self) -> dict[str, str]:
        """A moto server standing in for AWS (the `test` extra installs moto[server])."""
        from moto.server import ThreadedMotoServer

        server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        server.start()
        self.stops.append(server.stop)
        host, port = server.get_host_and_port()
        if host != "127.0.0.1":  # pragma: no cover - the address is asked for above
            raise RuntimeError(f"moto listens on {host}, not loopback")
        return {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_ACCESS_KEY_ID": "testing",
                "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_EC2_METADATA_DISABLED": "true"}

    def _azure_prices(self) -> dict[str, str]:
        """Azure's Retail Prices API: the recorded pages of tests/data/azure_prices (tests/ is on the path)."""
        import contextlib

        from support.fakes.azure_prices_server import serve_prices

        stack = contextlib.ExitStack()
        api = stack.enter_context(serve_prices())
        self.stops.append(stack.close)
        return {"GPUPLAN_AZURE_PRICES_URL": api.url}

    def stop_all(self) -> None:
        for stop in reversed(self.stops):
            stop()
        self.stops.clear()
