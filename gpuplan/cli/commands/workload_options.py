"""The model, work and training-setup flags shared by `gpuplan estimate` and `gpuplan plan`.

One definition of `--params 7B`, `--tokens 2T`, `--sharding` and friends, and one place that turns them into
an estimate Workload with the same checks and the same one-line errors, whichever command reads them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded, bounded_int
from gpuplan.errors import UserError
from gpuplan.estimating.architecture import Architecture, load_hf_config, preset
from gpuplan.estimating.estimate import ATTENTIONS, MODES, OPTIMIZERS, PRECISIONS, SHARDINGS, Workload
from gpuplan.estimating.layout import KERNELS, RECOMPUTES, SCHEDULES
from gpuplan.estimating.parallel import INTERCONNECTS, parse_interconnect
from gpuplan.estimating.serving import DEFAULT_GROUP_SIZE, WEIGHT_FORMATS
from gpuplan.limits import check
from gpuplan.units import parse_size

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_OPTIMIZER = "adamw"

_OPTIONS = [
    click.option("--params", metavar="N", help="Parameter count: 125M, 1.3e9, 7B, 1.5T."),
    click.option("--model", metavar="PRESET", shell_complete=complete.model_presets,
                 help="A named architecture: gpt2, gpt2-xl, llama-2-7b, llama-3-8b, ..."),
    click.option("--model-config", metavar="PATH|ORG/NAME",
                 help="A Hugging Face config.json, a model directory, or a Hub id already in the local HF cache."),
    click.option("--module", metavar="PKG.MOD:FACTORY", help="Build this nn.Module with torch and count it."),
    click.option("--tokens", metavar="N", help="Tokens to train on (2T, 300B); in inference, tokens to generate."),
    click.option("--samples", metavar="N", help="Training sequences per epoch (with --epochs and --seq-len)."),
    click.option("--epochs", type=bounded("epochs"), help="Passes over --samples."),
    click.option("--seq-len", type=bounded_int("seq_len"),
                 help="Sequence length (default: the model's context up to 4096, else 2048)."),
    click.option("--global-batch", type=bounded_int("global_batch"),
                 help="Sequences per optimizer step (default ~0.5-4M tokens by size)."),
    click.option("--micro-batch", type=bounded_int("micro_batch"),
                 help="Sequences per GPU per forward pass (default 1)."),
    click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True,
                 help="Number format of the matmuls (sets peak FLOPs and bytes per weight)."),
    click.option("--optimizer", type=click.Choice(OPTIMIZERS),
                 help="Optimizer, for the bytes of optimizer state per parameter (default adamw)."),
    click.option("--sharding", type=click.Choice(SHARDINGS),
                 help="How weights/gradients/optimizer state are split across GPUs (ZeRO stage or FSDP). Default: "
                      "the least sharded of none/zero1/zero2/zero3 that fits (estimate and plan choose alike)."),
    click.option("--activation-checkpointing", is_flag=True,
                 help="Recompute activations in the backward pass: the same option as --recompute full."),
    click.option("--attention", type=click.Choice(ATTENTIONS), default="flash", show_default=True,
                 help="Attention kernel, for activation memory and the config model's speed. flash: fused "
                      "kernels that never store the s x s scores (PyTorch >= 2.0 scaled_dot_product_attention, "
                      "FlashAttention-2; fp32 uses SDPA's memory-efficient kernel). flash1: the same memory at "
                      "FlashAttention-1's speed (the original CUDA kernel, MPT's attn_impl triton). eager: the scores "
                      "are kept (a·s² per layer and sequence); pick it "
                      "for torch < 2.0, custom attention the fused kernels cannot run (your own softmax/bias, "
                      "output_attentions, attn_implementation=\"eager\") or GPUs/backends without fused kernels."),
    click.option("--kernels", type=click.Choice(KERNELS),
                 help="How the norms, rotary embedding and activations run, for the step's memory-bound time. "
                      "fused (the default): one kernel each, as Megatron-LM, NeMo, Transformer Engine and "
                      "torch.compile run them. eager: plain PyTorch without torch.compile (e.g. torchtitan with "
                      "compile off, a hand-written training loop): every small op its own kernel with fp32 "
                      "up-casts: about 3x the bytes of a Llama-style layer's memory-bound ops (measured with "
                      "torch; a GPT layer's LayerNorm and GELU are single kernels either way)."),
    click.option("--tp", type=click.IntRange(1, 1024),
                 help="Tensor-parallel size (Megatron-style). Every layout flag left out gets a default, listed "
                      "under 'assumed' (tp, pp, recompute: the fastest layout that fits)."),
    click.option("--tp-overlap", is_flag=True,
                 help="Tensor-parallel exchanges overlap the GEMMs (Megatron-Core + Transformer Engine "
                      "--tp-comm-overlap); without it they wait on the critical path. Needs --tp 2 or more."),
    click.option("--dp-overlap", is_flag=True,
                 help="The sharded optimizer's parameter all-gather overlaps the next step's forward (Megatron "
                      "--overlap-param-gather, NeMo overlap_param_sync); without it only the gradient "
                      "reduce-scatter hides, behind the last backward. Needs --sharding zero1 or zero2."),
    click.option("--pp", type=click.IntRange(1, 1024),
                 help="Pipeline-parallel stages (default: the fastest layout that fits)."),
    click.option("--pp-schedule", type=click.Choice(SCHEDULES),
                 help="Pipeline schedule: 1f1b, or interleaved (2 virtual stages per GPU, a smaller bubble; the "
                      "default when pipelined)."),
    click.option("--recompute", type=click.Choice(RECOMPUTES),
                 help="Activation recomputation: none, selective (attention core only, Korthikanti et al. 2022; "
                      "Megatron's --recompute-granularity selective), op (torchtitan's selective op checkpointing: "
                      "every second matmul and the element-wise ops) or full (= --activation-checkpointing). "
                      "Default: the least that fits at full speed."),
    click.option("--interconnect", metavar="FABRIC|GBPS",
                 help=f"Inter-node network per node: {', '.join(INTERCONNECTS)}, or Gbit/s (e.g. 3200)."),
    click.option("--lora", type=bounded_int("lora"), metavar="RANK", help="Train LoRA adapters of this rank only."),
    click.option("--mode", type=click.Choice(MODES), default="train", show_default=True,
                 help="Training, or inference (generation with --batch and --context)."),
    click.option("--batch", type=bounded_int("batch"), help="Inference: concurrent sequences (default 1)."),
    click.option("--context", type=bounded_int("context"),
                 help="Inference: context tokens per sequence (default: the model's)."),
    click.option("--weights", "weight_format", type=click.Choice(WEIGHT_FORMATS),
                 help="Inference: stored weight format (default: --precision). int8/int4 are weight-only "
                      "quantization (GPTQ/AWQ-style), fp8 as in vLLM/TensorRT-LLM fp8 checkpoints."),
    click.option("--group-size", type=click.IntRange(1, 1 << 20), default=DEFAULT_GROUP_SIZE, show_default=True,
                 help="Inference, int4: weights per quantization group (each group adds an fp16 scale and zero)."),
    click.option("--throughput", type=bounded("throughput"), metavar="TOK/S",
                 help="Measured tokens/s per GPU (overrides everything)."),
    click.option("--mfu", type=bounded("mfu"),
                 help="Model FLOPs utilisation to assume, 0-1 (overrides bench/calibration)."),
]


def workload_options(command: F) -> F:
    """Add the model, work, training-setup and throughput flags to a command."""
    for option in reversed(_OPTIONS):
        command = option(command)
    return command


def _size(value: str, what: str) -> int:
    """`--params 7B` -> 7e9, inside gpuplan.limits' range of the same name (`--params` -> params)."""
    try:
        return parse_size(value, what=what, limit=what.removeprefix("--"))
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def count_module_params(target: str) -> int:
    """Build `pkg.mod:factory`'s nn.Module with torch and count its parameters (torch is imported only here)."""
    module_name, _, attr = target.partition(":")
    if not module_name or not attr:  # `--module :` reached import_module('') (ValueError)
        raise UserError(f"--module must look like pkg.mod:factory, not {target!r}")
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load --module {target}: {exc}") from exc
    try:  # the user's code: whatever it raises is their module's problem, said in one line
        model = factory() if callable(factory) and not hasattr(factory, "parameters") else factory
    except SystemExit as exc:  # `sys:exit` would end gpuplan itself, silently, with its status
        raise UserError(f"--module {target}: calling {attr}() exited ({exc.code!r}) instead of building a model") \
            from None
    except Exception as exc:
        raise UserError(f"--module {target}: calling {attr}() failed: {type(exc).__name__}: {exc}") from exc
    if not hasattr(model, "parameters"):
        raise UserError(f"--module {target} did not build a torch nn.Module")
    return int(sum(p.numel() for p in model.parameters()))


