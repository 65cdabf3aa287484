"""Issue 33: the step model's eager kernel count (kernels.EAGER_PASSES) is what eager PyTorch moves, re-measured.

A TorchDispatchMode sees every aten op a decoder layer runs, forward and backward, on CPU in bf16: the same ops and
autograd formulas a GPU runs without torch.compile (only the kernels behind them differ). The counting rule:

- matmuls (mm, addmm, bmm) and the attention kernel (SDPA and its backward) are left out: the step model times
  them as GEMMs and fused attention;
- an op whose outputs all alias an input (view, reshape of a contiguous tensor, transpose, view_as_complex, detach)
  moves no bytes and counts nothing; allocation alone (empty) counts nothing;
- every other op counts the bytes of its tensor inputs and of the outputs it writes (all outputs of an in-place
  op); a broadcast input counts at most its storage, since re-reads of a broadcast value hit the cache.

The Llama layer is torchtitan's TransformerBlock at 9dec370 (the commit of its H100 benchmark) written out: RMSNorm
as `_norm(x.float()).type_as(x) * weight`, apply_rotary_emb's complex multiply, SwiGLU `w2(silu(w1(x)) * w3(x))`,
two residual adds; grouped-query SDPA. The GPT layer (LayerNorm, GELU, no rotary) checks that eager changes nothing
there.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.estimating import kernels

from support.clihelp import run_subprocess

torch = pytest.importorskip("torch")
functional = torch.nn.functional
python_dispatch = pytest.importorskip("torch.utils._python_dispatch")
pytree = pytest.importorskip("torch.utils._pytree")

BATCH, SEQ, HEAD_DIM = 2, 128, 32
MATMULS = {"mm", "addmm", "bmm"}
ALLOCATIONS = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"}


def _tensors(value: Any) -> list[Any]:
    return [t for t in pytree.tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


def _nbytes(t: Any) -> int:
    return int(min(t.numel() * t.element_size(), t.untyped_storage().nbytes()))


class ByteCounter(python_dispatch.TorchDispatchMode):  # type: ignore[misc]
    """Bytes the memory-bound aten ops move (the rule in the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.by_op: dict[str, int] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        name = func._schema.name.split("::")[-1]
        if name in MATMULS or name in ALLOCATIONS or "scaled_dot_product" in name or "attention" in name:
            return out
        inputs = _tensors((args, kwargs))
        read_from = {t.untyped_storage().data_ptr() for t in inputs}
        mutates = func._schema.is_mutable
        written = [t for t in _tensors(out) if mutates or t.untyped_storage().data_ptr() not in read_from]
        if written:
            moved = sum(_nbytes(t) for t in inputs) + sum(_nbytes(t) for t in written)
            self.total += moved
            self.by_op[name] = self.by_op.get(name, 0) + moved
        return out


def _weight(rows: int, cols: int) -> Any:
    return (torch.randn(rows, cols, dtype=torch.bfloat16) * 0.02).requires_grad_()


def _rotary_table(seq: int) -> Any:
    """torchtitan's precompute_freqs_cis: complex64 (cos + i sin) per position and frequency."""
    freqs = 1.0 / (10000.0 ** (torch.arange(0, HEAD_DIM, 2)[: HEAD_DIM // 2].float() / HEAD_DIM))
    angles = torch.outer(torch.arange(seq), freqs).float()
    return torch.polar(torch.ones_like(angles), angles)


def _rms_norm(x: Any, weight: Any) -> Any:
    """torchtitan's RMSNorm.forward (models/norms.py at 9dec370)."""
    upcast = x.float()
    return (upcast * torch.rsqrt(upcast.pow(2).mean(-1, keepdim=True) + 1e-5)).type_as(x) * weight


def _apply_rotary(xq: Any, xk: Any, table: Any) -> tuple[Any, Any]:
    """torchtitan's apply_rotary_emb (models/llama/model.py at 9dec370)."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    table = table[: xq_.shape[1]].view(1, xq_.shape[1], 1, xq_.shape[-1])
    return (torch.view_as_real(xq_ * table).flatten(3).type_as(xq),
            torch.view_as_real(xk_ * table).flatten(3).type_as(xk))


def measure_layer(*, heads: int, kv_heads: int, intermediate: int, llama: bool) -> tuple[float, float]:
    """(forward, backward) bytes per token the layer's memory-bound ops move, measured."""
    torch.manual_seed(0)
    hidden, kv = heads * HEAD_DIM, kv_heads * HEAD_DIM
    wq, wk, wv, wo = _weight(hidden, hidden), _weight(kv, hidden), _weight(kv, hidden), _weight(hidden, hidden)
    w1, w2, w3 = _weight(intermediate, hidden), _weight(hidden, intermediate), _weight(intermediate, hidden)
    norms = [torch.ones(hidden, dtype=torch.bfloat16, requires_grad=True) for _ in range(4)]
    table = _rotary_table(SEQ)

    def norm(x: Any, which: int) -> Any:
        if llama:
            return _rms_norm(x, norms[which])
        return functional.layer_norm(x, (hidden,), norms[which], norms[which + 2])

    def layer(x: Any) -> Any:
        h = norm(x, 0)
        q = functional.linear(h, wq).view(BATCH, SEQ, -1, HEAD_DIM)
        k = functional.linear(h, wk).view(BATCH, SEQ, -1, HEAD_DIM)
        v = functional.linear(h, wv).view(BATCH, SEQ, -1, HEAD_DIM)
        if llama:
            q, k = _apply_rotary(q, k, table)
        o = functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                    is_causal=True, enable_gqa=True)
        x = x + functional.linear(o.transpose(1, 2).contiguous().view(BATCH, SEQ, -1), wo)
        h = norm(x, 1)
        if llama:
            return x + functional.linear(functional.silu(functional.linear(h, w1)) * functional.linear(h, w3), w2)
        return x + functional.linear(functional.gelu(functional.linear(h, w1)), w2)

    x = torch.randn(BATCH, SEQ, hidden, dtype=torch.bfloat16, requires_grad=True)
    with ByteCounter() as forward:
        y = layer(x)
    grad = torch.randn_like(y)
    with ByteCounter() as backward:
        y.backward(grad)
    tokens = BATCH * SEQ
    return forward.total / tokens, backward.total / tokens


@pytest.mark.parametrize(("heads", "kv_heads", "intermediate"), [(8, 2, 704), (4, 4, 352), (16, 4, 1408)])
def test_eager_llama_layer_moves_what_the_model_counts(heads: int, kv_heads: int, intermediate: int) -> None:
    """Grouped-query and multi-head shapes of different h : kv : i ratios, so each coefficient is checked."""
    measured = measure_layer(heads=heads, kv_heads=kv_heads, intermediate=intermediate, llama=True)
    modelled = kernels.elementwise_bytes(1, heads * HEAD_DIM, intermediate, gated=True, act_bytes=2,
                                         kv_dim=kv_heads * HEAD_DIM, kernels="eager")
    for got, want in zip(modelled, measured, strict=True):
        assert got == pytest.approx(want, rel=0.03)
    fused = kernels.elementwise_bytes(1, heads * HEAD_DIM, intermediate, gated=True, act_bytes=2)
    assert measured[0] > 2.5 * fused[0] and measured[1] > 2.5 * fused[1]  # eager is the heavy one, not fused


def test_the_fused_count_stays_what_it_was() -> None:
    """12 h-passes + 3 i-passes forward for a gated layer (2 for GELU), twice that backward; the kv size and the
    kernels default change nothing there."""
    h, kv, i = 4096.0, 1024.0, 14336.0
    assert kernels.elementwise_bytes(10, h, i, gated=True, act_bytes=2) == (10 * (12 * h + 3 * i) * 2,
                                                                            2 * 10 * (12 * h + 3 * i) * 2)
    assert kernels.elementwise_bytes(10, h, i, gated=True, act_bytes=2, kv_dim=kv, kernels="fused") == \
        kernels.elementwise_bytes(10, h, i, gated=True, act_bytes=2)
    assert kernels.elementwise_bytes(10, h, 4 * h, gated=False, act_bytes=2)[0] == 10 * (12 * h + 2 * 4 * h) * 2


def test_eager_gpt_layer_is_within_the_fused_count() -> None:
    """LayerNorm and GELU are one aten kernel each in eager mode: the GPT layer moves no more than the fused count,
    so `eager` leaves a non-gated layer at the fused count."""
    forward, backward = measure_layer(heads=8, kv_heads=8, intermediate=1024, llama=False)
    fused = kernels.elementwise_bytes(1, 256, 1024, gated=False, act_bytes=2)
    assert forward <= fused[0] and backward <= fused[1]
    assert kernels.elementwise_bytes(1, 256, 1024, gated=False, act_bytes=2, kv_dim=256, kernels="eager") == fused


def _estimate(*flags: str) -> dict[str, Any]:
    return run_subprocess("estimate", "--model", "llama-3-8b", "--tokens", "100B", "--gpu", "H100", "--gpus", "8",
                   "--tp", "1", "--pp", "1", "--recompute", "none", "--sharding", "fsdp", "--json", *flags).json()


def test_eager_kernels_are_slower_by_the_modelled_bytes() -> None:
    """`--kernels eager` (the CLI as a separate process) is slower than fused by exactly the extra memory-bound bytes at
    the achievable bandwidth, scaled by the sustained share; left out, the default is fused and said so."""
    from gpuplan.estimating.architecture import preset
    from gpuplan.estimating.throughput import SUSTAINED_EFFICIENCY
    from gpuplan.hardware.gpus import resolve_gpu

    default, fused, eager = _estimate(), _estimate("--kernels", "fused"), _estimate("--kernels", "eager")
    assert default["kernels"] == fused["kernels"] == "fused" and eager["kernels"] == "eager"
    assert eager["parallel"]["kernels"] == "eager"
    assert default["tokens_per_s_per_gpu"] == fused["tokens_per_s_per_gpu"]
    assert any(note.startswith("fused kernels") and "--kernels eager" in note for note in default["assumptions"])
    assert not any("--kernels" in note for note in fused["assumptions"] + eager["assumptions"])

    arch, gpu = preset("llama-3-8b"), resolve_gpu("H100")
    step_tokens = fused["global_batch"] * fused["seq_len"] / 8  # this GPU's tokens per step
    extra = [e - f for e, f in zip(
        kernels.elementwise_bytes(step_tokens, arch.hidden_size, arch.active_intermediate(), gated=True,
                                  act_bytes=2, kv_dim=arch.kv_dim, kernels="eager"),
        kernels.elementwise_bytes(step_tokens, arch.hidden_size, arch.active_intermediate(), gated=True,
                                  act_bytes=2), strict=True)]
    extra_s = arch.num_layers * sum(extra) / kernels.bandwidth_bytes_per_s(gpu) / SUSTAINED_EFFICIENCY["hopper"]
    assert eager["parallel"]["step_s"] - fused["parallel"]["step_s"] == pytest.approx(extra_s, rel=1e-6)
    assert eager["tokens_per_s_per_gpu"] < 0.9 * fused["tokens_per_s_per_gpu"]


def test_kernels_flag_is_checked_and_training_only() -> None:
    bad = run_subprocess("estimate", "--model", "llama-3-8b", "--tokens", "1B", "--gpu", "H100", "--kernels",
                         "compiled")
    assert bad.exit_code == 2 and "'fused', 'eager'" in bad.stderr and "Traceback" not in bad.stderr
    serving = run_subprocess("estimate", "--model", "llama-3-8b", "--gpu", "H100", "--mode", "inference", "--kernels",
                      "eager")
    assert serving.exit_code == 2 and "--kernels and --interconnect apply to training" in serving.stderr
    assert "Traceback" not in serving.stderr


def test_job_spec_kernels_key_reaches_the_estimate() -> None:
    """launch and schedule read a job spec's workload: `kernels: eager` there is the flag, left out the default."""
    from gpuplan.estimating.from_job import estimate_for_job, workload_from_job
    from gpuplan.jobs.spec import SpecError, parse_spec

    text = "name: x\ncommand: a\nworkload:\n  model: llama-3-8b\n  tokens: 1B\n  sharding: fsdp\n"
    default, _ = workload_from_job(parse_spec(text).workload)
    assert default.kernels is None
    eager_spec = parse_spec(text + "  kernels: eager\n").workload
    assert workload_from_job(eager_spec)[0].kernels == "eager"
    fused = estimate_for_job(parse_spec(text).workload, gpu="H100", gpus_per_node=8, nodes=1)
    eager = estimate_for_job(eager_spec, gpu="H100", gpus_per_node=8, nodes=1)
    assert (fused.kernels, eager.kernels) == ("fused", "eager")
    assert eager.tokens_per_s_per_gpu < fused.tokens_per_s_per_gpu
    with pytest.raises(SpecError, match=r"workload.kernels: Input should be .fused. or .eager."):
        parse_spec(text + "  kernels: compiled\n")
