"""`gpuplan estimate` as a user runs it: JSON contract, readable output, bad input, the minimum setup."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.clihelp import run_cli, run_subprocess

KEYS = ["params", "tokens", "flops", "gpu", "gpus", "nodes", "memory_gb_per_gpu", "fits", "min_gpus", "mfu",
        "mfu_source", "tokens_per_s_per_gpu", "scaling_efficiency", "wall_hours", "gpu_hours", "cost"]
HEAVY = {"pandas", "torch", "boto3", "botocore", "sqlalchemy", "alembic", "google", "numpy"}


def test_json_has_the_documented_keys_in_order() -> None:
    result = run_cli("estimate", "--model", "llama-2-7b", "--tokens", "2T", "--gpu", "A100-80GB", "--gpus", "64",
                     "--sharding", "zero3", "--json")
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert list(data)[: len(KEYS)] == KEYS
    assert set(data["memory_gb_per_gpu"]) == {"weights", "gradients", "optimizer", "activations", "overhead", "total",
                                              "kv_cache"}
    assert data["gpu"] == "A100-80GB" and data["gpus"] == 64 and data["nodes"] == 8
    assert data["mfu_source"] == "model" and data["fits"] is True
    assert data["cost"] == [] or isinstance(data["cost"], list)
    assert data["gpu_hours"] == pytest.approx(data["wall_hours"] * 64)
    assert data["tokens"] == 2 * 10**12 and data["flops"] > 6 * data["params"] * data["tokens"]
    assert 0 < data["scaling_efficiency"] <= 1


def test_default_prior_shows_the_band_published_runs_fell_in() -> None:
    """The model is a point in a wide spread (bench/estimate_accuracy.py); the answer says how wide."""
    from gpuplan.estimating.run_overhead import RUN_RATIO_BAND as PRIOR_RATIO_BAND

    args = ["estimate", "--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "16", "--sharding", "fsdp"]
    data = run_cli(*args, "--json").json()
    low, high = data["wall_hours_range"]
    assert low == pytest.approx(data["wall_hours"] * PRIOR_RATIO_BAND[0])
    assert high == pytest.approx(data["wall_hours"] * PRIOR_RATIO_BAND[1])
    assert data["gpu_hours_range"] == pytest.approx([low * 16, high * 16])
    assert "80% of published runs" in run_cli(*args).stdout
    measured = run_cli(*args, "--throughput", "3000", "--json").json()
    assert measured["wall_hours_range"] is None and measured["gpu_hours_range"] is None
    assert "published runs" not in run_cli(*args, "--throughput", "3000").stdout


def test_readable_output() -> None:
    result = run_cli("estimate", "--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "16",
                     "--sharding", "fsdp")
    assert result.exit_code == 0, result.stderr
    for word in ("memory/GPU", "fits", "tokens/s per GPU", "GPU-hours", "MFU"):
        assert word in result.stdout
    assert result.stderr == ""


def test_without_gpus_answers_the_minimum_that_fits() -> None:
    data = run_cli("estimate", "--params", "13B", "--tokens", "100B", "--gpu", "A100", "--sharding", "zero3",
                   "--json").json()
    assert data["fits"] is True and data["gpus"] == data["min_gpus"] > 1
    smaller = run_cli("estimate", "--params", "13B", "--tokens", "100B", "--gpu", "A100", "--sharding", "zero3",
                      "--gpus", str(data["gpus"] - 1 if data["gpus"] <= 8 else data["gpus"] - 8), "--json").json()
    assert smaller["fits"] is False


def test_does_not_fit_is_an_answer_not_an_error() -> None:
    result = run_cli("estimate", "--params", "70B", "--tokens", "1T", "--gpu", "L4", "--gpus", "4", "--tp", "1",
                     "--pp", "1", "--json")
    assert result.exit_code == 0
    data = result.json()
    assert data["fits"] is False and data["fit_hint"].startswith("would fit with zero3 across")
    human = run_cli("estimate", "--params", "70B", "--tokens", "1T", "--gpu", "H100", "--gpus", "8")
    assert "fits       not on 8 x H100 (" in human.stdout and "; it would fit with " in human.stdout
    assert "zero3 across" in human.stdout
    assert "NO" not in human.stdout  # a hint, not a failure


def test_samples_and_epochs() -> None:
    data = run_cli("estimate", "--params", "125M", "--samples", "1e6", "--epochs", "3", "--seq-len", "1024",
                   "--gpu", "T4", "--precision", "fp16", "--json").json()
    assert data["tokens"] == 3 * 10**6 * 1024


def test_model_config_and_presets(tmp_path: Path) -> None:
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257,
                                  "n_positions": 1024}))
    from_file = run_cli("estimate", "--model-config", str(config), "--tokens", "10B", "--gpu", "A100-80GB",
                        "--gpus", "8", "--json").json()
    preset = run_cli("estimate", "--model", "gpt2", "--tokens", "10B", "--gpu", "A100-80GB", "--gpus", "8",
                     "--json").json()
    assert from_file["params"] == preset["params"] == 124_439_808


def test_inference_mode() -> None:
    data = run_cli("estimate", "--model", "llama-2-7b", "--mode", "inference", "--tokens", "1M", "--gpu", "L4",
                   "--batch", "8", "--context", "4096", "--json").json()
    # 13.5 GB of bf16 weights plus a 17 GB KV cache do not fit one 24 GB L4: split over the minimum, 2.
    assert data["gpus"] == 2 and data["fits"] is True
    assert data["memory_gb_per_gpu"]["gradients"] == 0
    assert data["memory_gb_per_gpu"]["weights"] == pytest.approx(6_738_415_616 * 2 / 2 / 1e9)
    assert data["tokens_per_s_per_gpu"] > 0 and data["wall_hours"] > 0


def test_user_throughput_and_mfu() -> None:
    data = run_cli("estimate", "--params", "1B", "--tokens", "10B", "--gpu", "RTX4090", "--throughput", "5000",
                   "--json").json()
    assert data["mfu_source"] == "user" and data["tokens_per_s_per_gpu"] == pytest.approx(5000)
    assert data["wall_hours"] == pytest.approx(10e9 / 5000 / 3600)
    data = run_cli("estimate", "--params", "1B", "--tokens", "10B", "--gpu", "RTX4090", "--mfu", "0.3",
                   "--json").json()
    assert data["mfu_source"] == "user" and data["mfu"] == pytest.approx(0.3)


@pytest.mark.parametrize(("args", "message"), [
    (["--params", "7B", "--tokens", "1T", "--gpu", "H10"], "unknown GPU 'H10'; did you mean H100"),
    (["--params", "0", "--tokens", "1T", "--gpu", "H100"], "greater than zero"),
    (["--params", "-7B", "--tokens", "1T", "--gpu", "H100"], "--params must be"),
    (["--params", "7B", "--tokens", "0", "--gpu", "H100"], "greater than zero"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "12", "--nodes", "5"], "do not split"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "12", "--nodes", "2",
      "--gpus-per-node", "8"], "do not split"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "0"], "'--gpus': must be between 1 and"),
    (["--params", "7B", "--model", "gpt2", "--tokens", "1T", "--gpu", "H100"], "not --params and --model"),
    (["--params", "7B", "--tokens", "1T", "--samples", "5", "--gpu", "H100"], "not both"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--throughput", "100", "--mfu", "0.4"], "not both"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--mfu", "40"], "'--mfu': must be greater than 0"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "V100", "--precision", "fp8"], "V100-16GB cannot run fp8"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "A100", "--precision", "fp8"], "cannot run fp8"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--mode", "inference", "--lora", "8"], "training"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--batch", "4"], "--mode inference"),
    (["--params", "7B", "--gpu", "H100"], "how much"),
    (["--tokens", "1T", "--gpu", "H100"], "say which model"),
    (["--model", "llama-9", "--tokens", "1T", "--gpu", "H100"], "unknown model preset"),
    (["--model-config", "/nonexistent/config.json", "--tokens", "1T", "--gpu", "H100"], "does not exist"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--precision", "fp64"], "fp64"),
    (["--params", "7B", "--tokens", "1T"], "--gpu is required to estimate training"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "16", "--interconnect", "fast"],
     "--interconnect 'fast'"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--gpus", "12", "--tp", "8"], "do not split"),
    (["--params", "7B", "--mode", "inference", "--gpu", "L4", "--gpus", "5"], "cannot split"),
    (["--params", "7B", "--mode", "inference", "--gpu", "L4", "--tp", "2"], "is the tensor-parallel size"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--weights", "int4"], "--mode inference"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--recompute", "selective",
      "--activation-checkpointing"], "--recompute full"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--tp-overlap"], "--tp-overlap needs --tp of 2"),
    (["--params", "7B", "--mode", "inference", "--gpu", "L4", "--tp-overlap"], "--tp-overlap"),
    (["--params", "7B", "--tokens", "1T", "--gpu", "H100", "--sharding", "fsdp", "--dp-overlap"],
     "needs --sharding zero1 or zero2"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    result = run_cli("estimate", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ")
    assert len(result.stderr.strip().splitlines()) == 1
    assert message in result.stderr
    assert result.stdout == ""


def test_module_counts_parameters_with_torch(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    (tmp_path / "tinymodel.py").write_text(
        "import torch\n\n\ndef build():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.Linear(20, 5))\n")
    result = run_subprocess("estimate", "--module", "tinymodel:build", "--tokens", "1M", "--gpu", "T4",
                            "--precision", "fp16", "--json", env={"PYTHONPATH": str(tmp_path)})
    assert result.exit_code == 0, result.stderr
    assert result.json()["params"] == 10 * 20 + 20 + 20 * 5 + 5


def test_estimate_imports_nothing_heavy(tmp_path: Path) -> None:
    """The < 150 ms path: no pandas, torch, boto3 or SQLAlchemy (the store is read with sqlite3 if it exists)."""
    code = (
        "import sys, runpy\n"
        "sys.argv = ['gpuplan', 'estimate', '--model', 'llama-2-7b', '--tokens', '2T', '--gpu', 'H100', '--json']\n"
        "try:\n    runpy.run_module('gpuplan', run_name='__main__')\n"
        "except SystemExit:\n    pass\n"
        "sys.stderr.write(' '.join(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(proc.stderr.split())
    assert not (loaded & HEAVY), loaded & HEAVY
    assert json.loads(proc.stdout)["gpu"] == "H100"


def test_serving_memory_without_a_gpu_or_tokens() -> None:
    """Issue 24: `estimate --mode inference --params 7B --precision fp16` answers the VRAM question."""
    result = run_subprocess("estimate", "--mode", "inference", "--params", "7B", "--precision", "fp16", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["memory_gb"]["weights"] == pytest.approx(14.0)
    assert data["memory_gb"]["total"] == pytest.approx(sum(v for k, v in data["memory_gb"].items() if k != "total"))
    assert {k: data["fits_on"][0][k] for k in ("gpu", "gpus")} == {"gpu": "L4", "gpus": 1}
    text = run_subprocess("estimate", "--mode", "inference", "--params", "7B", "--precision", "fp16").stdout
    assert "KV cache" in text and "fits on" in text


def test_serving_on_a_gpu_without_tokens_has_no_time() -> None:
    data = run_cli("estimate", "--mode", "inference", "--model", "llama-3.1-8b", "--weights", "int4", "--gpu", "L4",
                   "--batch", "8", "--context", "8192", "--json").json()
    assert data["wall_hours"] is None and data["cost"] == [] and data["tokens"] is None
    assert data["memory_gb_per_gpu"]["kv_cache"] == pytest.approx(2 * 32 * 1024 * 8192 * 8 * 2 / 1e9)
    assert data["tokens_per_s_per_gpu"] > 0
    timed = run_cli("estimate", "--mode", "inference", "--model", "llama-3.1-8b", "--gpu", "L4", "--tokens", "10M",
                    "--json").json()
    assert timed["wall_hours"] > 0


def test_stated_parallel_config_uses_the_config_model() -> None:
    args = ["estimate", "--model", "llama-2-70b", "--tokens", "2T", "--gpu", "H100", "--gpus", "512", "--tp", "8",
            "--pp", "4", "--recompute", "selective", "--interconnect", "ib-ndr"]
    data = run_cli(*args, "--json").json()
    assert data["mfu_source"] == "model" and 0 < data["scaling_efficiency"] < 1
    layout = data["parallel"]
    assert (layout["tp"], layout["pp"], layout["dp"]) == (8, 4, 16) and layout["recompute"] == "selective"
    assert sum(layout["seconds"].values()) == pytest.approx(layout["step_s"])
    assert "80% of published runs" in run_cli(*args).stdout
    overlapped = run_cli(*args, "--tp-overlap", "--json").json()
    assert overlapped["parallel"]["tp_overlap"] is True
    assert overlapped["parallel"]["seconds"]["tensor_parallel"] < layout["seconds"]["tensor_parallel"]
    assert overlapped["tokens_per_s_per_gpu"] > data["tokens_per_s_per_gpu"]
    kernels = [run_cli("estimate", "--model", "llama-2-7b", "--tokens", "1B", "--gpu", "A100-80GB", "--seq-len",
                       "32768", "--recompute", "full", "--attention", kind, "--json").json()
               for kind in ("flash", "flash1")]
    assert kernels[1]["tokens_per_s_per_gpu"] < 0.75 * kernels[0]["tokens_per_s_per_gpu"]
    assert kernels[1]["memory_gb_per_gpu"] == kernels[0]["memory_gb_per_gpu"]  # same fused memory, slower


def test_estimate_shards_and_falls_back_like_plan() -> None:
    auto = run_cli("estimate", "--params", "70B", "--tokens", "1T", "--gpu", "A100-80GB", "--json").json()
    assert auto["fits"] is True and auto["gpus"] == auto["min_gpus"]
    assert any("least sharded strategy that fits" in note for note in auto["assumptions"])
    stated = run_cli("estimate", "--params", "70B", "--tokens", "1T", "--gpu", "A100-80GB", "--gpus", "64",
                     "--sharding", "none", "--recompute", "none", "--tp", "1", "--pp", "1", "--json").json()
    assert stated["fits"] is False
    split = run_cli("estimate", "--params", "70B", "--tokens", "1T", "--gpu", "A100-80GB", "--gpus", "64",
                    "--sharding", "none", "--json").json()  # the default layout splits the replica Megatron's way
    assert split["fits"] is True and split["parallel"]["tp"] * split["parallel"]["pp"] > 1
    v100 = run_cli("estimate", "--params", "1B", "--tokens", "10B", "--gpu", "V100", "--json").json()
    assert v100["precision"] == "fp16" and "no bf16" in v100["assumptions"][0]
