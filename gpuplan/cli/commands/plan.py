"""`gpuplan plan`: every GPU offer that can run the job, ranked by what the whole job costs.

Turns a job spec or estimate-style flags into a Workload and Constraints, loads the price catalog, resolves the
throughput per GPU type (user > bench > calibrated > default, as `estimate` does) and prints gpuplan.planning.planner's
answer. "Nothing fits" is an answer with reasons (exit 0), not an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded, bounded_int
from gpuplan.cli.commands.workload_options import build_workload, workload_options
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, warn
from gpuplan.errors import UserError
from gpuplan.estimating.defaults import AUTO_SHARDINGS
from gpuplan.units import format_size, parse_duration_hours


@click.command("plan")
@click.argument("spec_path", metavar="[JOB.yaml]", required=False, type=click.Path(dir_okay=False, path_type=Path))
@workload_options
@click.option("--gpu", "gpu_text", metavar="NAME[,NAME]", shell_complete=complete.gpu_names,
              help="Only these GPU types (default: every GPU sold).")
@click.option("--cloud", "cloud_text", metavar="CLOUD[,CLOUD]", help="aws, gcp (default: both).")
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
    workload, constraints, spot_model, result, catalog = (answer.workload, answer.constraints, answer.spot_model,
                                                          answer.result, answer.catalog)
    shown = list(result.options[:limit] if limit else result.options)
    _note_precision_fallbacks(workload.precision, {o.gpu for o in shown})
    if as_json:
        rows = [o.as_json() for o in shown]
        if explain:
            rows += [o.as_json() for o in result.rejected]
        emit_json(rows)
        return
    _render(workload, constraints, spot_model, result, shown, explain, catalog)


@dataclass(frozen=True)
class PlanAnswer:
    """What `gpuplan plan` (and the dashboard's plan explorer) computed: the workload and constraints it planned
    for, the spot model, the ranked and dropped options, and the catalog whose prices it used."""

    workload: Any
    constraints: Any
    spot_model: Any
    result: Any
    catalog: Any


def plan_answer(app: AppContext, spec_path: Path | None, *, gpu_text: str | None, cloud_text: str | None,
                region_text: str | None, spot: bool | None, deadline: str | None, budget: float | None,
                max_price: float | None, max_nodes: int, auto_shard: bool, interruption_rate: float | None,
                checkpoint_interval: str | None, **workload_flags: Any) -> PlanAnswer:
    """Plan the job the options describe (the parsed parameters of `plan_command`): one function for every caller,
    so the dashboard's options are `gpuplan plan --json`'s options."""
    from gpuplan.catalog.catalog import Catalog
    from gpuplan.catalog.gpu_names import compile_region_patterns, resolve_clouds, resolve_gpus
    from gpuplan.planning.planner import Constraints, plan
    from gpuplan.runs.interruption_loss import measured_loss

    workload, own_throughput, spec_limits = _workload(spec_path, workload_flags)
    gpus = resolve_gpus(gpu_text) if gpu_text else spec_limits.get("gpus")
    clouds = resolve_clouds(cloud_text) if cloud_text else spec_limits.get("clouds") or _default_clouds()
    regions = compile_region_patterns(region_text) if region_text else \
        spec_limits.get("regions") or _default_regions()
    if spot is None:
        spot = spec_limits.get("spot")
    if spec_limits.get("nodes") and max_nodes < spec_limits["nodes"]:
        raise UserError(f"--max-nodes {max_nodes} is below the spec's resources.nodes {spec_limits['nodes']}")
    constraints = Constraints(
        deadline_hours=_hours(deadline, "--deadline") if deadline else spec_limits.get("deadline_hours"),
        budget_usd=_money(budget, "--budget") if budget is not None else spec_limits.get("budget_usd"),
        spot=spot,
        max_price_per_hour=_money(max_price, "--max-price") if max_price is not None else spec_limits.get(
            "max_price_per_hour"),
        max_nodes=max_nodes,
        nodes=spec_limits.get("nodes"),
    )
    spot_model = _spot_model(interruption_rate, checkpoint_interval, spec_limits.get("checkpoint_hours"),
                             measured_loss(app.db_url))
    shardings = AUTO_SHARDINGS if auto_shard and workload.sharding == "none" else None

    catalog = Catalog.load(app.db_url, clouds)
    if region_text or spec_limits.get("regions"):  # [defaults] regions name every cloud's: some match none here
        catalog.check_regions(regions, "--region" if region_text else f"{spec_path}: resources.regions")
    from gpuplan.catalog.gpu_names import not_rented_message, rented

    if gpus is not None and not all(rented(g) for g in gpus):
        warn(not_rented_message({g for g in gpus if not rented(g)}))
    # Every zone type: keep_offer below applies the launch's rule (named Local Zones only).
    offers = catalog.select(gpus=gpus, regions=regions, zones="all")
    if spec_limits.get("gpus_per_node"):
        offers = [o for o in offers if o.gpu_count == spec_limits["gpus_per_node"]]
    # What a launch would use without being told: no AWS Local/Wavelength Zone unless the spec names it
    # (gpuplan.catalog.zones; the launch also leaves out regions the account has not enabled, which plan cannot
    # know without asking the cloud).
    from gpuplan.catalog.zones import keep_offer, standard_zone

    named = spec_limits.get("zones") or ()
    offers = [o for o in offers
              if keep_offer(o.region, o.zone, standard=standard_zone, named=named)]
    throughput_for = _throughput_resolver(app, workload, workload_flags, own_throughput, gpus)
    from gpuplan.calibration.startup import startup_allowance

    # Each cloud's start-up allowance, as `gpuplan launch` adds it to the run's hours (gpuplan.estimating.job_hours).
    startup_s = {cloud: startup_allowance(cloud, app.db_url).seconds for cloud in {o.cloud for o in offers}}
    from gpuplan.planning.job_cost import billing_minimums

    result = plan(workload, offers, constraints=constraints, throughput_for=throughput_for,
                  spot_model=spot_model, shardings=shardings, startup_s=startup_s,
                  min_billed_seconds=billing_minimums(o.cloud for o in offers))

    return PlanAnswer(workload, constraints, spot_model, result, catalog)


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


def _workload(spec_path: Path | None, flags: dict[str, Any]) -> tuple[Any, Any, dict[str, Any]]:
    """(Workload, the spec's own throughput, the spec's constraints) from a job spec or the flags."""
    from gpuplan.estimating.from_job import workload_from_job

    if spec_path is None:
        return build_workload(flags), None, {}
    if flags.get("params") or flags.get("model") or flags.get("model_config") or flags.get("module") or \
            flags.get("tokens") or flags.get("samples"):
        raise UserError("give a job spec or model/work flags (--params, --tokens, ...), not both")
    from gpuplan.catalog.gpu_names import compile_region_patterns, resolve_clouds, resolve_gpus
    from gpuplan.jobs.foreign import load_job

    spec = load_job(spec_path).spec  # a gpuplan spec, or a SkyPilot/dstack task as launch reads it
    if spec.workload is None:
        raise UserError(f"{spec_path}: the spec has no workload section (model or params, tokens) to plan from")
    try:
        workload, own = workload_from_job(spec.workload)
    except ValueError as exc:
        raise UserError(f"{spec_path}: {exc}") from exc
    res, limits = spec.resources, spec.limits
    found: dict[str, Any] = {}
    if res.gpu:  # every candidate GPU (`gpu: [A100:8, H100:8]`), or the one
        found["gpus"] = resolve_gpus(",".join(c.rpartition(":")[0] for c in res.gpu_candidates) or res.gpu)
    from gpuplan.providers.registry import load_provider_class

    clouds = [c for c in res.clouds if load_provider_class(c).priced_by_catalog]  # not this machine, a cluster
    if clouds:
        found["clouds"] = resolve_clouds(",".join(clouds))
    if res.regions:
        found["regions"] = compile_region_patterns(",".join(res.regions))
    if res.spot:
        found["spot"] = True
    # What the spec states outright is what `launch` will start: plan exactly that shape, not the fewest nodes.
    if "nodes" in res.model_fields_set:
        found["nodes"] = res.nodes
    if res.gpus_per_node and len({c.rpartition(":")[2] for c in res.gpu_candidates}) <= 1:
        found["gpus_per_node"] = res.gpus_per_node  # candidates of different counts: each plans its own
    if res.max_price_per_hour is not None:
        found["max_price_per_hour"] = Decimal(res.max_price_per_hour)
    if res.zones:
        found["zones"] = tuple(res.zones)
    if limits.budget_usd is not None:
        found["budget_usd"] = Decimal(limits.budget_usd)
    if limits.deadline is not None and not hasattr(limits.deadline, "tzinfo"):
        found["deadline_hours"] = float(limits.deadline)
    elif limits.deadline is not None:
        import datetime as dt

        hours = (limits.deadline - dt.datetime.now(dt.timezone.utc)).total_seconds() / 3600
        if hours <= 0:
            raise UserError(f"{spec_path}: the deadline {limits.deadline.isoformat()} has already passed")
        found["deadline_hours"] = hours
    if spec.checkpoint is not None and spec.checkpoint.interval:
        found["checkpoint_hours"] = float(spec.checkpoint.interval)
    return workload, own, found


def _default_clouds() -> list[str] | None:
    """`[defaults] clouds` of the config file, the ones with prices (local and slurm have no catalog)."""
    from gpuplan.catalog.gpu_names import KNOWN_CLOUDS, resolve_clouds
    from gpuplan.config import default_setting

    value = default_setting("clouds")
    priced = [c for c in value if c in KNOWN_CLOUDS] if isinstance(value, list) else []
    return resolve_clouds(",".join(priced)) if priced else None


def _default_regions() -> list[str] | None:
    """`[defaults] regions` of the config file (globs)."""
    from gpuplan.catalog.gpu_names import compile_region_patterns
    from gpuplan.config import default_setting

    value = default_setting("regions")
    return compile_region_patterns(",".join(value)) if isinstance(value, list) and value else None


def _hours(text: str, flag: str) -> float:
    try:
        return parse_duration_hours(text, what=flag)
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _money(value: float, flag: str) -> Decimal:
    """Dollars as an exact Decimal (the flag's type already checked the range, gpuplan.limits)."""
    return Decimal(str(value))


def _spot_model(rate: float | None, interval: str | None, spec_interval: float | None, measured: Any = None) -> Any:
    from gpuplan.planning.planner import DEFAULT_CHECKPOINT_HOURS, DEFAULT_INTERRUPTIONS_PER_HOUR, SpotModel

    rates = {cloud: rate for cloud in DEFAULT_INTERRUPTIONS_PER_HOUR} if rate is not None else dict(
        DEFAULT_INTERRUPTIONS_PER_HOUR)
    hours = _hours(interval, "--checkpoint-interval") if interval else (spec_interval or DEFAULT_CHECKPOINT_HOURS)
    return SpotModel(interruptions_per_hour=rates, checkpoint_hours=hours,
                     measured_loss_hours=measured.hours if measured is not None else None)


def _throughput_resolver(app: AppContext, workload: Any, flags: dict[str, Any], own: Any,
                         gpus: frozenset[str] | None) -> Any:
    """throughput_for(gpu): the user's number, else a bench or calibration for that GPU, else the prior."""
    from gpuplan.calibration.throughput import LookupKey, resolve_throughput, store_lookups

    tokens_per_s, mfu = flags.get("throughput"), flags.get("mfu")
    if tokens_per_s is not None and (gpus is None or len(gpus) != 1):
        raise UserError("--throughput is tokens/s on one GPU type: give exactly one --gpu (or use --mfu)")
    lookups = store_lookups(app.db_url)
    cache: dict[str, Any] = {}

    def throughput_for(gpu: Any) -> Any:
        if own is not None:
            return own
        if gpu.name not in cache:
            key = LookupKey(gpu=gpu.name, params=workload.params, precision=workload.precision,
                            seq_len=workload.seq_len, architecture=workload.architecture)
            try:
                cache[gpu.name] = resolve_throughput(tokens_per_s=tokens_per_s, mfu=mfu, key=key, lookups=lookups)
            except ValueError as exc:
                raise UserError(str(exc)) from exc
        return cache[gpu.name]

    return throughput_for


def _render(workload: Any, constraints: Any, spot_model: Any, result: Any, shown: list[Any], explain: bool,
            catalog: Any) -> None:
    from gpuplan.cli.display import dollars, hours_text
    from gpuplan.cli.output import print_table

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
                     for s in catalog.sources.values())
    note(f"prices: {ages}")
    if not result.options:
        warn("nothing fits these constraints" + ("" if explain else " (--explain says why)"))
    else:
        print_table(
            ["#", "cloud", "region", "instance", "nodes x GPUs", "market", "$/h", "hours", "cost", "sharding",
             "note"],
            [(i + 1, o.cloud, o.region, o.instance_type, f"{o.nodes} x {o.gpus_per_node:g} {o.gpu}",
              "spot" if o.spot else "on-demand",
              f"{o.price_per_hour:,.4f}" if o.price_per_hour < 1 else f"{o.price_per_hour:,.2f}",
              hours_text(o.est_hours),
              dollars(o.est_cost_usd), o.sharding, " ".join(o.tags)) for i, o in enumerate(shown)],
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


def _summary(result: Any, constraints: Any) -> None:
    """The answer (cheapest, fastest) on stdout with the table, so `plan ... > file` keeps it."""
    cheapest, fastest = result.cheapest, result.fastest
    within = " within the deadline" if constraints.deadline_hours else ""
    click.echo(f"cheapest{within}: {_describe(cheapest)}")
    if fastest is not cheapest:
        click.echo(f"fastest: {_describe(fastest)}")
    front = result.pareto()
    if len(front) > 2:
        click.echo(f"Pareto front (cost vs time): {len(front)} options, tagged 'pareto'")
    long = {name: o for name, o in (("cheapest", cheapest), ("fastest", fastest)) if o.est_hours >= LONG_HOURS}
    if long:
        from gpuplan.cli.display import hours_text

        # A 3-year job is labelled "cheapest" or "fastest" by the ranking alone: say plainly that it is years.
        which = " and ".join(long) + (" options take" if len(long) > 1 else " option takes")
        warn(f"the {which} {hours_text(min(o.est_hours for o in long.values()))} or more of wall time; "
             "--deadline (e.g. 30d) rules such options out")


LONG_HOURS = 24 * 365  # a year of wall time: plan warns that an option it names takes that long


def _describe(option: Any) -> str:
    from gpuplan.cli.display import dollars, hours_text

    return (f"{option.nodes} x {option.cloud} {option.instance_type} {'spot' if option.spot else 'on-demand'} in "
            f"{option.region}: {hours_text(option.est_hours)}, {dollars(option.est_cost_usd)}")


def _grouped(rejected: Any) -> list[tuple[str, str, str, str, str]]:
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
