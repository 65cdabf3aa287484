"""How a training job is laid out when the user does not say: one default per field, and one set of layout rules.

The estimate has one throughput model (gpuplan.estimating.throughput's step model). It needs every layout field;
each one the user leaves out gets a default, and the estimate lists it under "assumed" with the flag that states it:

- tensor parallel, pipeline parallel and recomputation (estimate.resolve_layout): data parallel only without
  recomputation when that fits, as FSDP, DeepSpeed, torchtitan and llm-foundry run a model that fits; otherwise the
  fastest of the splits Megatron would make — tensor parallel inside a node first (up to 8, dividing the heads:
  Narayanan et al. 2021 sec. 3.3), then pipeline stages across nodes (BLOOM-176B TP 4 x PP 12, Llama 3 405B TP 8 x
  PP 16) — each with the least recomputation that fits, timed by the same step model (Megatron-LM and NeMo ship a
  layout per model size and GPU count found by measuring). A split within TIE of the fastest but earlier in that
  order (less model parallel) wins the tie, as a recipe would.
- pipeline schedule: interleaved when pipelined (Megatron-LM's `--num-layers-per-virtual-pipeline-stage` and the
  NeMo recipes of large models set it: Narayanan et al. 2021 sec. 2.2.2), 2 virtual stages.
- overlaps: the data-parallel gradient reduction overlaps the backward pass (PyTorch DDP's buckets and FSDP's
  backward prefetch are on by default; the step model always assumes them), tensor-parallel comm overlap and the
  sharded optimizer's parameter all-gather overlap do not (Megatron-LM's `--tp-comm-overlap` and
  `--overlap-param-gather` default off): `--tp-overlap`, `--dp-overlap` state them.
- interconnect: the GPU's usual cloud instance (comms.default_network_gbps), unless `--interconnect` says.
- kernels: fused (`--kernels`): each norm, rotary embedding and activation one kernel, as Megatron-Core, NeMo,
  Transformer Engine and torch.compile run them (and as the step model always counted them); plain PyTorch without
  torch.compile is `eager` (kernels.EAGER_PASSES, measured).
- When nothing fits: data parallel only without recomputation (default_layout), so the answer says what would fit.

The rules a stated layout must obey are written once (layout_problems) and worded in the caller's option names, so
the CLI's flags and a job spec's keys give the same rule in their own spelling.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

RECOMPUTES = ("none", "selective", "op", "full")
SCHEDULES = ("1f1b", "interleaved")
KERNELS = ("fused", "eager")  # how the memory-bound ops run (kernels.elementwise_bytes)
DEFAULT_KERNELS = "fused"

DEFAULT_VIRTUAL_STAGES = 2
DEFAULT_RECOMPUTES = ("none", "selective", "full")  # op is torchtitan's own policy: stated, never chosen
# A simpler layout within 1% of the fastest is the one a recipe would pick (and the search keeps the first found,
# in the order: less tensor parallel, less pipeline, less recomputation).
TIE = 0.01


@dataclass(frozen=True)
class OptionNames:
    """How one caller spells the layout options (flags on the command line, keys in a job spec)."""

    tp: str
    sharding: str
    recompute: str
    activation_checkpointing: str
    tp_overlap: str
    dp_overlap: str


CLI_NAMES = OptionNames(tp="--tp", sharding="--sharding", recompute="--recompute",
                        activation_checkpointing="--activation-checkpointing", tp_overlap="--tp-overlap",
                        dp_overlap="--dp-overlap")
SPEC_NAMES = OptionNames(tp="tp", sharding="sharding", recompute="recompute",
                         activation_checkpointing="activation_checkpointing", tp_overlap="tp_overlap",
                         dp_overlap="dp_overlap")


def layout_problems(names: OptionNames, *, tp: int, sharding: str, recompute: str | None,
                    activation_checkpointing: bool, tp_overlap: bool, dp_overlap: bool) -> list[str]:
    """What is wrong with a stated layout, one sentence per rule, in `names`' spelling (empty when it is fine).

    - activation checkpointing is full recomputation: one option under two names, so another recompute contradicts it;
    - tensor-parallel overlap hides TP exchanges, so it needs TP of 2 or more;
    - the parameter all-gather overlap is the sharded optimizer's (ZeRO-1/2; FSDP/ZeRO-3 gather layer by layer).
    """
    problems = []
    if recompute is not None and recompute not in RECOMPUTES:
        problems.append(f"{names.recompute} must be one of {', '.join(RECOMPUTES)}")
    if activation_checkpointing and recompute not in (None, "full"):
        problems.append(f"{names.activation_checkpointing} means {names.recompute} full, not {recompute}")
    if tp_overlap and tp < 2:
        problems.append(f"{names.tp_overlap} needs {names.tp} of 2 or more")
    if dp_overlap and sharding not in ("zero1", "zero2"):
        problems.append(f"{names.dp_overlap} is the sharded optimizer's parameter all-gather: it needs "
                        f"{names.sharding} zero1 or zero2 (FSDP/ZeRO-3 gathers layer by layer already)")
    return problems


def recompute_of(recompute: str | None, activation_checkpointing: bool) -> str | None:
    """The one recompute setting both spellings mean (None: not stated)."""
    if recompute is not None:
        return recompute
    return "full" if activation_checkpointing else None


@dataclass(frozen=True)
class Layout:
    """Every layout field the step model needs, and the notes for the ones the defaults chose."""

    tp: int
    pp: int
    schedule: str
    recompute: str
    tp_overlap: bool
    dp_overlap: bool
    assumed: tuple[str, ...] = ()


def default_layout(*, tp: int | None, pp: int | None, schedule: str | None, recompute: str | None,
                   tp_overlap: bool, dp_overlap: bool) -> Layout:
    """The layout when no candidate fits: what the user stated, else data parallel only without recomputation."""
    tp, pp = tp or 1, pp or 1
    return Layout(tp=tp, pp=pp, schedule=schedule or ("interleaved" if pp > 1 else "1f1b"),
                  recompute=recompute or "none", tp_overlap=tp_overlap, dp_overlap=dp_overlap)


class _Stated(Protocol):
    """The layout fields of an estimate Workload (a Protocol: gpuplan.estimating.values imports this module)."""

    @property
    def tp(self) -> int | None: ...
    @property
    def pp(self) -> int | None: ...
    @property
    def schedule(self) -> str | None: ...
    @property
    def recompute(self) -> str | None: ...
    @property
    def kernels(self) -> str | None: ...


def assumed_notes(stated: _Stated, chosen: _Stated, *, kernels_matter: bool = True) -> tuple[str, ...]:
    """The "assumed" lines for the layout fields the user left out, each with the flag that states it.

    `kernels_matter`: whether the kernels default changes the answer (a Llama-style layer; a GPT layer's eager
    LayerNorm and GELU are one kernel each already, kernels.EAGER_PASSES), else no line for it."""
    notes = []
    if stated.tp is None or stated.pp is None:
        tp, pp = chosen.tp or 1, chosen.pp or 1
        what = "data parallel only: the model fits without splitting it" if tp * pp == 1 else \
            f"tensor parallel {tp} x pipeline parallel {pp}: the fastest split that fits"
        notes.append(f"{what} (set --tp, --pp)")
    if stated.schedule is None and (chosen.pp or 1) > 1:
        notes.append(f"pipeline schedule {chosen.schedule}, {DEFAULT_VIRTUAL_STAGES} virtual stages per GPU "
                     "(set --pp-schedule)")
    if stated.recompute is None:
        what = {"none": "no activation recomputation", "selective": "selective recomputation (the attention core)",
                "full": "full activation recomputation"}.get(chosen.recompute or "none", chosen.recompute or "none")
        notes.append(f"{what}: the least that fits at full speed (set --recompute none|selective|op|full; "
                     "--activation-checkpointing is --recompute full)")
    if stated.kernels is None and kernels_matter:
        notes.append(f"{chosen.kernels or DEFAULT_KERNELS} kernels for norms, rotary and activations "
                     "(Megatron/NeMo/TE, torch.compile; set --kernels eager for plain PyTorch without torch.compile)")
    notes.append("overlaps: data-parallel gradients behind the backward pass (DDP/FSDP default); no TP comm overlap, "
                 "no parameter all-gather overlap (set --tp-overlap, --dp-overlap)")
    return tuple(notes)
