"""`gpuplan estimate`: FLOPs, memory per GPU, wall time and GPU-hours for a training (or inference) job.

This module only turns flags into a Workload and Hardware, picks the throughput (gpuplan.throughput) and
prints the Estimate; the arithmetic is gpuplan.estimate. It must answer in < 150 ms, so it imports nothing
heavy: torch only for --module, SQLAlchemy only for a non-SQLite store, no rich.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from gpuplan.architecture import Architecture, load_hf_config, preset
from gpuplan.context import AppContext, pass_app
from gpuplan.errors import UserError
from gpuplan.estimate import (
    MODES,
    OPTIMIZERS,
    PRECISIONS,
    SHARDINGS,
    Estimate,
    Hardware,
    Workload,
    estimate,
    min_gpus,
)
from gpuplan.gpus import GpuSpec, resolve_gpu
from gpuplan.output import emit_json
from gpuplan.units import format_size, parse_size


def _size(value: str | None, what: str) -> int | None:
    if value is None:
        return None
    try:
        return parse_size(value, what=what)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def count_module_params(target: str) -> int:
    """Build `pkg.mod:factory`'s nn.Module with torch and count its parameters (torch is imported only here)."""
    if ":" not in target:
        raise UserError(f"--module must look like pkg.mod:factory, not {target!r}")
    module_name, attr = target.split(":", 1)
    if str(Path.cwd()) not in sys.path:
        sys.path.insert(0, str(Path.cwd()))
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise UserError(f"cannot load --module {target}: {exc}") from exc
    model = factory() if callable(factory) and not hasattr(factory, "parameters") else factory
    if not hasattr(model, "parameters"):
        raise UserError(f"--module {target} did not build a torch nn.Module")
    return int(sum(p.numel() for p in model.parameters()))


def _model(params: str | None, model: str | None, model_config: str | None,
           module: str | None) -> tuple[int, Architecture | None]:
    given = [name for name, v in (("--params", params), ("--model", model), ("--model-config", model_config),
                                  ("--module", module)) if v]
    if len(given) > 1:
        raise UserError(f"give one of --params, --model, --model-config or --module, not {' and '.join(given)}")
    if not given:
        raise UserError("say which model: --params 7B, --model llama-2-7b, --model-config config.json or --module")
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
    size = _size(params, "--params")
    assert size is not None
    return size, None


def _tokens(mode: str, tokens: str | None, samples: str | None, epochs: float | None, seq_len: int) -> int:
    if tokens and (samples or epochs):
        raise UserError("give --tokens, or --samples with --epochs, not both")
    if tokens:
        value = _size(tokens, "--tokens")
        assert value is not None
        return value
    if samples:
        count = _size(samples, "--samples")
        assert count is not None
        if epochs is not None and epochs <= 0:
            raise UserError("--epochs must be greater than zero")
        return max(1, round(count * (epochs or 1.0) * seq_len))
    if epochs is not None:
        raise UserError("--epochs needs --samples")
    what = "tokens to generate" if mode == "inference" else "work"
    raise UserError(f"say how much {what}: --tokens 2T, or --samples N --epochs E")


def _positive(value: int | float | None, flag: str) -> None:
    if value is not None and value <= 0:
        raise UserError(f"{flag} must be greater than zero, not {value}")


def _hardware(gpu: GpuSpec, gpus: int | None, nodes: int | None, per_node: int | None,
              network_gbps: float | None) -> Hardware | None:
    """The Hardware the flags describe; None when the count is to be chosen (no --gpus / --nodes)."""
    for value, flag in ((gpus, "--gpus"), (nodes, "--nodes"), (per_node, "--gpus-per-node"),
                        (network_gbps, "--network-gbps")):
        _positive(value, flag)
    if gpus is None and nodes is None:
        return None
    if gpus is None:
        assert nodes is not None
        gpus = nodes * (per_node or 8)
        per_node = per_node or 8
    try:
        return Hardware(gpu, gpus=gpus, nodes=nodes, gpus_per_node=per_node, network_gbps=network_gbps)
    except ValueError as exc:
        raise UserError(f"--gpus {gpus}: {exc}") from exc


