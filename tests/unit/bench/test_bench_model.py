"""The bench's GPT: exact parameter counts for every preset family, and FLOPs that agree with 6·N·D + attention."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from gpuplan.bench.flops import count_step_flops  # noqa: E402
from gpuplan.bench.model import attention_flops_per_token, build_gpt, count_parameters  # noqa: E402
from gpuplan.estimating.architecture import PRESETS, Architecture, from_hf_config  # noqa: E402

# A Llama-shaped model small enough for a test: RMSNorm, SwiGLU, rotary, grouped-query attention, untied head.
LLAMA_MINI = Architecture("llama-mini", 64, 2, 4, 2, 176, 512, 128, gated_mlp=True, tied_embeddings=False,
                          learned_positions=False, biases=False, layernorm=False)


@pytest.mark.parametrize("arch", [PRESETS["gpt-tiny"], PRESETS["gpt2"].with_layers(1), LLAMA_MINI,
                                  PRESETS["mistral-7b"].with_layers(1)], ids=lambda a: a.name)
def test_parameter_count_is_the_architectures(arch: Architecture) -> None:
    with torch.device("meta"):  # shapes only: a 7B layer's weights are never allocated
        model = build_gpt(arch, 64)
    assert count_parameters(model) == arch.param_count()


def test_hf_config_builds_the_same_count() -> None:
    arch = from_hf_config({"n_embd": 96, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 64})
    assert count_parameters(build_gpt(arch, 32)) == arch.param_count()


def _one_step_flops(arch: Architecture, batch: int, seq: int):
    torch.manual_seed(0)
    model = build_gpt(arch, seq)
    tokens = torch.randint(0, arch.vocab_size, (batch, seq))

    def step() -> None:
        logits = model(tokens)
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten()).backward()

    attention = int(attention_flops_per_token(arch, seq) * batch * seq)
    return count_step_flops(step, analytic_attention=attention), attention


@pytest.mark.parametrize("arch", [PRESETS["gpt-tiny"], LLAMA_MINI], ids=lambda a: a.name)
def test_flops_within_5_percent_of_6nd_plus_attention(arch: Architecture) -> None:
    """N = the matmul parameters (blocks + output head), as Kaplan et al. and the estimator count them."""
    batch, seq = 2, 128
    flops, attention = _one_step_flops(arch, batch, seq)
    tokens = batch * seq
    expected = 6 * arch.non_embedding_params() * tokens + attention
    assert flops.attention_source == "counted"  # the CPU kernel is mapped to torch's SDPA formula
    assert flops.attention_model == pytest.approx(attention, rel=1e-9)
    assert flops.model == pytest.approx(expected, rel=0.05)
    # The flash kernels' backward recomputes the scores: hardware FLOPs exceed model FLOPs by exactly that.
    assert flops.hardware - flops.model == pytest.approx(attention / 3 * 0.5, rel=1e-9)


def test_analytic_attention_is_added_when_no_attention_op_is_counted() -> None:
    layer = torch.nn.Linear(32, 32)
    x = torch.randn(4, 32)
    flops = count_step_flops(lambda: layer(x).sum().backward(), analytic_attention=1000)
    assert flops.attention_source == "analytic"
    # x needs no gradient: forward + the weight gradient, 2 x 2·4·32·32, plus the analytic term.
    assert flops.counted == 2 * 2 * 4 * 32 * 32
    assert flops.model == flops.hardware == flops.counted + 1000
    unknown = count_step_flops(lambda: layer(x).sum().backward())
    assert unknown.attention_source == "none" and unknown.attention_model == 0