MODEL_MISSING = "say which model: --params 7B, --model llama-2-7b, --model-config config.json or --module"


def _model(params: str | None, model: str | None, model_config: str | None,
           module: str | None) -> tuple[int, Architecture | None]:
    given = [name for name, v in (("--params", params), ("--model", model), ("--model-config", model_config),
                                  ("--module", module)) if v]
    if len(given) > 1:
        raise UserError(f"give one of --params, --model, --model-config or --module, not {' and '.join(given)}")
    if not given:
        raise UserError(MODEL_MISSING)
    try:
        if model:
            arch = preset(model)
            return arch.param_count(), arch
        if model_config:
            arch = load_hf_config(model_config)
            return arch.param_count(), arch
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    if module:
        return count_module_params(module), None
    if not params:  # unreachable: `given` named exactly one option and the other three returned above
        raise UserError(MODEL_MISSING)
    return _size(params, "--params"), None


def _tokens(mode: str, tokens: str | None, samples: str | None, epochs: float | None, seq_len: int) -> int:
    if tokens and (samples or epochs):
        raise UserError("give --tokens, or --samples with --epochs, not both")
    if tokens:
        return _size(tokens, "--tokens")
    if samples:
        count = _size(samples, "--samples")
        if epochs is not None and epochs <= 0:
            raise UserError("--epochs must be greater than zero")
        total = max(1, round(count * (epochs or 1.0) * seq_len))
        try:  # each factor is in range, their product need not be
            check("tokens", total, "--samples x --epochs x --seq-len")
        except ValueError as exc:
            raise UserError(str(exc)) from exc
        return total
    if epochs is not None:
        raise UserError("--epochs needs --samples")
    if mode == "inference":
        return 1  # no token count: a memory answer (and a speed), no time or cost (tokens_given)
    raise UserError("say how much work: --tokens 2T, or --samples N --epochs E")