def run_estimate(app: AppContext, options: dict[str, Any], lookups: list[Any] | None = None) -> Estimate:
    """Build the workload and hardware from the options and estimate; `lookups` overrides the store's."""
    from gpuplan.throughput import LookupKey, resolve_throughput, store_lookups

    mode = options["mode"]
    params, arch = _model(options["params"], options["model"], options["model_config"], options["module"])
    seq_len = options["seq_len"] or (min(arch.max_seq_len, 4096) if arch else 2048)
    for flag in ("seq_len", "global_batch", "micro_batch", "batch", "context", "lora"):
        _positive(options[flag], "--" + flag.replace("_", "-"))
    _positive(options["epochs"], "--epochs")
    if mode == "inference":
        for flag in ("lora", "global_batch", "micro_batch"):
            if options[flag] is not None:
                raise UserError(f"--{flag.replace('_', '-')} applies to training, not --mode inference")
        if options["sharding"] != "none" or options["activation_checkpointing"]:
            raise UserError("--sharding and --activation-checkpointing apply to training, not --mode inference")
    elif options["batch"] is not None or options["context"] is not None:
        raise UserError("--batch and --context apply to --mode inference; use --global-batch/--seq-len to train")
    tokens = _tokens(mode, options["tokens"], options["samples"], options["epochs"], seq_len)
    try:
        gpu = resolve_gpu(options["gpu"])
        workload = Workload(
            params=params, tokens=tokens, architecture=arch, seq_len=seq_len,
            global_batch=options["global_batch"], micro_batch=options["micro_batch"] or 1,
            precision=options["precision"], optimizer=options["optimizer"], sharding=options["sharding"],
            activation_checkpointing=options["activation_checkpointing"], lora_rank=options["lora"], mode=mode,
            batch=options["batch"] or 1, context=options["context"] or (arch.max_seq_len if arch else 2048),
        )
        if options["mfu"] is not None and not 0 < options["mfu"] <= 1:
            raise ValueError("--mfu must be between 0 and 1 (e.g. 0.4)")
        _positive(options["throughput"], "--throughput")
        key = LookupKey(gpu=gpu.name, params=params, precision=workload.precision, seq_len=seq_len,
                        architecture=arch)
        if lookups is None:  # bench records and calibrations measure training, not serving
            lookups = store_lookups(app.db_url) if mode == "train" else []
        throughput = resolve_throughput(tokens_per_s=options["throughput"], mfu=options["mfu"], key=key,
                                        lookups=lookups)
        if gpu.peak_tflops(workload.precision) is None:
            supported = [p for p in PRECISIONS if gpu.peak_tflops(p)]
            raise ValueError(f"{gpu.name} cannot run {workload.precision}; it supports {', '.join(supported)}")
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    hardware = _hardware(gpu, options["gpus"], options["nodes"], options["gpus_per_node"], options["network_gbps"])
    if hardware is None:
        per_node = options["gpus_per_node"] or 8
        needed = min_gpus(workload, gpu, gpus_per_node=per_node)
        hardware = Hardware(gpu, gpus=needed or 1, gpus_per_node=min(needed or 1, per_node),
                            network_gbps=options["network_gbps"])
    result = estimate(workload, hardware, throughput)
    return replace(result, cost=_cost(app, result))


def _cost(app: AppContext, result: Estimate) -> list[dict[str, Any]]:
    """The cheapest catalog offers for this setup (the shipped snapshot, or a newer stored refresh)."""
    from gpuplan.catalog import CANONICAL_GPUS, Catalog
    from gpuplan.estimate_cost import cheapest_offers

    if result.mode != "train" or not result.fits or result.gpu not in CANONICAL_GPUS:
        return []  # consumer cards and MI300X are not sold by the clouds in the catalog
    catalog = Catalog.load(app.db_url)
    return cheapest_offers(result, catalog.select(gpus={result.gpu}))


def _fmt_hours(hours: float) -> str:
    if hours < 1:
        return f"{hours * 60:.1f} min"
    if hours < 72:
        return f"{hours:.1f} h"
    return f"{hours:.0f} h ({hours / 24:.1f} days)"


