"""`gpuplan bench`: run real training steps, report and store the measured throughput; `gpuplan bench list`.

`bench` is a Click group invoked without a subcommand to run a bench (`gpuplan bench --model gpt2`), so the
common case reads naturally, and `gpuplan bench list` lists the records. torch is imported only when a bench
runs; the options are validated before that import.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded, bounded_int
from gpuplan.cli.context import AppContext, app_from
from gpuplan.cli.output import emit_json, note, print_table
from gpuplan.errors import UserError

if TYPE_CHECKING:
    from gpuplan.bench.result import BenchResult

RUN_OPTIONS = ("model", "model_config", "module", "layers", "device", "precision", "seq_len", "micro_batch",
               "steps", "warmup", "compile_", "peak_tflops", "output", "no_save", "on", "image", "install",
               "max_hours", "budget", "interval", "force")
REMOTE_ONLY = ("image", "install", "max_hours", "budget", "interval", "force")


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--model", metavar="PRESET", shell_complete=complete.model_presets,
              help="A model preset (default gpt-tiny): gpt2, llama-2-7b, ...")
@click.option("--model-config", metavar="CONFIG.JSON", help="A Hugging Face config.json to build the model from.")
@click.option("--module", metavar="PKG.MOD:FACTORY",
              help="Your own nn.Module: FACTORY() returns it; it takes token ids (batch, seq) and returns logits.")
@click.option("--layers", type=bounded_int("layers"),
              help="Run only N of the model's layers (a quick proxy; MFU is recorded for the full model, labelled as "
                   "a proxy).")
@click.option("--device", default="auto", show_default=True, help="auto, cpu, cuda or cuda:N.")
@click.option("--precision", type=click.Choice(["bf16", "fp16", "fp32"]),
              help="Mixed precision via autocast (default: bf16 on GPUs that have it, fp16 on older, fp32 on CPU).")
@click.option("--seq-len", type=bounded_int("seq_len"),
              help="Tokens per sample (default: the model's context, at most 1024).")
@click.option("--micro-batch", type=bounded_int("micro_batch"), default=8, show_default=True, help="Samples per step.")
@click.option("--steps", type=bounded_int("steps", low=1), default=20, show_default=True, help="Timed steps.")
@click.option("--warmup", type=bounded_int("steps"), default=5, show_default=True, help="Untimed steps first.")
@click.option("--compile", "compile_", is_flag=True, help="torch.compile the model first.")
@click.option("--peak-tflops", type=bounded("peak_tflops"),
              help="The device's peak TFLOP/s for MFU (default: the GPU table; "
                                                "on a CPU, MFU is reported only with this).")
@click.option("--output", type=click.Path(dir_okay=False, writable=True), metavar="FILE",
              help="Also write the result as one line of JSON to FILE.")
@click.option("--no-save", is_flag=True, help="Do not record the bench in the database (the remote job uses this: "
                                               "the launching side records it).")
@click.option("--on", "on", metavar="PROVIDER[:TYPE]",
              help="Run the bench as a short job elsewhere: aws:p5.48xlarge, gcp:a2-highgpu-1g, slurm[:GPU], local. "
                   "Recorded as a run (cost, budgets) and as a bench with its run id.")
@click.option("--image", help="With --on: the job's container image (aws/gcp default: "
                              "pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime; local/slurm: none, same Python).")
@click.option("--install", metavar="PIP_SPEC", help="With --on: what `pip install` installs when the image lacks "
                                                    "gpuplan: your wheel or a git URL (no default).")
@click.option("--max-hours", type=bounded("hours"), default=0.5, show_default=True,
              help="With --on: the job's hard time cap.")
@click.option("--budget", type=bounded("usd"),
              help="With --on: the job's cost cap in USD (default: max-hours at the machine's price).")
@click.option("--interval", type=bounded("interval_s", low=0.1), default=1.0, show_default=True,
              help="With --on: seconds between checks while following the job.")
@click.option("--force", is_flag=True, help="With --on: start even if a budget would be exceeded.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def bench(ctx: click.Context, model: str | None, model_config: str | None, module: str | None, layers: int | None,
          device: str, precision: str | None, seq_len: int | None, micro_batch: int, steps: int, warmup: int,
          compile_: bool, peak_tflops: float | None, output: str | None, no_save: bool, on: str | None,
          image: str | None, install: str | None, max_hours: float, budget: float | None, interval: float,
          force: bool, as_json: bool) -> None:
    """Measure training throughput with real forward + backward + AdamW steps, and record it.

    \b
    gpuplan bench --model gpt2 --steps 20        run and record a bench
    gpuplan bench --model llama-2-7b --layers 2  a quick proxy of a big model
    gpuplan bench --on aws:p5.48xlarge           the same bench as a short job on that machine
    gpuplan bench list                           the recorded benches

    `gpuplan estimate` uses the best matching record (same GPU type, model, precision, sequence length).
    """
    if ctx.invoked_subcommand is not None:
        from click.core import ParameterSource

        given = [name for name in RUN_OPTIONS if ctx.get_parameter_source(name) == ParameterSource.COMMANDLINE]
        if given or as_json:
            raise UserError(f"options before '{ctx.invoked_subcommand}' belong to a bench run; "
                            f"use 'gpuplan bench {ctx.invoked_subcommand} --help'")
        return
    from click.core import ParameterSource

    from gpuplan.bench.spec import BenchSettings, resolve_target, validate_settings

    target = resolve_target(model, model_config, module, layers)
    settings = validate_settings(
        BenchSettings(device=device, precision=precision, seq_len=seq_len, micro_batch=micro_batch, steps=steps,
                      warmup=warmup, compile=compile_, peak_tflops=peak_tflops), target)
    app = app_from(ctx)
    if on is not None:
        if output or no_save:
            raise UserError("--output and --no-save are for a bench on this machine, not with --on")
        _remote_bench(app, ctx.params, target.name, on, image=image, install=install, max_hours=max_hours,
                      budget=budget, interval=interval, force=force, as_json=as_json)
        return
    stray = [f"--{n.replace('_', '-')}" for n in REMOTE_ONLY
             if ctx.get_parameter_source(n) == ParameterSource.COMMANDLINE]
    if stray:
        raise UserError(f"{', '.join(stray)} only apply with --on PROVIDER")
    if output:
        _check_output_folder(output)  # before minutes of benching, not after
    store = None if no_save else app.store  # open (and upgrade) the database before minutes of benching
    result = _run_with_progress(target, settings)
    if output:
        # Written before the record is stored: a file that cannot be written (exit 2) leaves no record behind.
        _write_output(output, result)
    bench_id = None
    if store is not None:
        from gpuplan.bench.records import save_result

        # Stored only now that the run is complete: Ctrl-C above leaves no record behind.
        with store.session() as session:
            bench_id = save_result(session, result).id
    if as_json:
        emit_json({"id": bench_id, **asdict(result)})
        return
    _print_result(bench_id, result)


def _check_output_folder(path: str) -> None:
    """--output into a folder that does not exist (a typo) is bad input, said before the bench runs."""
    from pathlib import Path

    folder = Path(path).parent
    if not folder.is_dir():
        raise UserError(f"--output: folder {folder} does not exist")


def _write_output(path: str, result: BenchResult) -> None:
    """The result as one line of JSON (the remote bench echoes it into its log), written atomically."""
    import json
    import os
    from pathlib import Path

    target = Path(path)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(asdict(result)) + "\n")
        os.replace(tmp, target)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"--output: cannot write {target}: {exc.strerror or exc}") from exc


def _remote_bench(app: AppContext, params: dict[str, Any], name: str, on: str, *, image: str | None,
                  install: str | None, max_hours: float, budget: float | None, interval: float, force: bool,
                  as_json: bool) -> None:
    """`--on`: plan the bench job, gate it on the budgets, launch and follow it, then record its result."""
    from decimal import Decimal

    from gpuplan.cli.display import money
    from gpuplan.cli.follow import follow
    from gpuplan.launching.remote_bench import RemoteOptions, plan_remote, record_remote_result
    from gpuplan.launching.remote_bench_job import bench_argv, parse_on
    from gpuplan.launching.sequence import check_gates, launch

    target = parse_on(on)
    argv = bench_argv({**params, "compile": params.get("compile_")})
    options = RemoteOptions(image=image, install=install, max_hours=max_hours,
                            budget_usd=Decimal(str(budget)) if budget is not None else None)
    store = app.store
    plan, provider = plan_remote(target, argv, options, name=f"bench-{name}", db_url=store.url)
    offer = plan.offer
    where = " ".join(str(p) for p in (offer.instance_type, offer.region) if p)
    note(f"bench job on {target.label}: {where or provider.name}, {money(offer.total_price_per_hour)}/h, "
         f"at most {max_hours:g} h" + (f" / ${plan.spec.limits.budget_usd}" if plan.spec.limits.budget_usd
                                      else ""))
    gates = check_gates(store, plan, provider, force=force)
    for v in gates.overridden:
        note(f"warning: --force: {v.message}")
    run_id = launch(store, plan, provider, {}, gates=gates)
    try:
        follow(store, run_id, interval=interval)
    except KeyboardInterrupt:
        note("\nstopped following; the bench run keeps going and is capped by its max-hours (gpuplan status)")
        raise SystemExit(130) from None
    bench_id, result = record_remote_result(store, run_id, provider)
    if as_json:
        emit_json({"id": bench_id, "run_id": run_id, **asdict(result)})
        return
    _print_result(bench_id, result, run_id=run_id)


def _run_with_progress(target: Any, settings: Any) -> BenchResult:
    try:
        from gpuplan.bench.runner import prepare_bench, quiet_warnings, run_prepared
    except ImportError as exc:
        if "torch" not in str(exc):
            raise
        raise UserError("gpuplan bench needs PyTorch: pip install 'gpuplan[bench]'") from exc
    from rich.console import Console

    with quiet_warnings():
        prepared = prepare_bench(target, settings)
        note(f"bench {target.name}: {prepared.params:,} parameters, {settings.micro_batch} x {settings.seq_len} "
             f"tokens per step, {prepared.precision} on {prepared.info.name}")
        with progress_bar(Console(stderr=True)) as progress:
            return run_prepared(prepared, ProgressObserver(progress))


def progress_bar(console: Any) -> Any:
    """The bench's rich progress bar; 4 refreshes a second so drawing it takes next to no CPU from the steps
    (bench/bench_overhead.py measures the whole loop, bar included)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description:>8}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    console=console, refresh_per_second=4)


