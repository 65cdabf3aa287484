"""Activation memory with fused (flash) against eager attention: the formula by hand, GQA, fp32, inference, the
job spec and the CLI (`--attention`, its JSON key, a bad value)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpuplan.estimating import memory
from gpuplan.estimating.architecture import Architecture, preset
from gpuplan.estimating.estimate import Hardware, Workload, estimate, min_gpus
from gpuplan.estimating.from_job import workload_from_job
from gpuplan.estimating.shape import shape_of
from gpuplan.hardware.gpus import resolve_gpu
from gpuplan.jobs.spec import SpecError, parse_spec

from support.clihelp import run_cli

# Llama-2-7B's layer (a=32 heads, no dropout, SwiGLU MLP of 11008) and a Llama-3-8B-like GQA layer (8 KV heads).
LLAMA2 = shape_of(0, Architecture("l2", 4096, 32, 32, 32, 11008, 32000, 4096, gated_mlp=True))
GQA = shape_of(0, Architecture("l3", 4096, 32, 32, 8, 11008, 32000, 4096, gated_mlp=True))


def test_flash_and_eager_by_hand() -> None:
    """One 4096-token sequence of Llama-2-7B in bf16, per token and layer:
    flash = 2·(3·4096 + 2·4096) [input, Q, O, K, V] + 4·32 [fp32 logsumexp] + 2·(4096 + 4·11008) [MLP]
            + 4·4096 [two norms] = 40960 + 128 + 96256 + 16384 = 153728 bytes;
    eager = 40960 + 32·4096·2 [softmax output, a·s elements of 2 bytes] + 96256 + 16384 = 415744 bytes."""
    s = 4096
    assert memory.layer_activation_bytes(LLAMA2, s, "bf16", attention="flash") == 153_728 * s
    assert memory.layer_activation_bytes(LLAMA2, s, "bf16", attention="eager") == 415_744 * s
    # Two sequences of 2048 are not one of 4096: the scores grow with s² per sequence, not with tokens².
    two = memory.layer_activation_bytes(LLAMA2, s, "bf16", seq_len=2048, attention="eager")
    assert two == (153_728 - 128 + 32 * 2048 * 2) * s
    assert memory.layer_activation_bytes(LLAMA2, s, "bf16", seq_len=2048, attention="flash") == 153_728 * s


def test_gqa_keeps_narrow_k_and_v_only_in_the_fused_kernel() -> None:
    """8 of 32 KV heads: K and V are 1024 wide, 2·2·(4096 - 1024) = 12288 bytes a token fewer with flash; eager
    implementations expand K and V to all 32 heads before the matmuls (repeat_kv), so they save the full width."""
    s = 4096
    mha = memory.layer_activation_bytes(LLAMA2, s, "bf16")
    gqa = memory.layer_activation_bytes(GQA, s, "bf16")
    assert mha - gqa == 12_288 * s
    assert memory.layer_activation_bytes(GQA, s, "bf16", attention="eager") == \
        memory.layer_activation_bytes(LLAMA2, s, "bf16", attention="eager")


def test_fp32_flash_is_the_memory_efficient_kernel_without_scores() -> None:
    """fp32 has no FlashAttention kernel; SDPA's memory-efficient kernel runs it and also keeps only O and the
    logsumexp: 4-byte activations, still no s² term."""
    s = 4096
    fp32 = memory.layer_activation_bytes(LLAMA2, s, "fp32")
    assert fp32 == (2 * (40_960 + 96_256 + 16_384) + 128) * s
    eager = memory.layer_activation_bytes(LLAMA2, s, "fp32", attention="eager")
    assert eager - fp32 == (32 * s * 4 - 128) * s


def test_unknown_attention_is_rejected() -> None:
    with pytest.raises(ValueError, match="attention must be one of flash, flash1, eager"):
        Workload(params=10**9, tokens=10**9, attention="sdpa")
    with pytest.raises(ValueError, match="attention must be one of"):
        memory.layer_activation_bytes(LLAMA2, 16, "bf16", attention="math")


def test_training_estimate_follows_the_field() -> None:
    """Llama-2-7B at 32k tokens, ZeRO-3 with checkpointing on H100: flash fits on 2 GPUs; with eager attention the
    one layer being recomputed alone holds 32·32768²·2 bytes = 68.7 GB of scores, so no count of H100s fits."""
    arch = preset("llama-2-7b")
    flash = Workload(params=arch.param_count(), tokens=10**9, architecture=arch, seq_len=32768, sharding="zero3",
                     activation_checkpointing=True, tp=1, pp=1)  # stated: data parallel only
    eager = replace(flash, attention="eager")
    h100 = resolve_gpu("H100")
    assert min_gpus(flash, h100) == 2
    assert min_gpus(eager, h100) is None
    f, e = estimate(flash, Hardware(h100, gpus=2)), estimate(eager, Hardware(h100, gpus=2))
    assert (f.attention, e.attention) == ("flash", "eager")
    scores = 32 * 32768**2 * 2 / 1e9
    assert e.memory_gb_per_gpu.activations - f.memory_gb_per_gpu.activations == pytest.approx(
        scores - 4 * 32 * 32768 / 1e9)
    assert f.fits and not e.fits
    # The one step model times the unfused attention's s² scores through HBM: slower.
    assert e.mfu < f.mfu


def test_inference_prefill_scores_but_same_kv_cache_and_speed() -> None:
    """Serving Mistral-7B, batch 16 x 4096 context on 2 GPUs: the KV cache is the same; eager prefill adds the
    scores and softmax of a 2048-token chunk against the whole context, 16·2048·32·4096·2·2 bytes / 2 GPUs."""
    arch = preset("mistral-7b")
    flash = Workload(params=arch.param_count(), tokens=10**6, architecture=arch, mode="inference", batch=16,
                     context=4096)
    eager = replace(flash, attention="eager")
    hw = Hardware(resolve_gpu("H100"), gpus=2)
    f, e = estimate(flash, hw), estimate(eager, hw)
    extra = 16 * 2048 * 32 * 4096 * 2 * 2 / 2 / 1e9
    assert e.memory_gb_per_gpu.activations - f.memory_gb_per_gpu.activations == pytest.approx(extra)
    assert e.memory_gb_per_gpu.weights == f.memory_gb_per_gpu.weights
    assert e.tokens_per_s_per_gpu == f.tokens_per_s_per_gpu  # decode reads weights and KV cache, not scores
    kv = memory.kv_cache_bytes(shape_of(arch.param_count(), arch), batch=16, context=4096, precision="bf16")
    assert f.memory_gb_per_gpu.kv_cache == pytest.approx(kv / 2 / 1e9)  # its own line since issue 24


def test_job_spec_attention_key() -> None:
    text = "name: x\ncommand: a\nworkload:\n  model: llama-2-7b\n  tokens: 1B\n  seq_len: 16384\n"
    default, _ = workload_from_job(parse_spec(text).workload)
    assert default.attention == "flash"
    eager, _ = workload_from_job(parse_spec(text + "  attention: eager\n").workload)
    assert eager.attention == "eager" and eager.seq_len == 16384
    with pytest.raises(SpecError, match=r":7: workload.attention: Input should be .flash., .flash1. or .eager."):
        parse_spec(text + "  attention: sdpa\n")


def _estimate_json(*extra: str) -> dict:
    result = run_cli("estimate", "--model", "llama-2-7b", "--seq-len", "32768", "--tokens", "1B", "--gpu", "H100",
                     "--sharding", "zero3", "--activation-checkpointing", "--tp", "1", "--pp", "1", "--json", *extra)
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_cli_flash_fits_on_fewer_gpus_than_eager() -> None:
    flash, eager = _estimate_json(), _estimate_json("--attention", "eager")
    assert flash["attention"] == "flash" and eager["attention"] == "eager"
    assert flash["fits"] is True and flash["min_gpus"] == 2 and flash["gpus"] == 2
    assert eager["fits"] is False and eager["min_gpus"] is None
    assert eager["memory_gb_per_gpu"]["activations"] > 4 * flash["memory_gb_per_gpu"]["activations"]
    # At 16k both fit, eager on more H100s.
    mid = run_cli("estimate", "--model", "llama-2-7b", "--seq-len", "16384", "--tokens", "1B", "--gpu", "H100",
                  "--sharding", "zero3", "--activation-checkpointing", "--attention", "eager", "--tp", "1", "--pp", "1",
                  "--json").json()
    assert mid["min_gpus"] == 3


def test_cli_readable_output_names_the_attention() -> None:
    result = run_cli("estimate", "--model", "llama-2-7b", "--tokens", "1B", "--gpu", "H100", "--sharding", "zero3",
                     "--attention", "eager")
    assert result.exit_code == 0, result.stderr
    assert "eager attention" in result.stdout


def test_cli_bad_attention_is_one_line_exit_2() -> None:
    result = run_cli("estimate", "--params", "7B", "--tokens", "1B", "--gpu", "H100", "--attention", "sdpa")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "'sdpa' is not one of 'flash', 'flash1', 'eager'" in result.stderr


@pytest.mark.parametrize("attention", ["flash", "eager"])
def test_formula_matches_what_torch_saves(attention: str) -> None:
    """A real grouped-query attention block (q/k/v/o projections, causal, 4 query heads sharing 2 KV heads) in
    bf16: the bytes autograd saves for backward — weights and the constant causal mask left out, they are not
    activations — equal the formula. Fused: PyTorch's SDPA (its CPU flash kernel, same saved set as CUDA's flash
    and memory-efficient kernels: Q, K, V, O, fp32 logsumexp); eager: K/V expanded to all heads, softmax kept."""
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    batch, heads, kv_heads, seq, head_dim = 2, 4, 2, 256, 32
    hidden = heads * head_dim
    torch.manual_seed(0)
    wq, wo = (torch.randn(hidden, hidden, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    wk, wv = (torch.randn(kv_heads * head_dim, hidden, dtype=torch.bfloat16, requires_grad=True) for _ in range(2))
    causal = torch.ones(seq, seq, dtype=torch.bool).triu(1)
    constants = {t.untyped_storage().data_ptr() for t in (wq, wk, wv, wo, causal)}

    def block(x: torch.Tensor) -> torch.Tensor:
        q = functional.linear(x, wq).view(batch, seq, heads, head_dim).transpose(1, 2)
        k = functional.linear(x, wk).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
        v = functional.linear(x, wv).view(batch, seq, kv_heads, head_dim).transpose(1, 2)
        if attention == "flash":
            o = functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:  # Hugging Face's eager path: repeat_kv, then softmax(QK^T/sqrt(d) + mask) V
            k, v = (t[:, :, None].expand(batch, kv_heads, heads // kv_heads, seq, head_dim)
                    .reshape(batch, heads, seq, head_dim) for t in (k, v))
            scores = (q @ k.transpose(-2, -1) * head_dim**-0.5).masked_fill(causal, float("-inf"))
            o = torch.softmax(scores, dim=-1) @ v
        return functional.linear(o.transpose(1, 2).reshape(batch, seq, hidden), wo)

    saved: dict[int, int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        ptr = t.untyped_storage().data_ptr()
        if ptr not in constants:
            saved[ptr] = t.untyped_storage().nbytes()
        return t

    x = torch.randn(batch, seq, hidden, dtype=torch.bfloat16, requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        block(x).sum().backward()
    shape = shape_of(0, Architecture("t", hidden, 1, heads, kv_heads, 4 * hidden, 1000, seq))
    expected = memory.attention_activation_bytes(shape, batch * seq, "bf16", seq_len=seq, attention=attention)
    assert sum(saved.values()) == expected
