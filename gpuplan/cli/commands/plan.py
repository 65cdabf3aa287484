"""`gpuplan plan`: every GPU offer that can run the job, ranked by what the whole job costs.

This module parses (a job spec path, or estimate-style flags into a Workload; the limits into hours and Decimal
dollars), calls gpuplan.planning.job_plan.plan_job, which does the planning, and renders its answer. "Nothing
fits" is an answer with reasons (exit 0), not an error.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded, bounded_int
from gpuplan.cli.commands.workload_options import build_workload, workload_options
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, warn
from gpuplan.errors import UserError
from gpuplan.units import format_size, parse_duration_hours

if TYPE_CHECKING:  # types only: the planner and the catalog load when a plan runs
    from collections.abc import Sequence

    from gpuplan.planning.job_plan import PlanAnswer
    from gpuplan.planning.planner import Constraints, Option, PlanResult


@click.command("plan")
@click.argument("spec_path", metavar="[JOB.yaml]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@workload_options
@click.option("--gpu", "gpu_text", metavar="NAME[,NAME]", shell_complete=complete.gpu_names,
              help="Only these GPU types (default: every GPU sold).")
@click.option("--cloud", "cloud_text", metavar="CLOUD[,CLOUD]",
              help="The clouds to plan on, e.g. aws,azure (default: every cloud the catalog prices).")
@click.option("--region", "region_text", metavar="PATTERN[,PATTERN]", help="Region glob(s), e.g. 'us-*'.")
@click.option("--spot/--no-spot", default=None, help="Only spot, or only on-demand (default: both).")
@click.option("--deadline", metavar="DURATION", help="Must finish within this wall time: 72h, 3d or '3 days' "
                                                    "(units s, m, h, d, w; a bare number is hours).")
@click.option("--budget", type=bounded("usd"), metavar="USD", help="Must cost at most this much in total.")
@click.option("--max-price", type=bounded("usd_per_hour"), metavar="USD",
              help="At most this much per hour for all nodes.")
@click.option("--max-nodes", type=bounded_int("nodes"), default=64, show_default=True,
              help="Largest number of instances to consider.")
@click.option("--auto-shard/--no-auto-shard", default=True, show_default=True,
              help="Let the planner pick ZeRO-1/2/3 per GPU type when the model does not fit unsharded "
                   "(only when --sharding is none).")
@click.option("--interruption-rate", type=bounded("interruption_rate"), metavar="PER_HOUR",
              help="Spot interruptions per node-hour for every cloud (default: AWS 1/20, GCP 1/12).")
@click.option("--checkpoint-interval", metavar="DURATION",
              help="Time between checkpoints, for the spot interruption cost (default: the spec's, else 1h).")
@click.option("--limit", type=bounded_int("rows"), default=15, show_default=True, help="Options to show (0 = all).")
@click.option("--explain", is_flag=True, help="Also list every dropped option with the reason.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable: a list of options, cheapest first.")
@pass_app
def plan_command(app: AppContext, spec_path: Path | None, gpu_text: str | None, cloud_text: str | None,
                 region_text: str | None, spot: bool | None, deadline: str | None, budget: float | None,
                 max_price: float | None, max_nodes: int, auto_shard: bool, interruption_rate: float | None,
                 checkpoint_interval: str | None, limit: int, explain: bool, as_json: bool,
                 **workload_flags: Any) -> None:
    """Rank every GPU offer that can run the job by its total cost (hours x price x nodes).

    Give a job spec (its workload, resources and limits) or the same flags as `gpuplan estimate`. For each
    instance type, region and market the planner estimates the job on the fewest nodes that fit (more when a
    deadline needs them), adds the expected cost of spot interruptions, and drops what breaks the constraints.
    The output marks the cheapest, the fastest and the Pareto front of cost against time.
    """
    answer = plan_answer(app, spec_path, gpu_text=gpu_text, cloud_text=cloud_text, region_text=region_text,
                         spot=spot, deadline=deadline, budget=budget, max_price=max_price, max_nodes=max_nodes,
                         auto_shard=auto_shard, interruption_rate=interruption_rate,
                         checkpoint_interval=checkpoint_interval, **workload_flags)
    for line in answer.warnings:
        warn(line)
    result = answer.result
    shown = list(result.options[:limit] if limit else result.options)
    _note_precision_fallbacks(answer.workload.precision, {o.gpu for o in shown})
    if as_json:
        rows = [o.as_json() for o in shown]
        if explain:
            rows += [o.as_json() for o in result.rejected]
        emit_json(rows)
        return
    _render(answer, shown, explain)


MODEL_FLAGS = ("params", "model", "model_config", "module", "tokens", "samples")


def plan_answer(app: AppContext, spec_path: Path | None, *, gpu_text: str | None, cloud_text: str | None,
                region_text: str | None, spot: bool | None, deadline: str | None, budget: float | None,
                max_price: float | None, max_nodes: int, auto_shard: bool, interruption_rate: float | None,
                checkpoint_interval: str | None, **workload_flags: Any) -> PlanAnswer:
    """Plan the job the options describe (the parsed parameters of `plan_command`): the dashboard calls this too,
    so its options are `gpuplan plan --json`'s options. Parsing only; gpuplan.planning.job_plan does the rest."""
    from gpuplan.planning.job_plan import PlanRequest, plan_job

    if spec_path is None:
        workload = build_workload(workload_flags)
    elif any(workload_flags.get(name) for name in MODEL_FLAGS):
        raise UserError("give a job spec or model/work flags (--params, --tokens, ...), not both")
    else:
        workload = None
    request = PlanRequest(
        spec_path=spec_path, workload=workload,
        tokens_per_s=workload_flags.get("throughput"), mfu=workload_flags.get("mfu"),
        gpu_text=gpu_text, cloud_text=cloud_text, region_text=region_text, spot=spot,
        deadline_hours=_hours(deadline, "--deadline") if deadline else None,
        budget_usd=_money(budget) if budget is not None else None,
        max_price_per_hour=_money(max_price) if max_price is not None else None,
        max_nodes=max_nodes, auto_shard=auto_shard, interruption_rate=interruption_rate,
        checkpoint_hours=_hours(checkpoint_interval, "--checkpoint-interval") if checkpoint_interval else None,
    )
    return plan_job(request, app.db_url)


