"""Event rows written before the payloads were typed still read, in a real database (SQLite and PostgreSQL).

Each OLD row is the JSON the writer of that kind produced before (key for key, in the old writers' order), so
an existing database holds exactly these. Two things are checked: each reads as its payload dataclass with real
types (Decimal money, datetimes), and a payload written today keeps every old key with the old value (the
stored shape only gains keys, at their defaults where nothing was known); the one exception is
`budget_override`, once a bare list, now an object, whose old rows read too. Then the product's readers
(fail-safe, launch plans, spot billing, the planner's interruption loss, relaunch recovery) answer from old rows
inserted as raw SQL.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from decimal import Decimal
from typing import Any

import pytest
from sqlalchemy import text

from gpuplan.books.quoted import quoted_vs_billed
from gpuplan.launching.failsafe_store import fired_reason, recorded_failsafe
from gpuplan.providers.base import Instance
from gpuplan.runs import payloads as p
from gpuplan.runs.events import EventKind, new_event, payload
from gpuplan.runs.interruption_loss import measured_loss
from gpuplan.store.db import Store
from gpuplan.store.models import Event, InstanceRow, Run
from gpuplan.supervise.adopt import planned_regions, search_regions
from gpuplan.supervise.adopt_price import planned_price
from gpuplan.supervise.relaunch import pending_relaunch
from gpuplan.supervise.resume import resumed_line
from gpuplan.supervise.spot_bill import billed_instance_ids

T0 = dt.datetime(2026, 11, 20, 10, 0, tzinfo=dt.UTC)
FAILSAFE = ('{"hours": 0.5, "cap": "budget_usd", "detail": "$50.00 at $100.00/h", "burn_usd_per_hour": "100.00", '
            '"budgets_skipped": false, "notes": ["forced"], "bounds": [{"cap": "max_hours", "hours": 2.0, '
            '"detail": "max_hours 2"}, {"cap": "budget_usd", "hours": 0.5, "detail": "$50.00 at $100.00/h"}]}')
PLACEMENTS = ('[{"region": "us-east-1", "zone": "us-east-1a", "instance_type": "p5.48xlarge", '
              '"price_per_hour": "98.32", "spot": false, "failsafe": {"hours": 0.5, "cap": "budget_usd", '
              '"detail": "a"}}, {"region": "us-west-2", "zone": null, "instance_type": "p5.48xlarge", '
              '"price_per_hour": "120.00", "spot": false, "failsafe": {"hours": 0.25, "cap": "budget_usd", '
              '"detail": "$30.00 at $120.00/h"}}]')
LAUNCH_PLAN = ('{"provider": "aws", "cloud": "aws", "regions": ["us-east-1", "us-west-2"], "zones": ["us-east-1a"], '
               '"instance_types": ["p5.48xlarge"], "placements": ' + PLACEMENTS + ', "host": "box", "pid": 4242, '
               '"failsafe": {"hours": 0.5, "cap": "budget_usd", "detail": "$50.00 at $100.00/h", '
               '"burn_usd_per_hour": "100.00", "budgets_skipped": false, "notes": [], "bounds": []}}')
BILLED = ('{"instance": "i-1", "zone": "us-east-1a", "instance_type": "p5.48xlarge", "quoted_price_per_hour": '
          '"98.320000", "billed_price_per_hour": "40.000000", "quoted_cost_usd": "61.701150", "billed_cost_usd": '
          '"64.000000", "billed_seconds": "5760", "price_steps": 3, "source": "aws: DescribeSpotPriceHistory", '
          '"history_starts_late": false}')
RELAUNCH = ('{"generation": 1, "instances": ["i-2"], "resumed_from_step": 40, "checkpoint_at": '
            '"2026-11-20T10:30:00+00:00", "lost_steps": 3, "lost_seconds": 900.0, "notice": {"node_rank": 0, '
            '"cloud": "aws", "action": "terminate", "noticed_at": "2026-11-20T10:44:00Z"}}')

# kind, the row's data as the old writer stored it, the payload it reads as
OLD: list[tuple[str, str, object]] = [
    (EventKind.CREATED, '{"provider": "aws", "instance_type": "p5.48xlarge", "region": "us-east-1", "nodes": 2, '
     '"est_hours": 1.5}', p.CreatedData("aws", "p5.48xlarge", "us-east-1", 2, 1.5)),
    (EventKind.STATE, '{"previous": "running", "state": "failed", "reason": "exit 3", "exit_code": 3}',
     p.StateData("running", "failed", "exit 3", 3)),
    (EventKind.LAUNCH_PLAN, LAUNCH_PLAN, p.LaunchPlanData(
        "aws", "aws", ("us-east-1", "us-west-2"), ("us-east-1a",), ("p5.48xlarge",),
        (p.PlannedPlacement("us-east-1", "us-east-1a", "p5.48xlarge", Decimal("98.32"), False,
                            p.TimerData("budget_usd", 0.5, "a")),
         p.PlannedPlacement("us-west-2", None, "p5.48xlarge", Decimal("120.00"), False,
                            p.TimerData("budget_usd", 0.25, "$30.00 at $120.00/h"))),
        "box", 4242, p.FailSafeData(0.5, "budget_usd", "$50.00 at $100.00/h", Decimal("100.00")))),
    (EventKind.LAUNCH_ATTEMPT, '{"attempt": 1, "provider": "aws", "region": "us-east-1", "zone": "us-east-1a", '
     '"instance_type": "p5.48xlarge", "spot": true, "outcome": "capacity", "code": "InsufficientInstanceCapacity", '
     '"why": "no capacity", "seconds": 0.412, "instance_ids": [], "blocked": "us-east-1a", "generation": 2}',
     p.AttemptData(1, "aws", "us-east-1", "us-east-1a", "p5.48xlarge", True, "capacity",
                   "InsufficientInstanceCapacity", "no capacity", 0.412, (), "us-east-1a", 2)),
    (EventKind.LAUNCH_FAILED, '{"error": "QuotaError", "code": "VcpuLimitExceeded"}',
     p.LaunchFailedData("QuotaError", "VcpuLimitExceeded")),
    (EventKind.LAUNCHED, '{"instances": ["i-1", "i-2"]}', p.MachinesData(("i-1", "i-2"))),
    (EventKind.TERMINATED, '{"instances": ["i-1"]}', p.MachinesData(("i-1",))),
    (EventKind.FAILSAFE, FAILSAFE[:-1] + ', "generation": 1}', p.FailSafeData(
        0.5, "budget_usd", "$50.00 at $100.00/h", Decimal("100.00"), False, ("forced",),
        (p.TimerData("max_hours", 2.0, "max_hours 2"), p.TimerData("budget_usd", 0.5, "$50.00 at $100.00/h")), 1)),
    (EventKind.CAPPED, '{"budget": "team", "spent_usd": "1000.50", "amount_usd": "1000"}',
     p.CappedData("team", Decimal("1000.50"), Decimal("1000"))),
    (EventKind.CALIBRATED, '{"calibration_id": 7}', p.CalibratedData(7)),
    (EventKind.SPOT_BILLED, BILLED, p.SpotBilledData(
        "i-1", "us-east-1a", "p5.48xlarge", Decimal("98.320000"), Decimal("40.000000"), Decimal("61.701150"),
        Decimal("64.000000"), Decimal(5760), 3, "aws: DescribeSpotPriceHistory", False)),
    (EventKind.ADOPTED, '{"instances": ["i-3"], "launched_at": ["2026-11-20T10:00:00+00:00"], "unpriced": [], '
     '"prices": {"i-3": {"source": "launch_plan", "price_per_hour": "98.32", "detail": null}}}',
     p.AdoptedData(("i-3",), (T0,), (), {"i-3": p.QuoteData("launch_plan", Decimal("98.32"))})),
    (EventKind.RELAUNCH, RELAUNCH, p.RelaunchData(
        1, ("i-2",), 40, "2026-11-20T10:30:00+00:00", 3, 900.0,
        notice=p.NoticeData(0, "aws", "terminate", "2026-11-20T10:44:00Z"))),
    (EventKind.RELAUNCH_FAILED, '{"generation": 2, "code": "InsufficientInstanceCapacity"}',
     p.RelaunchData(2, code="InsufficientInstanceCapacity")),
    (EventKind.RELAUNCH, '{"generation": 3, "instances": ["i-4"], "recovered": true}',
     p.RelaunchData(3, ("i-4",), recovered=True)),
    (EventKind.INSTANCES_MERGED, '{"kept": 1, "removed": [2], "rows": [{"id": "1", "price_per_hour": "3.5", '
     '"min_billed_seconds": "60", "state": "running", "launched_at": "2026-11-20T10:00:00+00:00", '
     '"terminated_at": null}], "merged": {"price_per_hour": "3.5"}}',
     p.InstancesMergedData(1, (2,), (p.MergedRow("1", Decimal("3.5"), "60", "running", T0),),
                           {"price_per_hour": "3.5"})),
    (EventKind.RECONCILE_TERMINATED, '{"cloud": "aws", "region": "us-east-1", "instance_id": "i-9", "run_id": null, '
     '"state": "running", "kind": "orphan", "age_s": 3600, "why": "no run"}',
     p.OrphanTerminatedData("aws", "us-east-1", "i-9", None, "running", "orphan", 3600, "no run")),
    (EventKind.RECONCILE_SECRET_DELETED, '{"resource": "secret", "cloud": "gcp", "provider": "gcp", "region": null, '
     '"secret": "gpuplan-r-1", "run_id": "r-1", "run_state": "failed", "kind": "orphan", "age_s": 90, "why": '
     '"ended", "action": "deleted"}',
     p.SecretDeletedData("secret", "gcp", "gcp", None, "gpuplan-r-1", "r-1", "failed", "orphan", 90, "ended",
                         "deleted")),
    (EventKind.SCHEDULE_ADDED, '{"spec_hash": "abc"}', p.ScheduleData(spec_hash="abc")),
    (EventKind.SCHEDULE_UPDATED, '{"cron": "0 3 * * *", "tz": "UTC"}', p.ScheduleData("0 3 * * *", "UTC")),
    (EventKind.SCHEDULE_LAUNCHED, '{"fire_at": "2026-11-20T10:00:00+00:00"}', p.ScheduleFireData(T0)),
]


def _event(kind: str, data_json: str) -> Event:
    return Event(run_id="r-old", kind=kind, message="", data_json=data_json, at=T0)


@pytest.mark.parametrize(("kind", "old", "read"), OLD, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(OLD)])
def test_an_old_row_reads_as_its_payload_and_a_new_row_keeps_its_shape(kind: str, old: str, read: object) -> None:
    cls = type(read)
    assert payload(_event(kind, old), cls) == read
    stored = json.loads(old)
    assert set(stored) <= {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]  # nothing dropped
    assert _keeps(stored, json.loads(new_event(kind, "", read).data_json or "{}"))


def _keeps(old: object, new: object) -> bool:
    """`new` holds every key of `old` (at any depth) with the same value, and nothing else but defaults (null,
    false or empty: what a reader of the old row gets for a key it lacks)."""
    if isinstance(old, dict) and isinstance(new, dict):
        return all(key in new and _keeps(value, new[key]) for key, value in old.items()) and \
            all(new[key] in (None, False, [], {}) for key in new.keys() - old.keys())
    if isinstance(old, list) and isinstance(new, list):
        return len(old) == len(new) and all(_keeps(a, b) for a, b in zip(old, new, strict=True))
    return old == new and type(old) is type(new)


def test_an_old_budget_override_list_reads_as_its_violations() -> None:
    old = ('[{"budget": "nlp-month", "period": "month", "amount_usd": "100", "spent_usd": "20", "reserved_usd": '
           '"0", "free_usd": "80", "est_cost_usd": "150"}]')
    read = payload(_event(EventKind.BUDGET_OVERRIDE, old), p.BudgetOverrideData)
    assert read == p.BudgetOverrideData((p.ViolationData("nlp-month", "month", Decimal(100), Decimal(20), Decimal(0),
                                                         Decimal(80), Decimal(150)),))
    written = new_event(EventKind.BUDGET_OVERRIDE, "", read).data_json or "{}"
    assert json.loads(written) == {"violations": json.loads(old)}


def _insert(store: Store, rows: list[tuple[str, str, str, dt.datetime]]) -> None:
    """Rows as an existing database holds them: plain SQL, no ORM, no payload code."""
    with store.session() as s:
        for run_id, kind, data_json, at in rows:
            s.execute(text("INSERT INTO events (run_id, kind, message, data_json, at) VALUES (:r, :k, '', :d, :at)"),
                      {"r": run_id, "k": kind, "d": data_json, "at": at.replace(tzinfo=None)})
        s.commit()


def _run(run_id: str, **values: Any) -> Run:
    return Run(id=run_id, name=run_id, provider="aws", cloud="aws", spec_text="", spec_hash="", state="running",
               created_at=T0, **values)


def test_the_readers_answer_from_old_rows_in_a_real_database(db_url: str) -> None:
    store = Store.open(db_url)
    try:
        with store.session() as s:
            s.add_all([_run("r-plan"), _run("r-fs"), _run("r-spot"), _run("r-re")])
            s.add(InstanceRow(run_id="r-plan", provider="aws", provider_instance_id="i-1", cloud="aws",
                              region="us-west-2", zone="us-west-2b", instance_type="p5.48xlarge",
                              price_per_hour=Decimal("120.00"), launched_at=T0))
            s.commit()
        minute = dt.timedelta(minutes=1)
        _insert(store, [
            ("r-plan", EventKind.LAUNCH_PLAN, LAUNCH_PLAN, T0),  # the launch died before its failsafe event
            ("r-fs", EventKind.LAUNCH_PLAN, LAUNCH_PLAN, T0),
            ("r-fs", EventKind.FAILSAFE, FAILSAFE, T0 + minute),
            ("r-spot", EventKind.SPOT_BILLED, BILLED, T0),
            ("r-re", EventKind.LAUNCH_PLAN, LAUNCH_PLAN[:-1] + ', "generation": 1}', T0),
            ("r-re", EventKind.RELAUNCH, RELAUNCH, T0 + minute),
            ("r-re", EventKind.LAUNCH_PLAN, LAUNCH_PLAN[:-1] + ', "generation": 2}', T0 + 2 * minute),
        ])
        with store.session() as s:
            plan_run, fs_run, spot_run, re_run = (s.get(Run, r) for r in ("r-plan", "r-fs", "r-spot", "r-re"))
            assert plan_run and fs_run and spot_run and re_run
            # the machine is in the second placement: its timer at its own price, the rest from the plan
            planned = recorded_failsafe(plan_run)
            assert planned == p.FailSafeData(0.25, "budget_usd", "$30.00 at $120.00/h", Decimal("100.00"))
            assert fired_reason(fs_run) == ("budget_usd: the machine's own fail-safe stopped the job at 0.5 h "
                                            "($50.00 at $100.00/h)")
            assert search_regions(plan_run) == ["us-west-2", "us-east-1"]  # its machine's, then the plan's
            machine = Instance(provider="aws", instance_id="i-5", state="running", region="us-east-1",
                               instance_type="p5.48xlarge")
            assert planned_price(plan_run, machine) == Decimal("98.32")
            assert planned_regions(s, T0) == {"aws": {"us-east-1", "us-west-2"}}
            assert billed_instance_ids(s, spot_run) == {"i-1"}
            [quoted] = quoted_vs_billed(s)
            assert (quoted.run_id, quoted.quoted, quoted.billed) == ("r-spot", Decimal("61.701150"),
                                                                     Decimal("64.000000"))
            assert pending_relaunch(re_run) == 2  # generation 1 has its outcome, 2 has none yet
            assert resumed_line(re_run) == "resumed from step 40 (checkpoint of 10:30 UTC), 3 steps lost"
        loss = measured_loss(db_url)  # a plain sqlite3 (or SQLAlchemy Core) query, no ORM
        assert loss is not None and (loss.relaunches, loss.hours) == (1, 0.25)
    finally:
        store.close()
