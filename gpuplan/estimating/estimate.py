"""How long, and how much memory: the training (or inference) estimate as pure functions on dataclasses.

`estimate(workload, hardware, throughput)` answers FLOPs, memory per GPU, whether it fits, the smallest GPU
count that fits, tokens/s per GPU, scaling efficiency, wall hours and GPU-hours. No I/O: the CLI resolves the
throughput (user > bench > calibrated > the step model) and the prices, the planner calls this in a loop.
One throughput model answers every path: the step model (throughput.py) with the layout the user states or
layout.py's defaults, times run_overhead for whole runs. The formulas live in gpuplan.estimating (flops, memory,
throughput, layout, run_overhead, comms), each citing its sources.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from typing import Any

from gpuplan.estimating import comms, configured, counts, flops, layout, memory, run_overhead, serving
from gpuplan.estimating.configured import default_global_batch
from gpuplan.estimating.memory import ATTENTIONS, OPTIMIZERS, SHARDINGS
from gpuplan.estimating.shape import Shape, shape_of
from gpuplan.estimating.values import (
    MODES,
    THROUGHPUT_SOURCES,
    Estimate,
    Hardware,
    MemoryBreakdown,
    Throughput,
    Workload,
    lora_params,
)
from gpuplan.hardware.gpus import PRECISIONS, GpuSpec

__all__ = [
    "ATTENTIONS",
    "MODES",
    "OPTIMIZERS",
    "PRECISIONS",
    "SHARDINGS",
    "THROUGHPUT_SOURCES",
    "Estimate",
    "Hardware",
    "MemoryBreakdown",
    "Throughput",
    "Workload",
    "default_global_batch",
    "estimate",
    "lora_params",
    "min_gpus",
]


def _peak(gpu: GpuSpec, precision: str) -> float:
    peak = gpu.peak_tflops(precision)
    if not peak:
        supported = [p for p in PRECISIONS if gpu.peak_tflops(p)]
        raise ValueError(f"{gpu.name} has no {precision} throughput; it supports {', '.join(supported)}")
    return peak


def _training_memory(workload: Workload, shape: Shape, dp: int, sharding: str | None = None,
                     checkpointing: bool | None = None, split: int | None = None) -> memory.MemoryParts:
    """Per-GPU memory before the model-parallel split (`split`: tp x pp instead of the workload's)."""
    trainable = lora_params(shape, workload.lora_rank) if workload.lora_rank else workload.params
    return memory.training_memory(
        shape, params=workload.params, trainable_params=trainable, precision=workload.precision,
        optimizer=workload.optimizer, sharding=sharding or workload.sharding, dp=dp,
        micro_batch=workload.micro_batch, seq_len=workload.seq_len,
        checkpointing=workload.activation_checkpointing if checkpointing is None else checkpointing,
        attention=workload.attention,
        # A replica split over tensor or pipeline ranks runs Megatron-Core, whose SwiGLU is fused (memory.py).
        fused_swiglu=(workload.model_parallel if split is None else split) > 1,
    )


def _memory(workload: Workload, shape: Shape, gpus: int, **overrides: Any) -> memory.MemoryParts:
    if workload.mode == "inference":
        mem = serving_memory_of(workload, shape, gpus)
        return memory.MemoryParts(mem.weights, 0.0, 0.0, mem.kv_cache + mem.activations, mem.overhead)
    return _training_memory(workload, shape, gpus, **overrides)


def serving_memory_of(workload: Workload, shape: Shape, gpus: int) -> serving.ServingMemory:
    """Per-GPU serving memory of `workload` on `gpus` GPUs (the one definition estimate and the VRAM answer use)."""
    return serving.serving_memory(
        shape, params=workload.params, weight_format=workload.weight_format or workload.precision,
        group_size=workload.group_size, act_precision=workload.precision, gpus=gpus, batch=workload.batch,
        context=workload.context, attention=workload.attention)


def min_gpus(workload: Workload, gpu: GpuSpec, *, gpus_per_node: int = 8, max_gpus: int = 65536,
             sharding: str | None = None) -> int | None:
    """The fewest GPUs of type `gpu` the workload fits on (with its sharding, or `sharding`); None if none do.

    Without sharding more GPUs do not reduce per-GPU memory in training, so the answer is 1 or None; inference
    splits weights and KV cache over the GPUs (tensor parallel). Only the GPU's memory matters (_min_gpus).
    """
    return _min_gpus(workload, gpu.memory_gb, gpus_per_node, max_gpus, sharding)


@functools.lru_cache(maxsize=4096)
def _min_gpus(workload: Workload, memory_gb: float, gpus_per_node: int, max_gpus: int,
              sharding: str | None) -> int | None:
    """min_gpus on GPUs of `memory_gb` GB. Memoised, a pure function of frozen values: `plan` asks it for every GPU
    shape and sharding, and the search over splits asks it again per split; GPUs of one memory size (A100-80GB,
    H100, H800) share the answer."""
    shape = shape_of(workload.params, workload.architecture)
    overrides = {"sharding": sharding} if sharding else {}
    if workload.mode == "train" and workload.recompute is None:
        # The default layout may recompute when memory needs it (layout.py): the fewest GPUs are counted with it.
        workload = _with_layout(workload, workload.tp, workload.pp, "full", workload.schedule)
    if workload.mode == "train" and workload.tp is None and workload.pp is None:
        # ... and split a replica over tensor and pipeline ranks: the fewest over the layouts it may choose.
        best: int | None = None
        for tp, pp in _splits(shape, gpus_per_node):
            if best is not None and tp * pp >= best:
                continue  # a replica of tp x pp GPUs cannot fit on fewer than the best found
            n = _min_gpus(_with_layout(workload, tp, pp, workload.recompute, workload.schedule), memory_gb,
                          gpus_per_node, max_gpus, sharding)
            if n is not None and (best is None or n < best):
                best = n
        return best

    group = workload.model_parallel if workload.mode == "train" else 1
    if group > 1:  # whole tp x pp replicas: search the data-parallel count
        def fits_dp(dp: int) -> bool:
            parts = _training_memory(workload, shape, dp, sharding=sharding)
            return configured.split_model_parallel(parts, workload.tp or 1, workload.pp or 1).total <= memory_gb

        top = max_gpus // group
        if top < 1 or not fits_dp(top):
            return None
        lo_dp, hi_dp = 1, top
        while lo_dp < hi_dp:
            mid = (lo_dp + hi_dp) // 2
            lo_dp, hi_dp = (lo_dp, mid) if fits_dp(mid) else (mid + 1, hi_dp)
        return lo_dp * group

    def fits(n: int) -> bool:
        return _memory(workload, shape, n, **overrides).total <= memory_gb

    if workload.mode == "inference":  # counts an instance offers that divide the heads (no "5 x L4")
        return next((n for n in serving.tp_counts(shape, gpus_per_node=gpus_per_node, max_gpus=max_gpus)
                     if fits(n)), None)

    size = counts.count_of_counts(gpus_per_node, max_gpus)
    if size == 0 or not fits(counts.valid_count(size - 1, gpus_per_node)):
        return None
    lo, hi = 0, size - 1  # memory falls monotonically with the count: binary search the first fit
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(counts.valid_count(mid, gpus_per_node)):
            hi = mid
        else:
            lo = mid + 1
    return counts.valid_count(lo, gpus_per_node)


def _fit_hint(workload: Workload, hardware: Hardware) -> str:
    """What would fit: more GPUs with these settings, ZeRO-3 across M, and checkpointing if that is needed too."""
    gpu, per_node = hardware.gpu, hardware.per_node
    options = []
    needed = min_gpus(workload, gpu, gpus_per_node=per_node)
    if needed is not None and needed > hardware.gpus:
        options.append(f"at least {needed} x {gpu.name}")
    if workload.mode == "train":
        shape = shape_of(workload.params, workload.architecture)
        if not workload.activation_checkpointing and \
                _memory(workload, shape, hardware.gpus, checkpointing=True).total <= gpu.memory_gb:
            options.append(f"--activation-checkpointing on {hardware.gpus} x {gpu.name}")
        if workload.sharding not in ("zero3", "fsdp"):
            z3 = min_gpus(workload, gpu, gpus_per_node=per_node, sharding="zero3")
            if z3 is not None:
                options.append(f"zero3 across {z3} x {gpu.name}")
        if not options and not workload.activation_checkpointing:
            both = min_gpus(replace(workload, sharding="zero3", activation_checkpointing=True, recompute="full"),
                            gpu, gpus_per_node=per_node)
            if both is not None:
                options.append(f"zero3 with --activation-checkpointing across {both} x {gpu.name}")
    if not options:
        return f"no number of {gpu.name} holds it with these settings; a GPU with more memory would"
    return "would fit with " + ", or ".join(options)


def _global_batch(workload: Workload, gpus: int, tp: int, pp: int) -> int:
    dp = configured.data_parallel_ranks(gpus, tp, pp)
    return workload.global_batch or default_global_batch(workload.params, workload.seq_len, data_parallel=dp,
                                                         micro_batch=workload.micro_batch)


@functools.lru_cache(maxsize=256)
def _splits(shape: Shape, gpus_per_node: int, tp: int | None = None, pp: int | None = None
            ) -> tuple[tuple[int, int], ...]:
    """(tp, pp) the defaults may choose, in Megatron's order (Narayanan et al. 2021 sec. 3.3): tensor parallel inside
    a node first (1, 2, 4, 8, dividing the heads), then pipeline stages (powers of two up to the layers) at the
    largest tensor-parallel size; a stated size stays fixed. Memoised (a pure function of frozen values), as a
    tuple: every estimate of a plan asks it again."""
    tps = [tp] if tp is not None else [t for t in (1, 2, 4, 8) if t <= gpus_per_node and shape.heads % t == 0]
    pps = [pp] if pp is not None else [p for p in (1, 2, 4, 8, 16, 32, 64) if p <= shape.layers]
    out = [(t, pps[0]) for t in tps]
    out += [(tps[-1], p) for p in pps[1:]]
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def _with_layout(workload: Workload, tp: int | None, pp: int | None, recompute: str | None,
                 schedule: str | None) -> Workload:
    """`workload` with these layout fields. Memoised, a pure function of frozen values: building a Workload
    validates every field again (~10 us), and the searches over splits and recomputation ask for the same few
    layouts of one workload for every GPU shape and node count a plan prices."""
    return replace(workload, tp=tp, pp=pp, recompute=recompute, schedule=schedule)


@functools.lru_cache(maxsize=4096)
def _fitting(workload: Workload, gpus: int, memory_gb: float, tp: int, pp: int) -> Workload | None:
    """`workload` at tp x pp on `gpus` GPUs of `memory_gb` GB with the least recomputation that fits (none,
    selective, full; a stated one only), None when none fits: less recomputation is never slower, so the least that
    fits is the fastest at this split. Memoised, a pure function of frozen values: `plan` asks it for every node
    count, network and GPU of one memory size it prices, and the answer is the same for all of them."""
    if gpus % (tp * pp):
        return None
    shape = shape_of(workload.params, workload.architecture)
    recomputes = [workload.recompute] if workload.recompute is not None else list(layout.DEFAULT_RECOMPUTES)
    dp = configured.data_parallel_ranks(gpus, tp, pp)
    for recompute in recomputes:
        parts = _training_memory(workload, shape, dp, checkpointing=recompute == "full", split=tp * pp)
        if configured.split_model_parallel(parts, tp, pp).total <= memory_gb:
            return _with_layout(workload, tp, pp, recompute,
                                workload.schedule or ("interleaved" if pp > 1 else "1f1b"))
    return None


def resolve_layout(workload: Workload, hardware: Hardware) -> tuple[Workload, int, tuple[str, ...]]:
    """`workload` with every layout field filled, its global batch, and the notes for the fields the defaults chose.

    The defaults (gpuplan.estimating.layout): data parallel only without recomputation when that fits (what FSDP,
    DeepSpeed, torchtitan and llm-foundry run a model that fits with); otherwise the fastest of the splits Megatron
    would make (_splits), each with the least recomputation that fits, timed by the same step model that times the
    answer (Megatron and NeMo ship per-size layouts chosen by measuring); when nothing fits, data parallel only
    without recomputation (layout.default_layout), so the answer says what would fit. The global batch, when not
    given, is a whole number of data-parallel ranks x micro-batches.
    """
    chosen, global_batch, notes, _speed = _resolved_layout(workload, hardware)
    return chosen, global_batch, notes


def _resolved_layout(workload: Workload, hardware: Hardware
                     ) -> tuple[Workload, int, tuple[str, ...], configured.ConfiguredSpeed | None]:
    """resolve_layout, and the step model's timing of the chosen layout when the search timed it (None when it
    did not): the estimate then need not time the same layout again."""
    shape = shape_of(workload.params, workload.architecture)
    gpus, memory_gb = hardware.gpus, hardware.gpu.memory_gb
    stated = workload
    workload = replace(workload, kernels=workload.kernels or layout.DEFAULT_KERNELS)
    chosen: Workload | None = None
    chosen_speed: configured.ConfiguredSpeed | None = None
    if workload.tp is not None and workload.pp is not None and workload.recompute is not None:
        chosen = replace(workload, schedule=workload.schedule or "1f1b")
    else:
        splits = _splits(shape, hardware.per_node, workload.tp, workload.pp)
        plain = _fitting(workload, gpus, memory_gb, *splits[0])
        if plain is not None and plain.recompute == (workload.recompute or "none"):
            chosen = plain
        else:
            best = 0.0
            for tp, pp in splits:
                candidate = _fitting(workload, gpus, memory_gb, tp, pp)
                if candidate is None:
                    continue
                speed = configured.configured_speed(
                    candidate, shape, hardware.gpu, gpus=gpus, gpus_per_node=hardware.per_node,
                    global_batch=_global_batch(candidate, gpus, tp, pp), network_gbps=hardware.network_gbps)
                if speed.step.tokens_per_s_per_gpu > best * (1 + layout.TIE):
                    chosen, best, chosen_speed = candidate, speed.step.tokens_per_s_per_gpu, speed
    if chosen is None:
        lay = layout.default_layout(tp=workload.tp, pp=workload.pp, schedule=workload.schedule,
                                    recompute=workload.recompute, tp_overlap=workload.tp_overlap,
                                    dp_overlap=workload.dp_overlap)
        chosen = replace(workload, tp=lay.tp, pp=lay.pp, schedule=lay.schedule, recompute=lay.recompute)
    notes = layout.assumed_notes(stated, chosen, kernels_matter=shape.gated_mlp)
    return chosen, _global_batch(chosen, gpus, chosen.tp or 1, chosen.pp or 1), notes, chosen_speed


def estimate(workload: Workload, hardware: Hardware, throughput: Throughput | None = None, *,
             known_min_gpus: int | None = None) -> Estimate:
    """The estimate for `workload` on `hardware`; `throughput` (measured or given) overrides the step model.

    `known_min_gpus`: the fewest GPUs of this shape the workload fits on, when the caller has it already (the
    planner searches it once per GPU shape and prices many node counts of that shape: min_gpus does not depend on
    the count, and searching it again per count was most of a plan's time).
    Raises ValueError for a precision the GPU cannot run (e.g. bf16 on a V100).
    """
    precision, fallback = configured.precision_for(hardware.gpu, workload.precision)
    if fallback and workload.mode == "inference":
        result = estimate(replace(workload, precision=precision), hardware, throughput,
                          known_min_gpus=known_min_gpus)
        return replace(result, assumptions=[fallback, *result.assumptions])
    if workload.mode == "inference":
        return _inference_estimate(workload, hardware, throughput)
    if fallback:  # the estimate in the precision the GPU runs, the note first (built once, not copied)
        workload = replace(workload, precision=precision)
    gpu, gpus = hardware.gpu, hardware.gpus
    shape = shape_of(workload.params, workload.architecture)
    peak = _peak(gpu, workload.precision)
    stated_group = workload.model_parallel
    if stated_group > 1 and gpus % stated_group:
        raise ValueError(f"{gpus} GPUs do not split into --tp {workload.tp or 1} x --pp {workload.pp or 1} x data "
                         "parallel")
    needed = known_min_gpus if known_min_gpus is not None else \
        min_gpus(workload, gpu, gpus_per_node=hardware.per_node)
    stated = workload
    workload, global_batch, layout_notes, timed = _resolved_layout(workload, hardware)
    trainable = lora_params(shape, workload.lora_rank) if workload.lora_rank else workload.params
    fpt = flops.training_flops_per_token(shape, workload.seq_len, recompute=workload.activation_checkpointing,
                                         lora=bool(workload.lora_rank), trainable_params=trainable)
    tp, pp = workload.tp or 1, workload.pp or 1
    dp = configured.data_parallel_ranks(gpus, tp, pp)
    mem = configured.split_model_parallel(_training_memory(workload, shape, dp), tp, pp)
    total = mem.total
    fits = total <= gpu.memory_gb
    assumptions: list[str] = [fallback] if fallback else []
    if shape.inferred:
        assumptions.append(f"shape inferred from N: {shape.layers} layers x hidden {shape.hidden}")
    if stated.global_batch is None:
        typical = configured.typical_global_batch(workload.params, workload.seq_len)
        per_step = dp * workload.micro_batch
        why = f"one micro-batch per data-parallel rank: {dp} ranks x {workload.micro_batch}, above the typical " \
            f"{typical}" if per_step >= typical else "typical for the size" if global_batch == typical else \
            f"the typical {typical} rounded up to whole micro-batches on {dp} data-parallel ranks"
        assumptions.append(f"global batch {global_batch} sequences ({why}; set --global-batch)")
    assumptions += layout_notes

    config_speed = None
    if throughput is None:  # the one model: the step model with the stated or default layout
        config_speed = timed or configured.configured_speed(
            workload, shape, gpu, gpus=gpus, gpus_per_node=hardware.per_node, global_batch=global_batch,
            network_gbps=hardware.network_gbps)
        tps = config_speed.step.tokens_per_s_per_gpu
        mfu, source, detail = tps * fpt.model / (peak * 1e12), "model", config_speed.step.detail()
    elif throughput.tokens_per_s_per_gpu is not None:
        tps = throughput.tokens_per_s_per_gpu
        mfu, source, detail = tps * fpt.model / (peak * 1e12), throughput.source, throughput.detail
    else:
        assert throughput.mfu is not None
        mfu, source, detail = throughput.mfu, throughput.source, throughput.detail
        tps = mfu * peak * 1e12 / fpt.model

    if config_speed is not None:  # the step model already counts every exchange
        comm = comms.CommModel(config_speed.step.scaling_efficiency, 0.0, 0.0, config_speed.step.step_s)
        effective_tps = tps
    else:  # a measured rate is one GPU's: the data-parallel exchange comes on top
        step_tokens_per_gpu = global_batch * workload.seq_len / gpus
        micro_tokens = min(workload.micro_batch * workload.seq_len, step_tokens_per_gpu)
        comm = comms.scaling_efficiency(
            gpu=gpu, gpus_per_node=hardware.per_node, nodes=hardware.node_count,
            network_gbps=hardware.network_gbps or comms.default_network_gbps(gpu),
            grad_bytes=trainable * memory.weight_bytes(workload.precision),
            step_compute_s=step_tokens_per_gpu / tps, microbatch_compute_s=micro_tokens / tps,
            full_shard=workload.sharding in ("zero3", "fsdp"), model_parallel=tp * pp)
        effective_tps = tps * comm.efficiency
    wall_s = workload.tokens / (effective_tps * gpus)
    wall_range = gpu_range = None
    factor = run_overhead.RunFactor(1.0, 1.0)
    if throughput is None:  # whole runs: restarts, evaluation and checkpoints on top of the steps (run_overhead)
        factor = run_overhead.run_factor(gpu.generation, mfu)
        wall_s *= factor.total
        low, high = run_overhead.RUN_RATIO_BAND
        wall_range = (wall_s * low / 3600, wall_s * high / 3600)
        gpu_range = (wall_range[0] * gpus, wall_range[1] * gpus)
    model_flops = fpt.model * workload.tokens
    return Estimate(
        params=workload.params, tokens=workload.tokens, flops=model_flops, gpu=gpu.name, gpus=gpus,
        nodes=hardware.node_count,
        memory_gb_per_gpu=MemoryBreakdown(mem.weights, mem.gradients, mem.optimizer, mem.activations,
                                          mem.overhead, total), attention=workload.attention,
        kernels=workload.kernels or layout.DEFAULT_KERNELS,
        fits=fits, min_gpus=needed, mfu=mfu, mfu_source=source, tokens_per_s_per_gpu=effective_tps,
        scaling_efficiency=comm.efficiency, wall_hours=wall_s / 3600, gpu_hours=wall_s * gpus / 3600,
        wall_hours_range=wall_range, gpu_hours_range=gpu_range, mode="train", gpus_per_node=hardware.per_node,
        gpu_memory_gb=gpu.memory_gb, run_overhead=factor.total, run_mfu_pull=factor.mfu_pull,
        precision=workload.precision, peak_tflops=peak, trainable_params=trainable, model_flops=model_flops,
        hardware_flops=fpt.hardware * workload.tokens, flops_per_token=fpt.model, effective_mfu=mfu * comm.efficiency,
        seq_len=workload.seq_len, global_batch=global_batch, micro_batch=workload.micro_batch,
        sharding=workload.sharding, mfu_detail=detail,
        fit_hint=None if fits else _fit_hint(stated, hardware),
        assumptions=assumptions, mfu_ref=throughput.ref if throughput is not None else None,
        parallel=configured.step_summary(config_speed) if config_speed is not None else None,
    )


def _inference_estimate(workload: Workload, hardware: Hardware, throughput: Throughput | None) -> Estimate:
    """Serving (gpuplan.estimating.serving): memory by weight format, KV cache and working set; decode bound by
    reading the weights and KV cache once per step, prefill by FLOPs; `tokens` is the number to generate."""
    gpu, gpus = hardware.gpu, hardware.gpus
    shape = shape_of(workload.params, workload.architecture)
    serving.check_gpu_count(shape, gpus, hardware.per_node)
    fmt = workload.weight_format or workload.precision
    compute_precision = "fp8" if fmt == "fp8" and gpu.peak_tflops("fp8") else workload.precision
    peak = _peak(gpu, compute_precision)
    mem = serving_memory_of(workload, shape, gpus)
    # Decode reads the weights and KV cache, never the prefill's attention scores: time it on the fused working set.
    timed = mem if workload.attention != "eager" else serving_memory_of(replace(workload, attention="flash"), shape,
                                                                       gpus)
    fits = mem.total <= gpu.memory_gb
    needed = min_gpus(workload, gpu, gpus_per_node=hardware.per_node)
    fpt = flops.forward_flops_per_token(shape, workload.context // 2)
    speed = serving.decode_speed(shape, timed, bandwidth_gbps=gpu.memory_bandwidth_gbps, peak_tflops=peak,
                                 gpus=gpus, batch=workload.batch, context=workload.context,
                                 forward_flops_per_token=fpt)
    scaling = 1.0 if gpus == 1 else 0.85  # tensor-parallel all-reduces per layer (assumed; see README)
    total_tps = speed.tokens_per_s * scaling
    source, detail = "model", (f"decode bound by {speed.bound} at {serving.DECODE_BANDWIDTH_EFFICIENCY:.0%} "
                                 "of peak bandwidth")
    if throughput is not None:
        per_gpu = throughput.tokens_per_s_per_gpu
        if per_gpu is None:
            assert throughput.mfu is not None
            per_gpu = throughput.mfu * peak * 1e12 / fpt
        total_tps, source, detail = per_gpu * gpus, throughput.source, throughput.detail
    tps = total_tps / gpus
    mfu = tps * fpt / (peak * 1e12)
    wall_s = workload.tokens / total_tps
    assumptions = [f"batch {workload.batch} sequences of {workload.context} tokens of context"]
    if fmt != workload.precision:
        assumptions.append(f"weights stored as {fmt}" + (f" (group size {workload.group_size})" if fmt == "int4"
                                                         else "") + "; embeddings and output head in 16-bit")
    if shape.experts:
        assumptions.append(f"mixture of experts: all {shape.experts} experts in memory, {shape.experts_per_token} "
                           "per token in the FLOPs")
    return Estimate(
        params=workload.params, tokens=workload.tokens, flops=fpt * workload.tokens, gpu=gpu.name, gpus=gpus,
        nodes=hardware.node_count,
        memory_gb_per_gpu=MemoryBreakdown(mem.weights, 0.0, 0.0, mem.activations, mem.overhead, mem.total,
                                          kv_cache=mem.kv_cache),
        attention=workload.attention,
        fits=fits, min_gpus=needed, mfu=mfu, mfu_source=source, tokens_per_s_per_gpu=tps,
        scaling_efficiency=scaling, wall_hours=wall_s / 3600, gpu_hours=wall_s * gpus / 3600, mode="inference",
        gpus_per_node=hardware.per_node, gpu_memory_gb=gpu.memory_gb, precision=workload.precision,
        peak_tflops=peak, trainable_params=0, model_flops=fpt * workload.tokens,
        hardware_flops=fpt * workload.tokens, flops_per_token=fpt, effective_mfu=mfu * scaling,
        seq_len=workload.context, global_batch=workload.batch, micro_batch=workload.batch, sharding="none",
        mfu_detail=detail, fit_hint=None if fits else _fit_hint(workload, hardware), assumptions=assumptions,
        weight_format=fmt,
    )

