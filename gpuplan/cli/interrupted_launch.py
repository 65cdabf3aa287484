"""What `gpuplan launch` says when Ctrl-C stops it after the run was recorded: machines may be running and
billing, and whoever pressed Ctrl-C must not have to guess which, at what rate, or how to stop them."""

from __future__ import annotations

from decimal import Decimal

from gpuplan.store.db import Store


def what_runs(store: Store, run_id: str) -> str:
    """One or two lines: the run's live machines and their $/h in all, its fail-safe, and the commands to follow
    or stop it. Never fails: a database error still leaves the run id and the stop command."""
    from gpuplan.cli.display import duration, money
    from gpuplan.launching.failsafe_store import recorded_failsafe
    from gpuplan.store.models import Run

    stop = f"stop it: gpuplan stop {run_id}; follow it: gpuplan status {run_id}"
    try:
        with store.session() as session:
            run = session.get(Run, run_id)
            if run is None:
                return f"interrupted: run {run_id} may have started machines; {stop}"
            live = [i for i in run.instances if i.terminated_at is None]
            rate = sum((Decimal(i.price_per_hour or 0) for i in live), Decimal(0))
            failsafe = recorded_failsafe(run)
            provider = run.provider
    except Exception:  # the message must come out whatever the database does now
        return f"interrupted: run {run_id} may have started machines; {stop}"
    if not live:
        return (f"interrupted: run {run_id} was recorded on {provider} and its machines may be starting; {stop}")
    hours = failsafe.hours if failsafe is not None else None
    timer = f", until its fail-safe at {duration(hours)}" if hours is not None else ""
    return (f"interrupted: run {run_id} keeps running: {len(live)} machine(s) on {provider} at {money(rate)}/h in "
            f"all{timer}\n{stop}")
