"""Issue 35, item 5: `gpuplan catalog refresh` without cloud credentials, from AWS's public Price List bulk files
(recorded copies in tests/data/aws_price_list served on 127.0.0.1), keeping provenance; and the staleness warning
once per `prices`, not one line per cloud and source."""

from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.clihelp import run_subprocess

FILES = Path(__file__).resolve().parents[1] / "data" / "aws_price_list"


@pytest.fixture
def price_list(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(FILES))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    monkeypatch.setenv("GPUPLAN_AWS_PRICE_LIST_URL", url)
    try:
        yield url
    finally:
        server.shutdown()
        server.server_close()


def test_refresh_without_credentials_reads_the_public_price_list(price_list: str) -> None:
    # No credentials anywhere (the test environment's fake keys removed; no profile, no config files)
    env = {k: v for k, v in os.environ.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")}
    done = subprocess.run([sys.executable, "-m", "gpuplan", "catalog", "refresh", "--cloud", "aws", "--json"],
                          capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # auto chose the public files (the source says so)
    assert report["regions"] == ["us-east-1", "us-west-2"]
    assert "public Price List Bulk API" in report["source"] and "shipped snapshot" in report["source"]
    assert set(report["gpus"]) == {"A10G", "H100", "L40S"}
    offers = run_subprocess("prices", "--cloud", "aws", "--gpu", "H100", "--min-gpus", "8", "--json", "--limit", "0")
    assert offers.exit_code == 0, offers.stderr
    p5 = [o for o in offers.json() if o["instance_type"] == "p5.48xlarge" and o["region"] == "us-east-1"]
    assert p5 and all(str(o["price_per_hour"]).startswith("55.04") for o in p5), p5
    shown = run_subprocess("prices", "--cloud", "aws", "--gpu", "A10G")
    assert "public Price List Bulk API" in shown.stderr  # where the prices come from, in the one source line
    assert "warning" not in shown.stderr  # fresh: no staleness warning


def test_public_refresh_of_some_regions_skips_what_is_not_on_demand_linux(price_list: str) -> None:
    out = run_subprocess("catalog", "refresh", "--cloud", "aws", "--source", "public", "--regions", "us-east-1",
                         "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json()["regions"] == ["us-east-1"]
    rows = run_subprocess("prices", "--cloud", "aws", "--gpu", "A10G", "--json", "--limit", "0").json()
    assert {str(r["price_per_hour"]) for r in rows} == {"0.98"}  # not the SQL Web or reservation rows
    missing = run_subprocess("catalog", "refresh", "--cloud", "aws", "--source", "public", "--regions",
                             "eu-nowhere-1")
    assert missing.exit_code != 0 and "eu-nowhere-1" in missing.stderr


def test_gcp_says_what_needs_an_account() -> None:
    out = run_subprocess("catalog", "refresh", "--cloud", "gcp", "--source", "public")
    assert out.exit_code == 2 and "GPUPLAN_GCP_API_KEY" in out.stderr
    assert "the Billing Catalog needs an API key or credentials" in out.stderr


def test_stale_prices_warn_once_per_command() -> None:
    out = run_subprocess("prices", "--gpu", "H100", "--limit", "2")
    assert out.exit_code == 0, out.stderr
    warnings = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, out.stderr
    assert "aws" in warnings[0] and "gcp" in warnings[0] and "--source public" in warnings[0]


def test_the_stale_prices_hint_says_what_gcps_public_source_needs() -> None:
    """GCP's Billing Catalog needs an API key: the hint names it (it used to offer `--source public` as if GCP,
    like AWS, needed nothing), and AWS's stays account-free."""
    out = run_subprocess("prices", "--gpu", "T4", "--cloud", "gcp", "--limit", "1")
    assert out.exit_code == 0, out.stderr
    [warning] = [line for line in out.stderr.splitlines() if line.startswith("warning:")]
    assert warning.endswith("(gcp: --source public with an API key in GPUPLAN_GCP_API_KEY)"), warning
    both = run_subprocess("prices", "--gpu", "H100", "--limit", "1", "--json")
    [warning] = [line for line in both.stderr.splitlines() if line.startswith("warning:")]
    assert "(aws without an account: --source public; gcp: --source public with an API key in " \
           "GPUPLAN_GCP_API_KEY)" in warning, warning


def test_gcp_refresh_with_an_api_key_only(monkeypatch: pytest.MonkeyPatch) -> None:
    from support.fakes.gcp_catalog_server import FakeGcpCatalog

    with FakeGcpCatalog(fail={"/compute/": 403}) as fake:  # Compute would need OAuth: it must not be asked
        env = {**{k: v for k, v in os.environ.items() if k != "GOOGLE_APPLICATION_CREDENTIALS"}, **fake.env(),
               "GPUPLAN_GCP_API_KEY": "AIza-test-key", "CLOUDSDK_CONFIG": "/nonexistent-gcloud-config"}
        done = subprocess.run([sys.executable, "-m", "gpuplan", "catalog", "refresh", "--cloud", "gcp", "--json"],
                              capture_output=True, text=True, env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads(done.stdout)
        assert "billing catalog with an API key" in report["source"] and "shipped snapshot" in report["source"]
        assert set(fake.api_keys) == {"AIza-test-key"}
        assert not [path for path in fake.requests if "/compute/" in path]
    rows = run_subprocess("prices", "--cloud", "gcp", "--gpu", "T4", "--json", "--limit", "0").json()
    assert rows and all("API key" in row["source"] for row in rows)