def render(result: Estimate) -> None:
    """The readable breakdown."""
    m = result.memory_gb_per_gpu
    echo = click.echo
    what = "training" if result.mode == "train" else "inference"
    echo(f"{what} {format_size(result.params)} parameters on {result.gpus} x {result.gpu}"
         f" ({result.nodes} node{'s' if result.nodes != 1 else ''} x {result.gpus_per_node}), {result.precision}")
    if result.mode == "train":
        trainable = "" if result.trainable_params == result.params else \
            f", {format_size(result.trainable_params)} trainable (LoRA)"
        echo(f"  work       {format_size(result.tokens)} tokens, seq {result.seq_len}, global batch "
             f"{result.global_batch} x micro {result.micro_batch}{trainable}")
        echo(f"  FLOPs      {result.model_flops:.3g} model ({result.flops_per_token:.3g}/token: 6N + attention)"
             + (f", {result.hardware_flops:.3g} hardware with recomputation"
                if result.hardware_flops > result.model_flops else ""))
    else:
        echo(f"  work       {format_size(result.tokens)} tokens generated, batch {result.global_batch},"
             f" context {result.seq_len}")
    if result.mode == "train":
        echo(f"  memory/GPU {m.total:.1f} GB of {result.gpu_memory_gb:g} GB: weights {m.weights:.1f}, gradients "
             f"{m.gradients:.1f}, optimizer {m.optimizer:.1f}, activations {m.activations:.1f}, overhead "
             f"{m.overhead:.1f} (sharding {result.sharding})")
    else:
        echo(f"  memory/GPU {m.total:.1f} GB of {result.gpu_memory_gb:g} GB: weights {m.weights:.1f}, KV cache and "
             f"activations {m.activations:.1f}, overhead {m.overhead:.1f} (split over {result.gpus} GPUs)")
    if result.fits:
        echo(f"  fits       yes (smallest that fits: {result.min_gpus} x {result.gpu})")
    else:
        echo(f"  fits       NO — {result.fit_hint}")
    echo(f"  speed      {result.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, MFU {result.mfu:.1%}"
         f" ({result.mfu_source}: {result.mfu_detail}), scaling efficiency {result.scaling_efficiency:.1%}")
    echo(f"  time       {_fmt_hours(result.wall_hours)} wall, {result.gpu_hours:,.0f} GPU-hours")
    for i, c in enumerate(result.cost[:3]):
        market = "spot" if c["spot"] else "on-demand"
        plural = "s" if c["gpus_per_node"] > 1 else ""
        echo(f"  {'cost' if i == 0 else '':10} ${c['total_usd']:,.0f}: {c['nodes']} x {c['cloud']} "
             f"{c['instance_type']} ({c['gpus_per_node']} GPU{plural}) {market} in {c['region']} at "
             f"${c['price_per_hour']:,.2f}/h")
    for note in result.assumptions:
        echo(f"  assumed    {note}")


@click.command("estimate")
@click.option("--params", metavar="N", help="Parameter count: 125M, 1.3e9, 7B, 1.5T.")
@click.option("--model", metavar="PRESET", help="A named architecture: gpt2, gpt2-xl, llama-2-7b, llama-3-8b, ...")
@click.option("--model-config", type=click.Path(dir_okay=False), help="A Hugging Face config.json.")
@click.option("--module", metavar="PKG.MOD:FACTORY", help="Build this nn.Module with torch and count it.")
@click.option("--tokens", metavar="N", help="Tokens to train on (2T, 300B); in inference, tokens to generate.")
@click.option("--samples", metavar="N", help="Training sequences per epoch (with --epochs and --seq-len).")
@click.option("--epochs", type=float, help="Passes over --samples.")
@click.option("--seq-len", type=int, help="Sequence length (default: the model's context up to 4096, else 2048).")
@click.option("--global-batch", type=int, help="Sequences per optimizer step (default ~0.5-4M tokens by size).")
@click.option("--micro-batch", type=int, help="Sequences per GPU per forward pass (default 1).")
@click.option("--gpu", required=True, help="GPU type: H100, A100-80GB, A100 (=40GB), L4, T4, RTX4090, ...")
@click.option("--gpus", type=int, help="Total GPUs (default: the fewest that fit).")
@click.option("--nodes", type=int, help="Nodes (with --gpus-per-node, default 8).")
@click.option("--gpus-per-node", type=int, help="GPUs per node (default 8, or --gpus if fewer).")
@click.option("--network-gbps", type=float, help="Inter-node network per node, Gbit/s (default: the cloud's).")
@click.option("--precision", type=click.Choice(PRECISIONS), default="bf16", show_default=True)
@click.option("--optimizer", type=click.Choice(OPTIMIZERS), default="adamw", show_default=True)
@click.option("--sharding", type=click.Choice(SHARDINGS), default="none", show_default=True)
@click.option("--activation-checkpointing", is_flag=True, help="Recompute activations in the backward pass.")
@click.option("--lora", type=int, metavar="RANK", help="Train LoRA adapters of this rank only.")
@click.option("--mode", type=click.Choice(MODES), default="train", show_default=True)
@click.option("--batch", type=int, help="Inference: concurrent sequences (default 1).")
@click.option("--context", type=int, help="Inference: context tokens per sequence (default: the model's).")
@click.option("--throughput", type=float, metavar="TOK/S", help="Measured tokens/s per GPU (overrides everything).")
@click.option("--mfu", type=float, help="Model FLOPs utilisation to assume, 0-1 (overrides bench/calibration).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def estimate_command(app: AppContext, as_json: bool, **options: Any) -> None:
    """Estimate FLOPs, memory per GPU, wall time and GPU-hours of a training or inference job.

    Throughput, in order of preference: --throughput or --mfu, a matching `gpuplan bench` record, an MFU
    calibrated from finished runs, or the default MFU prior (GPU generation, model size, precision, nodes).
    """
    result = run_estimate(app, options)
    if as_json:
        emit_json(result)
    else:
        render(result)