def interconnect_gbps(value: str | None) -> float | None:
    """`--interconnect ib-ndr` or `--interconnect 3200` as Gbit/s per node; a bad value is a UserError."""
    if not value:
        return None
    try:
        return parse_interconnect(value)
    except ValueError as exc:
        raise UserError(f"--{exc}") from None


def defaulted_notes(options: dict[str, Any], workload: Workload) -> list[str]:
    """The "assumed" lines for the workload flags left out whose default the answer depends on (the layout's are
    the estimate's own: gpuplan.estimating.layout)."""
    if workload.mode != "train":
        return []
    notes = []
    if not options.get("seq_len"):
        why = "the model's context, up to 4096" if workload.architecture is not None else "no model context known"
        notes.append(f"sequence length {workload.seq_len} ({why}; set --seq-len)")
    if not options.get("optimizer"):
        notes.append(f"optimizer {workload.optimizer} (set --optimizer {', '.join(OPTIMIZERS)})")
    return notes


def tokens_given(options: dict[str, Any]) -> bool:
    """Whether the flags say how much work there is (inference may leave it out and ask for memory only)."""
    return bool(options.get("tokens") or options.get("samples"))


def build_workload(options: dict[str, Any]) -> Workload:
    """The Workload the flags describe; every inconsistency is a UserError (one line, exit 2)."""
    mode = options["mode"]
    params, arch = _model(options["params"], options["model"], options["model_config"], options["module"])
    seq_len = options["seq_len"] or (min(arch.max_seq_len, 4096) if arch else 2048)
    # Each number flag's range (gpuplan.limits) was checked by its Click type; what is left is how they combine.
    if mode == "inference":
        for flag in ("lora", "global_batch", "micro_batch"):
            if options[flag] is not None:
                raise UserError(f"--{flag.replace('_', '-')} applies to training, not --mode inference")
        if (options["sharding"] or "none") != "none" or options["activation_checkpointing"]:
            raise UserError("--sharding and --activation-checkpointing apply to training, not --mode inference")
    elif options.get("weight_format"):
        raise UserError("--weights applies to --mode inference (training keeps 16-bit weights: use --precision)")
    elif options["batch"] is not None or options["context"] is not None:
        raise UserError("--batch and --context apply to --mode inference; use --global-batch/--seq-len to train")
    tokens = _tokens(mode, options["tokens"], options["samples"], options["epochs"], seq_len)
    recompute = options.get("recompute")
    if mode == "inference" and (recompute or (options.get("pp") or 1) > 1 or (options.get("tp") or 1) > 1
                                or options.get("interconnect") or options.get("tp_overlap")
                                or options.get("dp_overlap") or options.get("kernels")):
        raise UserError("--tp, --pp, --tp-overlap, --dp-overlap, --recompute, --kernels and --interconnect apply to "
                        "training; in --mode inference the GPU count (--gpus) is the tensor-parallel size")
    try:
        return Workload(
            params=params, tokens=tokens, architecture=arch, seq_len=seq_len,
            global_batch=options["global_batch"], micro_batch=options["micro_batch"] or 1,
            precision=options["precision"], optimizer=options["optimizer"] or DEFAULT_OPTIMIZER,
            sharding=options["sharding"] or "none",
            activation_checkpointing=bool(options["activation_checkpointing"]),
            lora_rank=options["lora"], mode=mode,
            batch=options["batch"] or 1, context=options["context"] or (arch.max_seq_len if arch else 2048),
            attention=options.get("attention") or "flash",
            tp=options.get("tp"), pp=options.get("pp"), recompute=recompute,
            schedule=options.get("pp_schedule"),
            interconnect_gbps=interconnect_gbps(options.get("interconnect")),
            tp_overlap=bool(options.get("tp_overlap")), dp_overlap=bool(options.get("dp_overlap")),
            kernels=options.get("kernels"),
            weight_format=options.get("weight_format"), group_size=options.get("group_size") or DEFAULT_GROUP_SIZE,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from exc
