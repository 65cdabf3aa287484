"""`gpuplan estimate`: FLOPs, memory per GPU, wall time and GPU-hours for a training (or inference) job.

This module only turns flags into a Workload and Hardware, picks the throughput (gpuplan.calibration.throughput) and
prints the Estimate; the arithmetic is gpuplan.estimating.estimate. It must answer in < 150 ms, so it imports nothing
heavy: torch only for --module, SQLAlchemy only for a non-SQLite store, no rich.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded, bounded_int
from gpuplan.cli.commands.workload_options import build_workload, defaulted_notes, tokens_given, workload_options
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, to_jsonable
from gpuplan.errors import UserError
from gpuplan.estimating.configured import precision_for
from gpuplan.estimating.defaults import auto_shard
from gpuplan.estimating.estimate import PRECISIONS, Estimate, Hardware, estimate, min_gpus
from gpuplan.estimating.run_overhead import MFU_REFERENCE
from gpuplan.estimating.values import USABLE_MEMORY
from gpuplan.hardware.gpus import GpuSpec, resolve_gpu
from gpuplan.limits import check
from gpuplan.units import format_size


def _hardware(gpu: GpuSpec, gpus: int | None, nodes: int | None, per_node: int | None,
              network_gbps: float | None) -> Hardware | None:
    """The Hardware the flags describe; None when the count is to be chosen (no --gpus / --nodes).

    Each flag's range was checked by its Click type (gpuplan.limits); --nodes x --gpus-per-node is checked here.
    """
    if gpus is None and nodes is None:
        return None
    if gpus is None:
        assert nodes is not None
        gpus = nodes * (per_node or 8)
        per_node = per_node or 8
        try:
            check("gpus", gpus, "--nodes x --gpus-per-node")
        except ValueError as exc:
            raise UserError(str(exc)) from exc
    try:
        return Hardware(gpu, gpus=gpus, nodes=nodes, gpus_per_node=per_node, network_gbps=network_gbps)
    except ValueError as exc:
        raise UserError(f"--gpus {gpus}: {exc}") from exc


def _network_gbps(options: dict[str, Any]) -> float | None:
    """--network-gbps, else the published inter-node network of --instance-type (gpuplan.hardware.networks)."""
    if options["network_gbps"] is not None or not options.get("instance_type"):
        return options["network_gbps"]
    from gpuplan.hardware.networks import instance_network

    found = instance_network(options["instance_type"])
    if found is None:
        raise UserError(f"--instance-type {options['instance_type']!r}: its network is not in gpuplan's table; "
                        "give --network-gbps instead")
    return found.gbps


def run_estimate(app: AppContext, options: dict[str, Any], lookups: list[Any] | None = None) -> Estimate:
    """Build the workload and hardware from the options and estimate; `lookups` overrides the store's."""
    from gpuplan.calibration.throughput import LookupKey, resolve_throughput, store_lookups

    workload = build_workload(options)
    arch, params, seq_len = workload.architecture, workload.params, workload.seq_len
    try:
        gpu = resolve_gpu(options["gpu"])
        # The precision the run will use (bf16 -> fp16 on a V100), so a bench record made in fp16 matches.
        key = LookupKey(gpu=gpu.name, params=params, precision=precision_for(gpu, workload.precision)[0],
                        seq_len=seq_len, architecture=arch)
        if lookups is None:  # bench records and calibrations measure training, not serving
            lookups = store_lookups(app.db_url) if workload.mode == "train" else []
        throughput = resolve_throughput(tokens_per_s=options["throughput"], mfu=options["mfu"], key=key,
                                        lookups=lookups)
        if gpu.peak_tflops(precision_for(gpu, workload.precision)[0]) is None:
            supported = [p for p in PRECISIONS if gpu.peak_tflops(p)]
            raise ValueError(f"{gpu.name} cannot run {workload.precision}; it supports {', '.join(supported)}")
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    network = _network_gbps(options)
    hardware = _hardware(gpu, options["gpus"], options["nodes"], options["gpus_per_node"], network)
    shard_note = None
    if options["sharding"] is None:
        workload, shard_note = auto_shard(workload, gpu, gpus=hardware.gpus if hardware else None,
                                          per_node=hardware.per_node if hardware else options["gpus_per_node"] or 8)
    if hardware is None:
        per_node = options["gpus_per_node"] or 8
        needed = min_gpus(workload, gpu, gpus_per_node=per_node) or 1
        group = workload.model_parallel  # a whole number of model replicas
        needed = max(group, -(-needed // group) * group)
        if needed > per_node:
            needed = -(-needed // per_node) * per_node
        hardware = Hardware(gpu, gpus=needed, gpus_per_node=min(needed, per_node), network_gbps=network)
    try:
        result = estimate(workload, hardware, throughput)
    except ValueError as exc:
        raise UserError(str(exc)) from exc
    notes = [*defaulted_notes(options, workload), *([shard_note] if shard_note else [])]
    if notes:
        result = replace(result, assumptions=[*result.assumptions, *notes])
    return replace(result, cost=_cost(app, result))


def _cost(app: AppContext, result: Estimate) -> list[dict[str, Any]]:
    """The cheapest catalog offers for this setup (the shipped snapshot, or a newer stored refresh)."""
    from gpuplan.catalog import CANONICAL_GPUS, Catalog
    from gpuplan.planning.estimate_cost import cheapest_offers
    from gpuplan.planning.job_cost import billing_minimums

    if not result.fits or result.gpu not in CANONICAL_GPUS:
        return []  # consumer cards are not sold by the clouds in the catalog
    from gpuplan.providers.registry import catalog_clouds

    catalog = Catalog.load(app.db_url, catalog_clouds())
    offers = catalog.select(gpus={result.gpu})
    return cheapest_offers(result, offers, min_billed_seconds=billing_minimums(o.cloud for o in offers))


def fits_text(result: Estimate) -> str:
    """The "fits" line: yes (with a warning when little memory is left), or no with what would fit, said as a hint."""
    m = result.memory_gb_per_gpu
    if not result.fits:
        return (f"not on {result.gpus} x {result.gpu} ({m.total:.1f} of {result.gpu_memory_gb:g} GB per GPU); it "
                f"{result.fit_hint}")
    text = f"yes (smallest that fits: {result.min_gpus} x {result.gpu})"
    if m.total > USABLE_MEMORY * result.gpu_memory_gb:
        free = 1 - m.total / result.gpu_memory_gb
        text += (f", but only {free:.0%} of the memory left: allocator fragmentation or a longer sequence may not "
                 "fit (more GPUs, sharding or recomputation leave room)")
    return text


def run_factor_text(result: Estimate) -> str:
    """What the whole run's hours add to the steps', in its two parts (run_overhead.RunFactor): the overhead is
    at least 1; the pull toward the typical published MFU is what can make the product fall below 1."""
    pull = result.run_mfu_pull
    overhead = result.run_overhead / pull
    text = f"the steps x {result.run_overhead:.2f}: x {overhead:.2f} run overhead (restarts, evaluation, checkpoints)"
    if round(pull, 2) != 1.0:
        text += (f" x {pull:.2f} pull of the step model's MFU {result.mfu:.1%} toward published runs' typical "
                 f"{MFU_REFERENCE:.0%}")
    return text


def dollars(value: Any) -> str:
    from gpuplan.cli.display import dollars as shown

    return shown(value)


def hourly(price: Any) -> str:
    """An hourly price as the catalog has it: four places below $1 (g6.xlarge $0.0913/h), cents above."""
    return f"${price:,.4f}" if price < 1 else f"${price:,.2f}"


def _fmt_hours(hours: float) -> str:
    from gpuplan.cli.display import hours_text

    return hours_text(hours)


def emit_payload(result: Estimate) -> dict[str, Any]:
    """The Estimate as the JSON object `--json` prints."""
    payload: dict[str, Any] = to_jsonable(result)
    return payload


def render(result: Estimate, *, timed: bool = True) -> None:
    """The readable breakdown (`timed` False: no token count was given, so no time or cost)."""
    m = result.memory_gb_per_gpu
    echo = click.echo
    what = "training" if result.mode == "train" else "inference"
    number_format = result.precision if not result.weight_format or result.weight_format == result.precision else \
        f"weights {result.weight_format}, compute {result.precision}"
    echo(f"{what} {format_size(result.params)} parameters on {result.gpus} x {result.gpu}"
         f" ({result.nodes} node{'s' if result.nodes != 1 else ''} x {result.gpus_per_node}), {number_format}")
    if result.mode == "train":
        trainable = "" if result.trainable_params == result.params else \
            f", {format_size(result.trainable_params)} trainable (LoRA)"
        echo(f"  work       {format_size(result.tokens)} tokens, seq {result.seq_len}, global batch "
             f"{result.global_batch} x micro {result.micro_batch}{trainable}")
        echo(f"  FLOPs      {result.model_flops:.3g} model ({result.flops_per_token:.3g}/token: 6N + attention)"
             + (f", {result.hardware_flops:.3g} hardware with recomputation"
                if result.hardware_flops > result.model_flops else ""))
    elif timed:
        echo(f"  work       {format_size(result.tokens)} tokens generated, batch {result.global_batch},"
             f" context {result.seq_len}")
    if result.mode == "train":
        echo(f"  memory/GPU {m.total:.1f} GB of {result.gpu_memory_gb:g} GB: weights {m.weights:.1f}, gradients "
             f"{m.gradients:.1f}, optimizer {m.optimizer:.1f}, activations {m.activations:.1f}, overhead "
             f"{m.overhead:.1f} (sharding {result.sharding}, {result.attention} attention)")
    else:
        echo(f"  memory/GPU {m.total:.1f} GB of {result.gpu_memory_gb:g} GB: weights {m.weights:.1f}, KV cache "
             f"{m.kv_cache:.1f}, activations {m.activations:.1f}, overhead {m.overhead:.1f} (split over "
             f"{result.gpus} GPU{'s' if result.gpus != 1 else ''}, {result.attention} attention)")
    echo(f"  fits       {fits_text(result)}")
    echo(f"  speed      {result.tokens_per_s_per_gpu:,.0f} tokens/s per GPU, MFU {result.mfu:.1%}"
         f" ({result.mfu_source}: {result.mfu_detail}), scaling efficiency {result.scaling_efficiency:.1%}")
    if not timed:
        for note in result.assumptions:
            echo(f"  assumed    {note}")
        echo("  time       give --tokens N for the time and cost")
        return
    overhead = "" if result.run_overhead == 1.0 else f" ({run_factor_text(result)})"
    echo(f"  time       {_fmt_hours(result.wall_hours)} wall, {result.gpu_hours:,.0f} GPU-hours{overhead}")
    if result.wall_hours_range is not None:
        low, high = result.wall_hours_range
        echo(f"  likely     {_fmt_hours(low)} to {_fmt_hours(high)} wall: 80% of published runs fell in this band "
             "around the model (bench it for a measured figure)")
    for i, c in enumerate(result.cost[:3]):
        market = "spot" if c["spot"] else "on-demand"
        plural = "s" if c["gpus_per_node"] > 1 else ""
        echo(f"  {'cost' if i == 0 else '':10} {dollars(c['total_usd'])}: {c['nodes']} x {c['cloud']} "
             f"{c['instance_type']} ({c['gpus_per_node']} GPU{plural}) {market} in {c['region']} at "
             f"{hourly(c['price_per_hour'])}/h")
    for note in result.assumptions:
        echo(f"  assumed    {note}")


@click.command("estimate")
@workload_options
@click.option("--gpu", shell_complete=complete.gpu_names,
              help="GPU type: H100, A100-80GB, A100 (=40GB), L4, T4, RTX4090, ... (required to train; "
              "without it --mode inference answers the memory and which GPUs hold it).")
@click.option("--gpus", type=bounded_int("gpus"), help="Total GPUs (default: the fewest that fit).")
@click.option("--nodes", type=bounded_int("nodes"), help="Nodes (with --gpus-per-node, default 8).")
@click.option("--gpus-per-node", type=bounded_int("gpus_per_node"),
              help="GPUs per node (default 8, or --gpus if fewer).")
@click.option("--network-gbps", type=bounded("network_gbps"),
              help="Inter-node network per node, Gbit/s (default: the cloud's).")
@click.option("--instance-type", metavar="TYPE",
              help="Take the inter-node network from this instance type's published bandwidth (p5.48xlarge: "
              "3200 Gbit/s EFA, g6e.12xlarge: 100, a3-highgpu-8g: 800 TCPX, ...); --network-gbps wins.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def estimate_command(app: AppContext, as_json: bool, **options: Any) -> None:
    """Estimate FLOPs, memory per GPU, wall time and GPU-hours of a training or inference job.

    Throughput, in order of preference: --throughput or --mfu, a matching `gpuplan bench` record, an MFU
    calibrated from finished runs, or the step model with every layout flag left out set to its default
    (listed as assumed).
    """
    if not options["gpu"]:
        if options["mode"] != "inference":
            raise UserError("--gpu is required to estimate training (H100, A100-80GB, L4, ...)")
        from gpuplan.cli.commands import estimate_serving

        answer = estimate_serving.vram_answer(build_workload(options))
        if as_json:
            emit_json(estimate_serving.as_json(answer))
        else:
            estimate_serving.render(answer)
        return
    result = run_estimate(app, options)
    if not tokens_given(options) and options["mode"] == "inference":
        if as_json:  # no token count: no time, GPU-hours or cost
            payload = dict(emit_payload(result), tokens=None, flops=None, wall_hours=None, gpu_hours=None,
                           cost=[], wall_hours_range=None, gpu_hours_range=None)
            emit_json(payload)
        else:
            render(result, timed=False)
        return
    if as_json:
        emit_json(result)
    else:
        render(result)
