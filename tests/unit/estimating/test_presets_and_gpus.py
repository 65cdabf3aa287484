"""Model presets against their published sizes, config.json from the local HF cache, and the new GPU rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuplan.estimating.architecture import from_hf_config, load_hf_config, preset
from gpuplan.hardware.gpus import resolve_gpu


@pytest.mark.parametrize(("name", "billions"), [
    ("llama-3.1-8b", 8.03), ("llama-3.1-70b", 70.55), ("llama-3.1-405b", 405.85), ("llama-3.2-1b", 1.24),
    ("llama-3.2-3b", 3.21), ("qwen2.5-7b", 7.62), ("qwen2.5-72b", 72.7), ("mistral-nemo-12b", 12.25),
    ("mixtral-8x22b", 140.6), ("gemma-2-9b", 9.24), ("gemma-2-27b", 27.2), ("deepseek-moe-16b", 16.4),
])
def test_presets_match_the_published_parameter_counts(name: str, billions: float) -> None:
    """Counts from the models' cards (Llama 3.1 8B: 8.03B; Gemma 2 9B: 9.24B; DeepSeekMoE: 16.4B; ...)."""
    assert preset(name).param_count() / 1e9 == pytest.approx(billions, rel=0.01)


def test_deepseek_moe_active_parameters() -> None:
    """DeepSeekMoE 16B activates 2.8B per token (Dai et al. 2024, Table 2)."""
    assert preset("deepseek-moe-16b").active_param_count() / 1e9 == pytest.approx(2.8, rel=0.03)


def test_hf_config_with_experts_and_head_dim() -> None:
    config = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
              "intermediate_size": 14336, "vocab_size": 32000, "hidden_act": "silu", "num_local_experts": 8,
              "num_experts_per_tok": 2, "max_position_embeddings": 32768}
    arch = from_hf_config(config)
    assert arch.param_count() == preset("mixtral-8x7b").param_count()
    gemma = from_hf_config({"hidden_size": 3584, "num_hidden_layers": 42, "num_attention_heads": 16,
                            "num_key_value_heads": 8, "head_dim": 256, "intermediate_size": 14336,
                            "vocab_size": 256000, "hidden_act": "silu", "tie_word_embeddings": True})
    assert gemma.param_count() == preset("gemma-2-9b").param_count()


def test_model_config_from_the_local_hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snapshot = tmp_path / "models--acme--tiny-llama" / "snapshots" / "0123abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({
        "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512,
        "vocab_size": 1000, "hidden_act": "silu"}))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    arch = load_hf_config("acme/tiny-llama")
    assert arch.name == "acme/tiny-llama" and arch.hidden_size == 256
    assert load_hf_config(snapshot).hidden_size == 256  # a model directory works too
    with pytest.raises(ValueError, match="neither a file nor in the Hugging Face cache"):
        load_hf_config("acme/never-downloaded")


@pytest.mark.parametrize(("name", "canonical", "memory", "bandwidth"), [
    ("H100 NVL", "H100-NVL", 94, 3900), ("H100 PCIe", "H100-PCIe", 80, 2000), ("GH200", "GH200", 96, 4000),
    ("H200 NVL", "H200-NVL", 141, 4800), ("A40", "A40", 48, 696), ("L40", "L40", 48, 864),
    ("RTX A6000", "RTX-A6000", 48, 768), ("RTX 6000 Ada", "RTX-6000-Ada", 48, 960), ("MI300X", "MI300X", 192, 5300),
])
def test_gpu_rows(name: str, canonical: str, memory: float, bandwidth: float) -> None:
    gpu = resolve_gpu(name)
    assert (gpu.name, gpu.memory_gb, gpu.memory_bandwidth_gbps) == (canonical, memory, bandwidth)
    assert gpu.bf16_tflops and gpu.source