def _note_precision_fallbacks(precision: str, gpu_names: set[str]) -> None:
    """Say on stderr which planned GPUs run in another precision (bf16 -> fp16 on V100/T4), as estimate does."""
    from gpuplan.estimating.configured import precision_for
    from gpuplan.hardware.gpus import resolve_gpu

    for name in sorted(gpu_names):
        try:
            _, fallback = precision_for(resolve_gpu(name), precision)
        except ValueError:
            continue
        if fallback:
            note(f"note: {fallback}")


def _hours(text: str, flag: str) -> float:
    try:
        return parse_duration_hours(text, what=flag)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _money(value: float) -> Decimal:
    """Dollars as an exact Decimal (the flag's type already checked the range, gpuplan.limits)."""
    return Decimal(str(value))


def _render(answer: PlanAnswer, shown: list[Option], explain: bool) -> None:
    from gpuplan.cli.display import dollars, hours_text
    from gpuplan.cli.output import print_table

    workload, constraints, spot_model, result = answer.workload, answer.constraints, answer.spot_model, answer.result

    limits = []
    if constraints.deadline_hours:
        limits.append(f"deadline {constraints.deadline_hours:g} h")
    if constraints.budget_usd:
        limits.append(f"budget ${constraints.budget_usd:,.0f}")
    if constraints.max_price_per_hour:
        limits.append(f"max ${constraints.max_price_per_hour:,.2f}/h")
    if constraints.nodes:
        limits.append(f"exactly {constraints.nodes} node{'s' if constraints.nodes > 1 else ''}")
    market = {None: "spot and on-demand", True: "spot only", False: "on-demand only"}[constraints.spot]
    note(f"plan: {format_size(workload.params)} parameters, {format_size(workload.tokens)} tokens, "
         f"{workload.precision}; {market}" + (f"; {', '.join(limits)}" if limits else ""))
    ages = ", ".join(f"{s.cloud} {'shipped snapshot' if s.shipped else 'refreshed'} {s.fetched_at:%Y-%m-%d}"
                     for s in answer.catalog.sources.values())
    note(f"prices: {ages}")
    if result.options:
        note(f"throughput: {_throughput_sources(result.options)}")
    if not result.options:
        warn("nothing fits these constraints" + ("" if explain else " (--explain says why)"))
    else:
        print_table(
            ["#", "cloud", "region", "instance", "nodes x GPUs", "market", "$/h", "hours", "cost", "sharding",
             "note"],
            [(i + 1, o.cloud, o.region, o.instance_type, f"{o.nodes} x {o.gpus_per_node:g} {o.gpu}",
              "spot" if o.spot else "on-demand",
              _price_text(o.price_per_hour), hours_text(o.est_hours),
              "-" if o.est_cost_usd is None else dollars(o.est_cost_usd), o.sharding, " ".join(o.tags))
             for i, o in enumerate(shown)],
            justify_right=["#", "$/h", "hours", "cost"],
        )
        if len(shown) < len(result.options):
            note(f"{len(shown)} of {len(result.options)} options shown; --limit 0 shows all")
        _summary(result, constraints)
    if any(o.spot for o in shown):
        rates = ", ".join(f"{cloud} {rate:.3f}/h" for cloud, rate in spot_model.interruptions_per_hour.items())
        lost = (f"{spot_model.lost_hours * 60:.1f} min of work lost per interruption (measured)"
                if spot_model.measured_loss_hours is not None
                else f"checkpoint every {spot_model.checkpoint_hours:g} h")
        note(f"spot assumes interruptions per node-hour {rates}, {lost}, {spot_model.restart_hours * 60:.0f} min to "
             "restart")
    if explain and result.rejected:
        print_table(["cloud", "instance", "market", "nodes", "why dropped"], _grouped(result.rejected),
                    title="dropped")


