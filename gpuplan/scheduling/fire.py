"""What a scheduled fire does: re-plan the stored spec now, apply its gates, launch detached.

Kept apart from gpuplan.scheduling.scheduler (which decides *when*) so the timing logic stays free of providers, and
the launch path is the very same orchestration `gpuplan launch --detach` uses.
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.scheduling.scheduler import FireRequest, Gates, Launcher, SkipFire

if TYPE_CHECKING:
    from gpuplan.jobs.spec import JobSpec
    from gpuplan.launching.offer import LaunchPlan
    from gpuplan.providers.base import Provider
    from gpuplan.store.db import Store

log = logging.getLogger(__name__)


def gates_of(spec_text: str) -> Gates:
    """The `schedule:` gates of a stored spec (none when the spec has no schedule section)."""
    from gpuplan.jobs.spec import parse_spec

    section = parse_spec(spec_text, source="<scheduled spec>").schedule
    if section is None:
        return Gates()
    price = float(section.max_price_per_hour) if section.max_price_per_hour is not None else None
    return Gates(window=section.window, max_price_per_hour=price, spot_only=section.spot_only)


def provider_name_for(spec: JobSpec) -> str:
    """Where a scheduled spec runs, as `gpuplan launch` decides (gpuplan.launching.where): its only cloud when it
    names exactly one, else `[defaults] provider` of the config file, else this machine."""
    from gpuplan.config import default_setting

    clouds = list(spec.resources.clouds)
    if len(clouds) == 1:
        return clouds[0]
    default = default_setting("provider")
    return default.strip() if isinstance(default, str) and default.strip() else "local"


def make_launcher(store: Store, *, spec_dir: str | None = None) -> Launcher:
    """A launcher bound to `store`: plan with current prices, check gates and budgets, launch detached."""

    def launcher(request: FireRequest) -> str:
        from gpuplan.books.budgets import BudgetRefused
        from gpuplan.jobs.defaults import with_defaults
        from gpuplan.jobs.spec import parse_spec
        from gpuplan.launching.choose import provider_for
        from gpuplan.launching.gpu_check import check_gpus
        from gpuplan.launching.plan import plan_launch
        from gpuplan.launching.record import read_secrets
        from gpuplan.launching.sequence import check_gates, launch
        from gpuplan.store.models import Schedule

        # The config file's [defaults] (budget, project, clouds, regions) where the spec is silent, read at each
        # fire as `gpuplan launch` reads them: a default budget caps scheduled runs too.
        spec = with_defaults(parse_spec(request.spec_text, source=f"schedule {request.schedule_name}"))
        provider = provider_for(provider_name_for(spec))
        # a GPU job where there are no GPUs fails the fire (UserError), never runs on a CPU (launching.gpu_check)
        spec = check_gpus(spec, provider, allow_cpu=False).spec
        # db_url: the store's bench records, calibrations and finished runs (start-up) shape the estimate, as
        # for `gpuplan launch`.
        plan = plan_launch(spec, request.spec_text, provider=provider,
                           source_dir=spec_dir or _source_dir(store, request.schedule_id, Schedule), db_url=store.url)
        _check_gates(plan, request.gates, provider)
        try:
            gates = check_gates(store, plan, provider, force=False, now=request.now)
        except BudgetRefused as exc:  # skipped (recorded with the reason), not failed: the next slot may fit
            raise SkipFire("; ".join(v.message for v in exc.violations)) from exc
        secrets = read_secrets(spec)
        try:
            run_id = launch(store, plan, provider, secrets, gates=gates, schedule_id=request.schedule_id)
        except BudgetRefused as exc:  # a concurrent launch reserved the money between the gate and the record
            raise SkipFire("; ".join(v.message for v in exc.violations)) from exc
        log.info("schedule %s: launched run %s", request.schedule_name, run_id)
        return run_id

    return launcher


def _source_dir(store: Store, schedule_id: int, schedule_model: Any) -> str | None:
    """The folder the spec was added from: relative paths in its command resolve there, as for a launch."""
    with store.session() as session:
        schedule = session.get(schedule_model, schedule_id)
        path = schedule.spec_path if schedule is not None else None
    return str(Path(path).parent) if path else None


def _check_gates(plan: LaunchPlan, gates: Gates, provider: Provider) -> None:
    """The schedule's own gates on the chosen offer (this machine is never spot, so spot_only lets it run)."""
    offer = plan.offer
    if gates.spot_only and not offer.spot and not provider.runs_here:
        raise SkipFire("spot_only: the chosen offer is not spot")
    price = offer.total_price_per_hour
    if gates.max_price_per_hour is not None and price is not None and float(price) > gates.max_price_per_hour:
        raise SkipFire(f"price ${float(price):.2f}/h is above schedule.max_price_per_hour "
                       f"${gates.max_price_per_hour:.2f}/h")



def watch_scheduled_runs(store: Store, now: dt.datetime) -> None:
    """One watch pass over live runs, so caps apply to what the scheduler launched."""
    from gpuplan.supervise.watch import watch_all

    for result in watch_all(store):
        if result.changed:
            log.info("run %s: %s%s", result.run_id, result.state, f" ({result.capped})" if result.capped else "")
