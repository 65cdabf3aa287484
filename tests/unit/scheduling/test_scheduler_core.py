"""The scheduler fires each due slot exactly once, records skips, and shares a lease, on SQLite and PostgreSQL.

These tests drive `tick` with a launcher that records what it was asked (the launch itself is exercised end
to end with the local provider in tests/e2e/test_schedule_cli.py).
"""

from __future__ import annotations

import datetime as dt
import multiprocessing

import pytest
from sqlalchemy import select

from gpuplan.errors import UserError
from gpuplan.runs.events import EventKind
from gpuplan.scheduling import leases
from gpuplan.scheduling.scheduler import FireRequest, Gates, SkipFire, add_schedule, set_paused, tick
from gpuplan.store.db import Store
from gpuplan.store.models import Event, Run, ScheduleFire

UTC = dt.timezone.utc
ADDED = dt.datetime(2026, 11, 20, 12, tzinfo=UTC)
FIRE = dt.datetime(2026, 11, 23, 2, tzinfo=UTC)


class Recorder:
    """Records each fire and writes the run row a real launch would (run ids are foreign keys)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.requests: list[FireRequest] = []

    def __call__(self, request: FireRequest) -> str:
        self.requests.append(request)
        with self.store.session() as session:
            run = Run(name=request.schedule_name, provider="local", spec_text=request.spec_text, spec_hash="h",
                      schedule_id=request.schedule_id)
            session.add(run)
            return run.id


def no_gates(_spec: str) -> Gates:
    return Gates()


def _store_with_schedule(url: str, cron: str = "0 2 * * *", tz: str = "UTC") -> Store:
    store = Store.open(url)
    with store.session() as session:
        add_schedule(session, name="nightly", spec_text="name: nightly\ncommand: echo hi\n", spec_path=None,
                     cron=cron, tz=tz, now=ADDED)
    return store


def test_tick_fires_once_per_slot(db_url: str) -> None:
    store = _store_with_schedule(db_url)
    launcher = Recorder(store)
    first = tick(store, FIRE, launcher, no_gates)
    assert [(r.outcome, r.fire_at) for r in first] == [("launched", FIRE)]
    assert tick(store, FIRE, launcher, no_gates) == []
    assert tick(store, FIRE + dt.timedelta(hours=5), launcher, no_gates) == []
    assert len(launcher.requests) == 1
    assert launcher.requests[0].spec_text.startswith("name: nightly")
    store.close()


def test_catch_up_runs_once_after_downtime(db_url: str) -> None:
    store = _store_with_schedule(db_url)
    launcher = Recorder(store)
    week_later = FIRE + dt.timedelta(days=7, hours=3)
    results = tick(store, week_later, launcher, no_gates)
    assert [r.fire_at for r in results] == [FIRE + dt.timedelta(days=7)]
    assert tick(store, week_later + dt.timedelta(minutes=1), launcher, no_gates) == []
    store.close()


def test_skip_is_recorded(db_url: str) -> None:
    store = _store_with_schedule(db_url)

    def refuse(_request: FireRequest) -> str:
        raise SkipFire("budget 'team' has $3.00 left, the job needs $40.00")

    results = tick(store, FIRE, refuse, no_gates)
    assert results[0].outcome == "skipped"
    with store.session() as session:
        fire = session.scalars(select(ScheduleFire)).one()
        assert fire.outcome == "skipped" and "budget 'team'" in (fire.reason or "")
        kinds = [e.kind for e in session.scalars(select(Event).where(Event.schedule_id == fire.schedule_id))]
        assert EventKind.SCHEDULE_SKIPPED in kinds
    store.close()


def test_window_gate_skips_outside(db_url: str) -> None:
    store = _store_with_schedule(db_url, cron="0 12 * * *")
    launcher = Recorder(store)
    results = tick(store, FIRE + dt.timedelta(hours=10), launcher, lambda _s: Gates(window="00:00-06:00"))
    assert results[0].outcome == "skipped" and "window" in (results[0].reason or "")
    assert launcher.requests == []
    store.close()


def test_failed_launch_is_recorded_and_does_not_stop_others(db_url: str) -> None:
    store = _store_with_schedule(db_url)

    def broken(_request: FireRequest) -> str:
        raise RuntimeError("provider exploded")

    results = tick(store, FIRE, broken, no_gates)
    assert results[0].outcome == "failed" and "provider exploded" in (results[0].reason or "")
    store.close()


def test_paused_schedules_do_not_fire(db_url: str) -> None:
    store = _store_with_schedule(db_url)
    with store.session() as session:
        set_paused(session, "nightly", True, ADDED)
    assert tick(store, FIRE, Recorder(store), no_gates) == []
    store.close()


def test_bad_cron_and_tz_are_user_errors(tmp_path) -> None:
    store = Store.open(f"sqlite:///{tmp_path / 's.db'}")
    with pytest.raises(UserError, match="invalid cron"), store.session() as session:
        add_schedule(session, name="x", spec_text="", spec_path=None, cron="61 * * * *", tz="UTC", now=ADDED)
    with pytest.raises(UserError, match="time zone"), store.session() as session:
        add_schedule(session, name="x", spec_text="", spec_path=None, cron="0 2 * * *", tz="Nope/Nope", now=ADDED)
    store.close()


def _race(url: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = Store.open(url)
    barrier.wait()
    fired = tick(store, FIRE, Recorder(store), no_gates)
    results.put(len(fired))
    store.close()


def test_two_processes_fire_exactly_once(db_url: str) -> None:
    _store_with_schedule(db_url).close()
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(db_url, barrier, results)) for _ in range(2)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(60)
    assert sorted(results.get(timeout=5) for _ in procs) == [0, 1]
    store = Store.open(db_url)
    with store.session() as session:
        assert len(session.scalars(select(ScheduleFire)).all()) == 1
    store.close()


def test_lease_is_exclusive_until_expiry(db_url: str) -> None:
    store = Store.open(db_url)
    ttl = dt.timedelta(seconds=60)
    with store.session() as a, store.session() as b:
        assert leases.acquire(a, "scheduler", "host-a", ttl, FIRE)
        assert not leases.acquire(b, "scheduler", "host-b", ttl, FIRE + dt.timedelta(seconds=30))
        assert leases.acquire(a, "scheduler", "host-a", ttl, FIRE + dt.timedelta(seconds=30))  # renew
        assert leases.acquire(b, "scheduler", "host-b", ttl, FIRE + dt.timedelta(seconds=91))  # a expired
        leases.release(b, "scheduler", "host-b")
        assert leases.acquire(a, "scheduler", "host-a", ttl, FIRE + dt.timedelta(seconds=92))
    store.close()
