"""`gpuplan launch job.yaml`: plan, confirm, record, start, and (unless --detach) follow a run to its end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuplan.cli.commands.params import bounded
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note
from gpuplan.launching.failsafe import FailSafe

if TYPE_CHECKING:
    from gpuplan.launching.caps import Overrun
    from gpuplan.launching.offer import LaunchPlan
    from gpuplan.launching.sequence import LaunchGates


@click.command("launch")
@click.argument("spec_path", metavar="JOB.yaml", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--provider", "provider_name", default=None,
              help="Where to run: local, aws, gcp, slurm or a plugin's name. Default: the spec's resources.clouds "
                   "(several: the cheapest that fits), else [defaults] provider in the config file, else local.")
@click.option("--allow-cpu", is_flag=True,
              help="Run a GPU job where there are no GPUs (e.g. this machine) on the CPU; recorded as a CPU run.")
@click.option("--dry-run", is_flag=True, help="Show the offer and the estimate; record and start nothing.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--detach", is_flag=True, help="Start and return; `gpuplan watch` enforces the caps.")
@click.option("--interval", type=bounded("interval_s", low=0.1), default=1.0, show_default=True,
              help="Seconds between checks while following.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output on stdout (progress on stderr).")
@click.option("--force", is_flag=True, help="Launch even if the estimate exceeds a budget (recorded as an event) or "
                                           "the spec's max_hours, budget_usd or deadline (stopped there).")
@click.option("--env", "env_items", multiple=True, metavar="NAME[=VALUE]",
              help="Set an environment variable of the job (over the spec's env); NAME alone copies it from this "
                   "shell. Repeatable.")
@click.option("--secret", "secret_items", multiple=True, metavar="NAME",
              help="Hand the job the secret NAME, read from this shell's environment at launch (never stored or "
                   "logged). Repeatable.")
@pass_app
def launch(app: AppContext, spec_path: Path, provider_name: str | None, allow_cpu: bool, dry_run: bool, yes: bool,
           detach: bool, interval: float, as_json: bool, force: bool, env_items: tuple[str, ...],
           secret_items: tuple[str, ...]) -> None:
    """Launch the job in JOB.yaml and follow it (logs, progress bar, ETA) until it ends.

    JOB.yaml is a gpuplan job spec, a SkyPilot task file or a dstack `type: task` configuration (told apart by
    their keys; `gpuplan convert JOB.yaml` shows the gpuplan spec one of the latter two becomes)."""
    from gpuplan.cli.display import duration, hours_text, money
    from gpuplan.jobs.defaults import with_defaults
    from gpuplan.jobs.foreign import load_job
    from gpuplan.jobs.overrides import with_overrides
    from gpuplan.launching.plan import source_dir_of
    from gpuplan.launching.record import read_secrets
    from gpuplan.launching.sequence import LaunchInterrupted, check_gates, launch
    from gpuplan.launching.where import decide_launch

    loaded = load_job(spec_path)  # a gpuplan spec, or a SkyPilot/dstack task translated (gpuplan.jobs.foreign)
    if loaded.translation is not None:
        note(f"{spec_path}: a {loaded.translation.origin} task, run as the gpuplan spec `gpuplan convert "
             f"{spec_path}` shows")
        if loaded.translation.note():
            note(loaded.translation.note())
    own = with_overrides(loaded.spec, env_items, secret_items)  # --env / --secret over the spec's
    spec = with_defaults(own)  # the config file's [defaults] where the spec is silent
    spec_text = loaded.text
    # where (and whether a GPU job may run on a CPU) is decided before anything is planned or recorded
    decision = decide_launch(spec, spec_text, option=provider_name, allow_cpu=allow_cpu,
                             source_dir=source_dir_of(spec_path), db_url=app.store.url,
                             clouds_from_config=bool(spec.resources.clouds) and not own.resources.clouds)
    provider, plan = decision.provider, decision.plan
    note(f"provider: {provider.name} ({decision.why})")
    for line in decision.notes:
        note(line)
    if plan.image_arch is not None:  # which machines the image can run on, and how gpuplan knows
        note(plan.image_arch.note)
    info = {**plan.as_dict(), **decision.as_dict()}
    where = " ".join(str(p) for p in (info["instance_type"], info["region"]) if p) or "(the provider chooses)"
    gpus = f"{info['nodes']} node(s) x {info['gpus_per_node']} {info['gpu'] or 'GPU'}" if info["gpu"] else \
        f"{info['nodes']} node(s), CPU"
    note(f"job {spec.name}: {provider.name} {where}, {gpus}, {money(info['price_per_hour'])}/h")
    from gpuplan.launching.larger import larger_machines_offered

    larger = larger_machines_offered(provider, plan, db_url=app.store.url)
    for c in larger:  # the spec's `larger_machines: true`: priced and shown before anything starts
        note(f"failover may use a larger machine (larger_machines: true): {c.instance_type} in {c.region}, "
             f"{c.gpu_count:g} x {c.gpu}, {money(c.price_per_hour)}/h per node")
    if plan.estimate is not None:
        est = plan.estimate
        # On spot the hours include the expected interruptions; say so, or they look like an unexplained gap.
        spot = f"; spot interruptions {hours_text(est.interruption_hours)} expected" if est.interruption_hours else ""
        note(f"estimate: {duration(est.hours)} ({est.source}; start-up {est.startup_s:.1f} s, "
             f"{est.startup_source}: {est.startup_detail}{spot}), {money(est.cost_usd)}")
        if dry_run and est.assumptions:
            note("the step model assumed (a spec states them as the workload fields of the same names):")
            for assumed in est.assumptions:
                note(f"  assumed: {assumed}")
        elif est.assumptions:
            note(f"assumed: {len(est.assumptions)} defaults the job spec does not state (--dry-run lists them)")
    else:
        note("estimate: none (add workload tokens and a model or throughput to the spec)")
    # refuses (exit 2) a job over a budget, or one the provider says cannot work (gpuplan.launching.sequence)
    gates = check_gates(app.store, plan, provider, force=force)
    for line in gates.launch_check.notes:
        note(line)
    fs = _show_gates(gates)  # refuses (exit 2) a job a cap leaves no time, dry run or not
    over = _show_overruns(plan, force=force)
    if dry_run:
        if as_json:
            emit_json({**info, "failsafe": fs.as_dict(), **dict(gates.launch_check.details),
                       "larger_machines": [{"instance_type": c.instance_type, "region": c.region,
                                            "gpus_per_node": c.gpu_count, "price_per_hour": c.price_per_hour}
                                           for c in larger],
                       "over_caps": [o.as_dict() for o in over], "dry_run": True})
        else:
            click.echo("dry run: nothing recorded, nothing started")
        return
    secrets = read_secrets(spec)
    if over and not force:
        if yes:  # nobody to ask: a job its own caps stop part way is launched only on purpose
            from gpuplan.errors import UserError

            raise UserError(f"refused under -y: {over[0].message}; use --force to launch anyway (it will be "
                            "stopped at the cap)")
        _ask("the caps stop this job before it ends; start it anyway?", default=False)
    elif not yes:
        _ask("start it?", default=True)
    try:
        run_id = launch(app.store, plan, provider, secrets, gates=gates)
    except LaunchInterrupted as exc:
        from gpuplan.cli.interrupted_launch import what_runs

        note("\n" + what_runs(app.store, exc.run_id))
        sys.exit(130)
    # From here the run is started: a Ctrl-C at any point (even before following begins) leaves it running and
    # says how to reach it.
    try:
        note(f"run {run_id} started (logs: gpuplan logs {run_id} -f; stop: gpuplan stop {run_id})")
        if detach:
            from gpuplan.supervise.watch import watch_run

            summary = watch_run(app.store, run_id).summary
        else:
            from gpuplan.cli.follow import follow

            summary = follow(app.store, run_id, interval=interval).summary
    except KeyboardInterrupt:
        note(f"\nstopped following; run {run_id} keeps going (gpuplan status {run_id}, gpuplan stop {run_id})")
        sys.exit(130)
    _finish({**summary, **decision.as_dict()}, as_json, exit_on_failure=not detach)  # + where and why


EXIT_DECLINED = 3  # the user answered no at the prompt: nothing went wrong, nothing was recorded or started


def _ask(question: str, *, default: bool) -> None:
    """Ask before anything is recorded; a "no" exits EXIT_DECLINED (3), so a script tells a declined launch from a
    failed one (1) or bad input (2)."""
    if not click.confirm(question, default=default, err=True):
        note("not started: nothing recorded")
        sys.exit(EXIT_DECLINED)


def _show_gates(gates: LaunchGates) -> FailSafe:
    """Say which budgets a --force goes past and the machines' own timer, the tightest cap
    (gpuplan.launching.failsafe), before anything is recorded; a cap with no time left (a spent budget, a passed
    deadline, money short of the cloud's minimum billing) is refused here with one line, exit 2."""
    from gpuplan.cli.display import duration
    from gpuplan.launching.failsafe_store import check

    for v in gates.overridden:
        note(f"warning: --force: {v.message}")
    fs = gates.failsafe
    if fs.hours is not None and not fs.refused:
        note(f"machine fail-safe: {duration(fs.hours)}, set by {fs.cap} ({fs.detail})")
    for text in fs.notes:
        note(f"machine fail-safe: {text}")
    return check(fs)


def _show_overruns(plan: LaunchPlan, *, force: bool) -> list[Overrun]:
    """Say, before anything is recorded, every spec cap the estimate goes past and by how much
    (gpuplan.launching.caps); the caller asks, or refuses under -y without --force."""
    from gpuplan.launching.caps import overruns
    from gpuplan.store.types import utcnow

    found = overruns(plan, utcnow())
    for o in found:
        note(f"{'warning: --force: ' if force else 'over a cap: '}{o.message}")
    return found


def _finish(summary: dict, as_json: bool, *, exit_on_failure: bool) -> None:
    from gpuplan.cli.display import show_summary

    show_summary(summary, as_json)
    if exit_on_failure and summary["state"] != "succeeded":
        sys.exit(1)
