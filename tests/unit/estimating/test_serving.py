"""Serving memory and speed: weight formats, KV cache, GPU counts that divide the heads, MoE."""

from __future__ import annotations

import pytest

from gpuplan.estimating import serving
from gpuplan.estimating.architecture import preset
from gpuplan.estimating.estimate import Hardware, Workload, estimate
from gpuplan.estimating.shape import shape_of
from gpuplan.hardware.gpus import resolve_gpu

H100 = resolve_gpu("H100")


def test_weight_formats_bytes_per_parameter() -> None:
    assert serving.weight_bytes_per_param("fp16") == 2.0
    assert serving.weight_bytes_per_param("fp8") == serving.weight_bytes_per_param("int8") == 1.0
    # GPTQ/AWQ int4: half a byte plus an fp16 scale and a 4-bit zero per group of 128.
    assert serving.weight_bytes_per_param("int4", 128) == pytest.approx(0.5 + 2.5 / 128)
    assert serving.weight_bytes_per_param("int4", 32) > serving.weight_bytes_per_param("int4", 128)
    with pytest.raises(ValueError):
        serving.weight_bytes_per_param("int3")


def test_quantized_weights_keep_embeddings_in_16_bit() -> None:
    arch = preset("llama-3.1-8b")
    shape = shape_of(arch.param_count(), arch)
    blocks = shape.layers * shape.layer_params
    embeddings = arch.param_count() - blocks
    assert embeddings == 2 * 128256 * 4096 + 4096  # untied input and output embeddings, final norm
    assert serving.weights_bytes(shape, arch.param_count(), "int4") == pytest.approx(
        blocks * (0.5 + 2.5 / 128) + embeddings * 2)
    assert serving.weights_bytes(shape, arch.param_count(), "bf16") == arch.param_count() * 2


def test_vram_of_a_7b_model_in_fp16_without_tokens() -> None:
    """Llama-2-7B, batch 1, 4096 context: 13.5 GB of weights and 2·32·4096·4096·2 bytes of KV cache."""
    arch = preset("llama-2-7b")
    shape = shape_of(arch.param_count(), arch)
    mem = serving.serving_memory(shape, params=arch.param_count(), weight_format="fp16", group_size=128,
                                 act_precision="fp16", gpus=1, batch=1, context=4096)
    assert mem.weights == pytest.approx(arch.param_count() * 2 / 1e9)
    assert mem.kv_cache == pytest.approx(2 * 32 * 4096 * 4096 * 2 / 1e9)
    assert mem.total == pytest.approx(mem.weights + mem.kv_cache + mem.activations + mem.overhead)
    half = serving.serving_memory(shape, params=arch.param_count(), weight_format="fp16", group_size=128,
                                  act_precision="fp16", gpus=2, batch=1, context=4096)
    assert half.weights == pytest.approx(mem.weights / 2) and half.kv_cache == pytest.approx(mem.kv_cache / 2)


def test_gpu_counts_divide_the_heads() -> None:
    llama = shape_of(preset("llama-2-7b").param_count(), preset("llama-2-7b"))
    assert serving.tp_counts(llama, gpus_per_node=8, max_gpus=64) == [1, 2, 4, 8, 16, 32, 64]
    qwen = shape_of(preset("qwen2.5-0.5b").param_count(), preset("qwen2.5-0.5b"))  # 14 heads
    assert serving.tp_counts(qwen, gpus_per_node=8, max_gpus=8) == [1, 2]
    with pytest.raises(ValueError, match="cannot split 32 attention heads"):
        serving.check_gpu_count(llama, 5, 8)
    arch = preset("llama-2-70b")
    workload = Workload(params=arch.param_count(), tokens=10**6, architecture=arch, mode="inference",
                        precision="fp16", batch=1, context=4096)
    result = estimate(workload, Hardware(resolve_gpu("L4"), gpus=8))
    assert result.min_gpus == 8  # 140 GB of weights: 6 x L4 would hold them, but 6 does not divide 64 heads
    with pytest.raises(ValueError, match="cannot split"):
        estimate(workload, Hardware(resolve_gpu("L4"), gpus=6))


def test_moe_counts_all_experts_in_memory_and_the_active_ones_in_flops() -> None:
    mixtral = preset("mixtral-8x7b")
    assert mixtral.param_count() == pytest.approx(46.7e9, rel=0.01)  # Mistral AI: 46.7B total
    assert mixtral.active_param_count() == pytest.approx(12.9e9, rel=0.01)  # 12.9B per token
    shape = shape_of(mixtral.param_count(), mixtral)
    assert shape.matmul_params < mixtral.param_count() / 3
    assert serving.experts_read_share(shape, 1) == pytest.approx(2 / 8)
    assert serving.experts_read_share(shape, 256) == pytest.approx(1.0)
    workload = Workload(params=mixtral.param_count(), tokens=10**6, architecture=mixtral, mode="inference",
                        precision="bf16", batch=1, context=2048)
    moe = estimate(workload, Hardware(H100, gpus=2))
    assert moe.memory_gb_per_gpu.weights == pytest.approx(mixtral.param_count() * 2 / 2 / 1e9)
    # Batch 1 reads a quarter of the experts: faster than a dense model with the same memory.
    dense = estimate(Workload(params=mixtral.param_count(), tokens=10**6, mode="inference", precision="bf16",
                              batch=1, context=2048), Hardware(H100, gpus=2))
    assert moe.tokens_per_s_per_gpu > 2 * dense.tokens_per_s_per_gpu


def test_int4_decodes_faster_than_fp16_and_says_so() -> None:
    arch = preset("llama-3.1-8b")
    base = Workload(params=arch.param_count(), tokens=10**6, architecture=arch, mode="inference",
                    precision="fp16", batch=1, context=2048)
    fp16 = estimate(base, Hardware(resolve_gpu("L4")))
    int4 = estimate(Workload(**{**base.__dict__, "weight_format": "int4"}), Hardware(resolve_gpu("L4")))
    assert int4.memory_gb_per_gpu.weights < fp16.memory_gb_per_gpu.weights / 2.5
    assert int4.tokens_per_s_per_gpu > 2 * fp16.tokens_per_s_per_gpu
    assert any("int4 (group size 128)" in note for note in int4.assumptions)
