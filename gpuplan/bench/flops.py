"""Count the FLOPs of one training step with torch's own flop counter, attention included.

`torch.utils.flop_counter.FlopCounterMode` counts matmuls and the CUDA attention kernels (flash, efficient,
cuDNN), but not the CPU flash kernel `aten._scaled_dot_product_flash_attention_for_cpu` (and its backward)
that `F.scaled_dot_product_attention` dispatches to on CPU: there, attention would count 0 FLOPs and a GPT's
MFU would come out ~20-30 % low at short context and far lower at long context. Two layers of defence:

1. the CPU kernels get the same shape formula torch uses for the CUDA kernels (`sdpa_flop_count` /
   `sdpa_backward_flop_count`: 4·B·H·S²·D forward, 2.5x that backward) through `custom_mapping`, which also
   covers a user's own module that calls SDPA;
2. if, after that, no attention op was counted at all and the model is the built-in GPT (so we know its shape),
   the analytic PaLM term 12·L·H·D·S per token is added (gpuplan.bench.model.attention_flops_per_token).

The result says which of these happened (`attention_source`), so a number is never silently short.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils import flop_counter

aten = torch.ops.aten


def _cpu_sdpa_forward(query_shape: Any, key_shape: Any, value_shape: Any, *args: Any, **kwargs: Any) -> int:
    return int(flop_counter.sdpa_flop_count(query_shape, key_shape, value_shape))


def _cpu_sdpa_backward(grad_out_shape: Any, query_shape: Any, key_shape: Any, value_shape: Any, *args: Any,
                       **kwargs: Any) -> int:
    return int(flop_counter.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape))


def _uncounted_attention_kernels() -> dict[Any, Callable[..., int]]:
    """Attention kernels this torch has but its flop registry lacks, mapped to torch's own SDPA formulas."""
    mapping: dict[Any, Callable[..., int]] = {}
    pairs = (("_scaled_dot_product_flash_attention_for_cpu", _cpu_sdpa_forward),
             ("_scaled_dot_product_flash_attention_for_cpu_backward", _cpu_sdpa_backward))
    for name, formula in pairs:
        op = getattr(aten, name, None)
        if op is not None and op not in flop_counter.flop_registry and op.default not in flop_counter.flop_registry:
            mapping[op] = formula
    return mapping


def _attention_kind(op: Any) -> str | None:
    """"fwd"/"bwd" for SDPA kernels, "bmm" for the batched matmuls SDPA's math fallback decomposes into
    (a GPT has no other bmm), None for anything else."""
    name = str(op)
    if "scaled_dot_product" in name:
        return "bwd" if "backward" in name else "fwd"
    if name.startswith(("aten.bmm", "aten.baddbmm")):
        return "bmm"
    return None


@dataclass(frozen=True)
class StepFlops:
    """FLOPs of one forward + backward over one micro-batch.

    `counted`: what the flop counter saw (the flash kernels' backward recomputes the scores, which torch
    counts as 2.5x the forward); `hardware`: that plus the analytic attention term when it had to be added;
    `model`: the model FLOPs MFU is defined with (PaLM, appendix B): attention backward counted as 2x its
    forward, like every other matmul, so a flash kernel's recomputation does not inflate MFU;
    `attention_model`: the attention part of `model`; `attention_source`: "counted" (the counter saw the kernel),
    "analytic" (it saw none, the model's shape gave the term) or "none" (a module we cannot see into).
    """

    counted: int
    hardware: int
    model: int
    attention_model: int
    attention_source: str
    by_op: dict[str, int]


def count_step_flops(step: Callable[[], Any], *, analytic_attention: int | None = None) -> StepFlops:
    """Run `step` (forward + backward, no optimizer step) once under the flop counter.

    `analytic_attention`: the attention FLOPs (forward + backward) of one step from the model's shape, used only
    when the counter saw no attention op (None for a user's module whose shape we do not know).
    """
    counter = flop_counter.FlopCounterMode(display=False, custom_mapping=_uncounted_attention_kernels())
    with counter:
        step()
    by_op = {str(op): int(n) for op, n in counter.get_flop_counts().get("Global", {}).items()}
    counted = int(counter.get_total_flops())
    parts = {"fwd": 0, "bwd": 0, "bmm": 0}
    for op, flops in by_op.items():
        kind = _attention_kind(op)
        if kind:
            parts[kind] += flops
    attention_counted = sum(parts.values())
    non_attention = counted - attention_counted
    if attention_counted:
        attention_model = 3 * parts["fwd"] + parts["bmm"]
        return StepFlops(counted, counted, non_attention + attention_model, attention_model, "counted", by_op)
    if analytic_attention:
        extra = int(analytic_attention)
        return StepFlops(counted, counted + extra, counted + extra, extra, "analytic", by_op)
    return StepFlops(counted, counted, counted, 0, "none", by_op)