THROUGHPUT_SOURCE_TEXT = {  # estimating.values.THROUGHPUT_SOURCES, as plan says them
    "model": "the step model, with each option's layout defaulted where the job does not state it (`gpuplan "
             "estimate` with the same flags and --gpu/--gpus lists what it assumed)",
    "bench": "your `gpuplan bench` records",
    "calibrated": "an MFU calibrated from your finished runs",
    "user": "the throughput given",
    "measured": "a measured throughput",
}


def _throughput_sources(options: Sequence[Option]) -> str:
    """Which answer timed the options (estimate's mfu_source), so a plan says what model it used."""
    sources = sorted({o.mfu_source for o in options if o.mfu_source})
    if not sources:
        return "none (no option could be timed)"
    return "; ".join(THROUGHPUT_SOURCE_TEXT.get(s, s) for s in sources)


def _summary(result: PlanResult, constraints: Constraints) -> None:
    """The answer (cheapest, fastest) on stdout with the table, so `plan ... > file` keeps it."""
    cheapest, fastest = result.cheapest, result.fastest
    if cheapest is None or fastest is None:  # no option passed: the caller said "nothing fits" instead
        return
    within = " within the deadline" if constraints.deadline_hours else ""
    click.echo(f"cheapest{within}: {_describe(cheapest)}")
    if fastest is not cheapest:
        click.echo(f"fastest: {_describe(fastest)}")
    front = result.pareto()
    if len(front) > 2:
        click.echo(f"Pareto front (cost vs time): {len(front)} options, tagged 'pareto'")
    long = {name: o.est_hours for name, o in (("cheapest", cheapest), ("fastest", fastest))
            if o.est_hours is not None and o.est_hours >= LONG_HOURS}
    if long:
        from gpuplan.cli.display import hours_text

        # A 3-year job is labelled "cheapest" or "fastest" by the ranking alone: say plainly that it is years.
        which = " and ".join(long) + (" options take" if len(long) > 1 else " option takes")
        warn(f"the {which} {hours_text(min(long.values()))} or more of wall time; "
             "--deadline (e.g. 30d) rules such options out")


LONG_HOURS = 24 * 365  # a year of wall time: plan warns that an option it names takes that long


def _describe(option: Option) -> str:
    from gpuplan.cli.display import dollars, hours_text

    return (f"{option.nodes} x {option.cloud} {option.instance_type} {'spot' if option.spot else 'on-demand'} in "
            f"{option.region}: {hours_text(option.est_hours)}, "
            f"{'-' if option.est_cost_usd is None else dollars(option.est_cost_usd)}")


def _price_text(price: Decimal | None) -> str:
    """$/h for all nodes: four places under a dollar (spot T4s), two above; `-` for an unpriced option."""
    if price is None:
        return "-"
    return f"{price:,.4f}" if price < 1 else f"{price:,.2f}"


def _grouped(rejected: tuple[Option, ...]) -> list[tuple[str, str, str, str, str]]:
    """One row per (cloud, instance type, market, reason): regions and node counts collapse."""
    groups: dict[tuple[str, str, str, str], set[int]] = {}
    for option in rejected:
        key = (option.cloud, option.instance_type, "spot" if option.spot else "on-demand", option.reason or "")
        groups.setdefault(key, set()).add(option.nodes)
    rows = []
    for (cloud, instance, market, reason), nodes in sorted(groups.items()):
        counts = sorted(nodes)
        rows.append((cloud, instance, market, ",".join(map(str, counts[:4])) + ("..." if len(counts) > 4 else ""),
                     reason))
    return rows
