"""Azure GPU VM prices from the public Retail Prices API: recorded pages served on 127.0.0.1, followed by their
NextPageLink, parsed into Linux on-demand and spot prices (Windows, Low Priority and DevTest meters left out)."""

from __future__ import annotations

import http.server
import threading
import urllib.parse
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.providers.azure.prices import GPU_FILTER, VmPrice, fetch_vm_prices

PAGES = Path(__file__).resolve().parents[3] / "data" / "azure_prices"


@pytest.fixture
def prices_api() -> Iterator[tuple[str, list[str]]]:
    asked: list[str] = []

    class Pages(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
            body = (PAGES / ("page2.json" if query.get("$skip") == ["100"] else "page1.json")).read_text()
            body = body.replace("https://prices.azure.com:443", f"http://127.0.0.1:{self.server.server_address[1]}")
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Pages)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/retail/prices", asked
    finally:
        server.shutdown()
        server.server_close()


def test_every_page_is_read_and_linux_on_demand_and_spot_are_kept(prices_api: tuple[str, list[str]]) -> None:
    base, asked = prices_api
    prices = fetch_vm_prices(base=base)
    assert prices == [
        VmPrice("Standard_NC24ads_A100_v4", "westeurope", Decimal("4.043"), Decimal("1.2129")),
        VmPrice("Standard_ND96asr_v4", "eastus", Decimal("27.197"), Decimal("8.1591")),
    ]
    first = urllib.parse.parse_qs(urllib.parse.urlsplit(asked[0]).query)
    assert first["$filter"] == [GPU_FILTER] and first["api-version"] == ["2023-01-01-preview"]
    assert len(asked) == 2


def test_a_next_page_link_to_another_host_is_refused() -> None:
    import io
    import json

    def opener(url: str) -> io.BytesIO:
        return io.BytesIO(json.dumps({"Items": [], "NextPageLink": "https://elsewhere.example/p?$skip=100"}).encode())

    with pytest.raises(ValueError, match="leaves"):
        fetch_vm_prices(opener, base="http://127.0.0.1:9/api/retail/prices")
