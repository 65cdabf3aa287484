"""`gpuplan prices`: filters, sorting, one row per region, the JSON contract, bad input, the fast path."""

from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

import pytest

from gpuplan.catalog.offer import Offer

from support.clihelp import run_cli

SCHEMA = [
    "cloud", "region", "zone", "instance_type", "gpu", "gpu_count", "gpu_memory_gb", "vcpus", "memory_gb",
    "price_per_hour", "spot_price_per_hour", "arch", "source", "fetched_at",
]
DERIVED = ["zone_type", "spot", "price", "price_per_gpu", "peak_tflops_per_gpu", "price_per_tflop", "zones"]


def prices_json(*args: str) -> list[dict]:
    result = run_cli("prices", "--json", "--limit", "0", *args)
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_json_rows_carry_every_schema_field_in_a_stable_order() -> None:
    rows = prices_json("--gpu", "H100")
    assert rows
    for row in rows:
        assert list(row) == SCHEMA + DERIVED
        assert row["gpu"] == "H100" and row["spot"] is False
        assert row["fetched_at"].endswith("Z")
    assert [f for f in Offer.__dataclass_fields__] == SCHEMA


def test_one_row_per_cloud_type_region_at_the_cheapest_zone() -> None:
    rows = prices_json("--gpu", "A10G", "--spot")
    keys = [(r["cloud"], r["instance_type"], r["region"]) for r in rows]
    assert len(keys) == len(set(keys))
    # us-east-1 g5.xlarge: spot differs per AZ; the row must carry the cheapest AZ's spot price.
    from gpuplan.catalog import Catalog

    zones = [o for o in Catalog.load().offers if o.instance_type == "g5.xlarge" and o.region == "us-east-1"
             and o.spot_price_per_hour is not None]
    row = next(r for r in rows if r["instance_type"] == "g5.xlarge" and r["region"] == "us-east-1")
    cheapest = min(zones, key=lambda o: (o.spot_price_per_hour, o.zone))
    assert row["zone"] == cheapest.zone and Decimal(str(row["price"])) == cheapest.spot_price_per_hour
    assert row["zones"] == len(zones) > 1


@pytest.mark.parametrize("sort", ["price", "price-per-gpu", "price-per-tflop"])
def test_sorting_is_ascending_by_the_chosen_price(sort: str) -> None:
    rows = prices_json("--sort", sort, "--cloud", "aws")
    key = {"price": "price", "price-per-gpu": "price_per_gpu", "price-per-tflop": "price_per_tflop"}[sort]
    values = [r[key] for r in rows if r[key] is not None]
    assert values == sorted(values) and len(values) > 10
    if sort == "price-per-tflop":
        row = next(r for r in rows if r["instance_type"] == "p5.48xlarge")
        assert row["peak_tflops_per_gpu"] == 989.5  # from the estimator's GPU table (gpuplan.hardware.gpus)
        assert row["price_per_tflop"] == pytest.approx(row["price"] / (8 * 989.5), abs=1e-6)


def test_rows_without_a_tflop_figure_sort_last() -> None:
    from gpuplan.catalog import Catalog
    from gpuplan.catalog.view import cheapest_per_region, sort_rows

    offers = Catalog.load().select(gpus={"L4", "H100"}, clouds={"aws"})
    rows = sort_rows(cheapest_per_region(offers, spot=False, peak_tflops={"H100": 989.5}), "price-per-tflop")
    known = [r.price_per_tflop is not None for r in rows]
    assert known == sorted(known, reverse=True) and True in known and False in known
    unknown = [r.price_per_gpu for r in rows if r.price_per_tflop is None]
    assert unknown == sorted(unknown)  # the rest by price per GPU


def test_catalog_gpu_names_are_the_estimators_names() -> None:
    from gpuplan.catalog import CANONICAL_GPUS
    from gpuplan.hardware.gpus import all_gpus

    assert set(CANONICAL_GPUS) <= {spec.name for spec in all_gpus()}


def test_filters_combine() -> None:
    rows = prices_json("--min-gpus", "8", "--min-gpu-memory", "80", "--cloud", "aws,gcp", "--region", "us-*",
                       "--max-price", "60")
    assert rows
    for r in rows:
        assert r["gpu_count"] >= 8 and r["gpu_memory_gb"] >= 80 and r["region"].startswith("us-")
        assert r["price"] <= 60
    assert {r["cloud"] for r in rows} == {"aws", "gcp"}
    spot = prices_json("--gpu", "A100,A100-80GB", "--spot", "--cloud", "gcp")
    assert spot and {r["gpu"] for r in spot} == {"A100-40GB", "A100-80GB"}
    assert all(r["price"] == r["spot_price_per_hour"] for r in spot)


def test_limit_and_human_table() -> None:
    assert len(prices_json("--gpu", "L4")) > 3
    limited = run_cli("prices", "--gpu", "L4", "--limit", "3", "--json")
    assert len(limited.json()) == 3
    table = run_cli("prices", "--gpu", "H100", "--limit", "5")
    assert table.exit_code == 0
    assert "H100" in table.stdout and "$/gpu-h" in table.stdout
    assert "shipped snapshot" in table.stderr  # the catalog's age is shown
    assert "warning: aws, gcp, azure prices are up to" in table.stderr  # the shipped snapshot is > 7 days old: one line
    assert "rows shown" in table.stderr


def test_empty_result_is_an_answer_not_an_error() -> None:
    result = run_cli("prices", "--gpu", "H100", "--max-price", "0.01", "--json")
    assert result.exit_code == 0 and result.json() == []
    human = run_cli("prices", "--gpu", "B300", "--cloud", "gcp")
    assert human.exit_code == 0 and "no offers match" in human.stderr


@pytest.mark.parametrize(("args", "message"), [
    (("--gpu", "K80"), "unknown GPU 'K80'"),
    (("--cloud", "oracle"), "unknown cloud 'oracle'"),
    (("--region", "us-[east"), "malformed region pattern"),
    (("--region", "us east"), "malformed region pattern"),
    (("--region", "us-est-*"), "--region: 'us-est-*' matches no region of aws, gcp, azure in the price catalog"),
    (("--region", "us-central1", "--cloud", "aws"), "'us-central1' matches no region of aws"),
    (("--max-price", "-3"), "'--max-price': must be greater than 0"),
    (("--limit", "-1"), "'--limit': must be between 0"),
    (("--sort", "cheapest"), "Invalid value for '--sort'"),
])
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    result = run_cli("prices", *args)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr


def test_prices_imports_nothing_heavy() -> None:
    """The 300 ms budget: no SQLAlchemy, pandas, boto3 or Google client on the `prices` path."""
    code = (
        "import sys, runpy\n"
        "sys.argv = ['gpuplan', 'prices', '--gpu', 'H100', '--json']\n"
        "try:\n    runpy.run_module('gpuplan', run_name='__main__')\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})), file=sys.stderr)\n"
    ).replace("import sys, runpy", "import sys, runpy, json")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(json.loads(proc.stderr.strip().splitlines()[-1]))
    assert not loaded & {"sqlalchemy", "pandas", "boto3", "botocore", "google", "torch", "alembic"}
    assert json.loads(proc.stdout)
