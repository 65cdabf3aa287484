"""The one launch sequence: gates, record, start. `gpuplan launch`, the scheduler and `bench --on` all use it.

Order, and why: the budget gate, the machine fail-safe and the provider's own check of the launch
(`Provider.check_launch`: e.g. AWS user data over 16 KB, no instance profile for the secrets) are checked before
anything is recorded, so a refused launch leaves no row (exit 2); then the gate and fail-safe are taken again
under the launch lock, in the transaction that records the Run row with its budget reservation
(gpuplan.launching.reserve: concurrent launches cannot together overspend a budget), and a `--force`d launch
records which budgets it went past (`budget_override`) in the same transaction; then the start
(gpuplan.launching.start), whose crash window is explained there.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpuplan.books.budgets import Violation, gate_launch
from gpuplan.launching.failsafe import FailSafe
from gpuplan.launching.failsafe_store import check, for_plan
from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.reserve import reserve_and_record
from gpuplan.launching.start import launch_recorded_run
from gpuplan.providers.base import LaunchCheck, Provider
from gpuplan.store.db import Store
from gpuplan.store.types import utcnow
from gpuplan.testpoint import pause_point


@dataclass(frozen=True)
class LaunchGates:
    """What the gates decided for a launch not yet recorded."""

    failsafe: FailSafe  # the machines' own timer as planned now (worked out again, per placement, at the start)
    overridden: list[Violation] = field(default_factory=list)  # budgets a --force'd launch goes past
    launch_check: LaunchCheck = field(default_factory=LaunchCheck)  # what the provider said about the launch
    force: bool = False  # the launch may go past its budgets (--force)


def check_gates(store: Store, plan: LaunchPlan, provider: Provider, *, force: bool,
                now: dt.datetime | None = None) -> LaunchGates:
    """The budget gate (a budget the estimate breaks refuses the launch with BudgetRefused, exit 2, unless
    `force`), the provider's own check of the launch (`check_launch`: UserError, exit 2, e.g. a boot script over
    EC2's 16 KB, no instance profile for the secrets, a GCE label or image family GCE refuses), and the fail-safe
    as planned. A fail-safe with no time left is not raised here, so the caller can show it first: `launch`
    refuses it (gpuplan.launching.failsafe_store.check)."""
    now = now or utcnow()
    est = plan.estimate
    with store.session() as session:
        overridden = gate_launch(session, project=plan.spec.project, cloud=plan.offer.cloud,
                                 est_cost_usd=est.cost_usd if est is not None else None, now=now, force=force)
        failsafe = for_plan(session, plan, min_billed_seconds=provider.min_billed_seconds, now=now, force=force)
    return LaunchGates(failsafe=failsafe, overridden=overridden, launch_check=check_launch(plan, provider),
                       force=force)


# The run id of the request the provider checks: not recorded yet, so a stand-in of a real id's shape and length.
PLANNED_RUN_ID = "r-0000000000"


def check_launch(plan: LaunchPlan, provider: Provider) -> LaunchCheck:
    """The provider's check of this launch as it will be asked (UserError, exit 2, when it cannot work).

    The request is the one the start builds, with a stand-in run id, the secrets' names with empty values (their
    values are read later, and a provider must not need them to check) and, for a provider that boots from a
    script, the script rendered as for the chosen placement.
    """
    from gpuplan.launching.placements import with_boot_scripts
    from gpuplan.launching.start import build_request

    request = build_request(plan, PLANNED_RUN_ID, "", {name: "" for name in plan.spec.secrets})
    if provider.boots_from_script:
        request = with_boot_scripts(request, provider)
    return provider.check_launch(request)


def launch(store: Store, plan: LaunchPlan, provider: Provider, secrets: Mapping[str, str], *,
           gates: LaunchGates, schedule_id: int | None = None) -> str:
    """Refuse a launch its fail-safe leaves no time, then reserve its budget and record the run (and the budgets a
    --force went past) in one locked step, and start it. Returns the run id; a provider error is raised after the
    run is marked failed. BudgetRefused / UserError (exit 2) when a concurrent launch took the money first."""
    check(gates.failsafe)
    from gpuplan.paths import runs_dir
    from gpuplan.store.fitness import check_fit_for_launch

    check_fit_for_launch(store, runs_dir())  # in memory, damaged, or no room: refused before anything is recorded
    reservation = reserve_and_record(store, plan, min_billed_seconds=provider.min_billed_seconds,
                                     force=gates.force or bool(gates.overridden), schedule_id=schedule_id)
    try:
        pause_point("reserved")
        launch_recorded_run(store, reservation.run_id, plan, provider, secrets)
        pause_point("started")
    except KeyboardInterrupt as exc:
        raise LaunchInterrupted(reservation.run_id) from exc
    return reservation.run_id


class LaunchInterrupted(KeyboardInterrupt):
    """Ctrl-C once the run was recorded: machines may be running and billing, so the caller is told which run
    (`gpuplan launch` says what runs, at what rate, and how to stop it)."""

    def __init__(self, run_id: str) -> None:
        super().__init__(run_id)
        self.run_id = run_id
