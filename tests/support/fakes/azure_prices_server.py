"""The Azure Retail Prices API's recorded pages (tests/data/azure_prices) served on 127.0.0.1.

The first request (no `$skip`) gets page1.json, `$skip=100` page2.json, `$skip=200` page3.json: what the real API's
NextPageLink pagination asks for (https://learn.microsoft.com/rest/api/cost-management/retail-prices/azure-retail-prices).
Each page's absolute NextPageLink (https://prices.azure.com:443/...) is rewritten to this server. Every request's
path is recorded, so a test can check the filter the client sent."""

from __future__ import annotations

import contextlib
import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

PAGES = Path(__file__).resolve().parents[2] / "data" / "azure_prices"
BY_SKIP = {None: "page1.json", "100": "page2.json", "200": "page3.json"}


@dataclass
class PricesApi:
    """Where the fake listens (`url`: the API's path, as GPUPLAN_AZURE_PRICES_URL takes it) and what it was asked."""

    url: str
    asked: list[str] = field(default_factory=list)


@contextlib.contextmanager
def serve_prices(pages: Path = PAGES) -> Iterator[PricesApi]:
    api = PricesApi(url="")

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            api.asked.append(self.path)
            skip = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("$skip", [None])[0]
            name = BY_SKIP.get(skip)
            if name is None:
                self.send_error(404)
                return
            port = self.server.server_address[1]
            body = (pages / name).read_text().replace("https://prices.azure.com:443", f"http://127.0.0.1:{port}")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    api.url = f"http://127.0.0.1:{server.server_address[1]}/api/retail/prices"
    try:
        yield api
    finally:
        server.shutdown()
        server.server_close()
