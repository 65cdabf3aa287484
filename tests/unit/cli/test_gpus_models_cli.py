"""`gpuplan gpus` and `gpuplan models` through the CLI: the spec sheet, the catalog's clouds and prices."""

from __future__ import annotations

from decimal import Decimal

from gpuplan.catalog import Catalog
from gpuplan.estimating.architecture import PRESETS
from gpuplan.hardware.gpus import all_gpus

from support.clihelp import run_cli


def test_gpus_json_lists_every_gpu_with_the_catalog_cheapest_per_gpu_hour() -> None:
    out = run_cli("gpus", "--json")
    assert out.exit_code == 0, out.stderr
    rows = {r["name"]: r for r in out.json()}
    assert set(rows) == {g.name for g in all_gpus()}
    h100 = rows["H100"]
    assert h100["memory_gb"] == 80 and h100["memory_bandwidth_gbps"] == 3350
    assert h100["tflops"] == {"fp32": 67, "tf32": 494.5, "bf16": 989.5, "fp16": 989.5, "fp8": 1979}
    offers = Catalog.load(None).select(gpus={"H100"})
    assert set(h100["clouds"]) == {o.cloud for o in offers}
    best = min(o.price_per_gpu(False) for o in offers if o.price_per_gpu(False) is not None)
    assert Decimal(str(h100["cheapest_on_demand"]["usd_per_gpu_hour"])) == best.quantize(Decimal("0.0001"))
    best_spot = min(o.price_per_gpu(True) for o in offers if o.price_per_gpu(True) is not None)
    assert Decimal(str(h100["cheapest_spot"]["usd_per_gpu_hour"])) == best_spot.quantize(Decimal("0.0001"))
    assert rows["RTX4090"]["clouds"] == [] and rows["RTX4090"]["cheapest_on_demand"] is None


def test_gpus_rented_leaves_out_what_no_cloud_sells_and_the_table_has_the_columns() -> None:
    out = run_cli("gpus", "--rented")
    assert out.exit_code == 0, out.stderr
    header = out.stdout.splitlines()[0]
    for column in ("GPU", "memory", "GB/s", "BF16", "FP8", "clouds", "$/GPU-h", "spot $/GPU-h"):
        assert column in header
    assert "RTX4090" not in out.stdout and "H100" in out.stdout


def test_gpus_name_takes_any_spelling_and_says_where_the_cheapest_is() -> None:
    out = run_cli("gpus", "h100 sxm")
    assert out.exit_code == 0, out.stderr
    assert out.stdout.startswith("H100  (NVIDIA hopper")
    assert "on-demand    from $" in out.stdout and "/GPU-h: " in out.stdout
    one = run_cli("gpus", "A100", "--json").json()
    assert one["name"] == "A100-40GB"  # A100 is the 40 GB part, as the clouds call it


def test_gpus_unknown_name_is_one_line_with_did_you_mean() -> None:
    out = run_cli("gpus", "H10")
    assert out.exit_code == 2 and out.stdout == ""
    line = out.stderr.strip()
    assert line.startswith("error: unknown GPU 'H10'; did you mean ") and "H100" in line and "\n" not in line


def test_models_lists_every_preset_smallest_first() -> None:
    out = run_cli("models", "--json")
    assert out.exit_code == 0, out.stderr
    rows = out.json()
    assert [r["name"] for r in rows][:2] == ["gpt-tiny", "gpt2"] and len(rows) == len(PRESETS)
    llama = next(r for r in rows if r["name"] == "llama-3-8b")
    assert llama["params"] == PRESETS["llama-3-8b"].param_count() and llama["kv_heads"] == 8
    assert llama["context"] == 8192 and llama["gated_mlp"] is True
    table = run_cli("models")
    assert "llama-3-70b" in table.stdout and "70.6B" in table.stdout and "CONTEXT" in table.stdout