class ProgressObserver:
    """Feeds the bench's phases to a rich progress bar (one task per phase)."""

    def __init__(self, progress: Any) -> None:
        self.progress = progress
        self.task: Any = None

    def phase(self, name: str, total: int) -> None:
        self.task = self.progress.add_task(name, total=total) if total > 0 else None

    def step(self) -> None:
        if self.task is not None:
            self.progress.advance(self.task)


def _print_result(bench_id: int | None, r: BenchResult, run_id: str | None = None) -> None:
    layers = f"{r.layers} of {r.full_layers} layers" if r.layers and r.full_layers and r.layers < r.full_layers \
        else (f"{r.layers} layers" if r.layers else "")
    rows = [
        ("model", f"{r.model_name} ({_fmt_count(r.params)} params{', ' + layers if layers else ''})"),
        ("device", f"{r.device} — {r.device_name}" + (f" [{r.gpu}]" if r.gpu else "")),
        ("setup", f"{r.precision}, seq-len {r.seq_len}, micro-batch {r.micro_batch}, {r.steps} steps after "
                  f"{r.warmup} warm-up{', compiled' if r.compiled else ''}"),
        ("throughput", f"{r.tokens_per_s:,.0f} tokens/s, {r.samples_per_s:,.2f} samples/s"),
        ("step time", f"p50 {r.step_time_p50_s * 1000:.1f} ms, p90 {r.step_time_p90_s * 1000:.1f} ms"),
        ("FLOPs/step", f"{r.flops_per_step:.3e} (attention {r.attention_flops_per_step:.3e}, "
                       f"{r.attention_flops_source})"),
        ("achieved", f"{r.achieved_tflops:.3f} TFLOP/s"),
        ("MFU", f"{r.mfu:.1%} of {r.peak_tflops:g} TFLOP/s ({r.peak_tflops_source})" if r.mfu is not None
         else "n/a (no known peak for this device; pass --peak-tflops)"),
        ("peak memory", f"{r.peak_memory_gb:.2f} GB ({r.peak_memory_kind.replace('_', ' ')})"),
        ("torch", r.torch_version),
    ]
    if run_id:
        rows.append(("run", f"{run_id} on {r.host} (gpuplan status {run_id})"))
    print_table(["", f"bench #{bench_id}" if bench_id is not None else "bench (not recorded)"], rows)


def _fmt_count(value: int) -> str:
    from gpuplan.units import format_size

    return format_size(value)


@bench.command("list")
@click.option("--limit", type=bounded_int("rows"), default=50, show_default=True, help="Newest N records (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON.")
@click.pass_context
def bench_list(ctx: click.Context, limit: int, as_json: bool) -> None:
    """The recorded benches, newest first."""
    from gpuplan.bench.records import bench_to_dict, list_benchmarks

    app: AppContext = app_from(ctx)
    with app.store.session() as session:
        records = [bench_to_dict(row) for row in list_benchmarks(session, limit or None)]
    if as_json:
        emit_json({"benchmarks": records})
        return
    if not records:
        note("no benches recorded yet; run `gpuplan bench --model gpt-tiny`")
        return
    rows = [
        (r["id"], r["created_at"].strftime("%Y-%m-%d %H:%M"), r["run_id"] or "local", r["gpu"] or r["device"],
         r["model"],
         r["layers"] if r["layers"] is not None else "", r["precision"], r["seq_len"], r["micro_batch"],
         f"{r['tokens_per_s']:,.0f}", f"{r['achieved_tflops']:.3f}" if r["achieved_tflops"] is not None else "",
         f"{r['mfu']:.1%}" if r["mfu"] is not None else "",
         f"{r['step_time_p50_s'] * 1000:.1f}" if r["step_time_p50_s"] is not None else "")
        for r in records
    ]
    print_table(["id", "when (UTC)", "source", "device", "model", "layers", "prec", "seq", "mb", "tokens/s", "TFLOP/s",
                 "MFU", "p50 ms"], rows,
                justify_right=["id", "layers", "seq", "mb", "tokens/s", "TFLOP/s", "MFU", "p50 ms"])
