"""Budgets: set/list/status/rm through the CLI, the launch gate (refuse, --force with an event), the watch cap."""

from __future__ import annotations

import datetime as dt
import os
from decimal import Decimal

import pytest

from gpuplan.books import budgets
from gpuplan.runs import cost as costing
from gpuplan.runs.events import EventKind, payload
from gpuplan.runs.payloads import BudgetOverrideData
from gpuplan.store.db import Store
from gpuplan.store.models import Event, Run

from support import ledger_fixture as lf
from support.clihelp import run_cli


def test_set_list_status_rm() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    out = run_cli("budget", "set", "team", "--amount", "300", "--period", "month", "--json")
    assert out.exit_code == 0 and out.json()["amount_usd"] == 300.0
    assert run_cli("budget", "set", "vision-aws", "--amount", "$1,000", "--period", "week", "--project", "vision",
                   "--cloud", "AWS").exit_code == 0
    listed = run_cli("budget", "list", "--json").json()
    assert [(b["name"], b["period"], b["project"], b["clouds"]) for b in listed] == [
        ("team", "month", None, None), ("vision-aws", "week", "vision", ["aws"])]
    status = run_cli("budget", "status", "--json", "--now", lf.NOW_TEXT).json()
    team = next(s for s in status if s["name"] == "team")
    # December so far: $229.374111 spent; r-3 is estimated at $301.80 and has cost $229.368: $72.432 committed.
    assert team["spent_usd"] == 229.374111 and team["reserved_usd"] == 72.432
    assert team["free_usd"] == pytest.approx(300 - 229.374111 - 72.432)
    assert team["period_start"] == "2026-12-01T00:00:00Z" and team["period_end"] == "2027-01-01T00:00:00Z"
    # 228 h into December: burn = spent / 228 h; forecast adds burn x the 516 h left.
    assert team["burn_usd_per_hour"] == pytest.approx(229.374111 / 228, abs=1e-6)
    assert team["forecast_usd"] == pytest.approx(229.374111 + 229.374111 / 228 * 516, abs=1e-3)
    assert team["running_usd_per_hour"] == 1.006 and team["live_runs"] == 1 and team["exhausted"] is False
    week = next(s for s in status if s["name"] == "vision-aws")
    assert week["period_start"] == "2026-12-07T00:00:00Z" and week["spent_usd"] == pytest.approx(1.006 * 84.0)
    table = run_cli("budget", "status", "--now", lf.NOW_TEXT)
    assert table.exit_code == 0 and "-$1.81" in table.stdout and "$72.43" in table.stdout
    assert run_cli("budget", "rm", "team").exit_code == 0
    assert [b["name"] for b in run_cli("budget", "list", "--json").json()] == ["vision-aws"]
    missing = run_cli("budget", "rm", "team")
    assert missing.exit_code == 2 and "no budget named 'team'" in missing.stderr


@pytest.mark.parametrize("args,needle", [
    (["--amount", "-5", "--period", "month"], "--amount must be a positive"),
    (["--amount", "0", "--period", "month"], "--amount must be a positive"),
    (["--amount", "lots", "--period", "month"], "--amount: not a number"),
    (["--amount", "5", "--period", "year"], "Invalid value for '--period'"),
])
def test_bad_budget_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    out = run_cli("budget", "set", "b", *args)
    assert out.exit_code == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1


def test_launch_gate_refuses_then_force_records_an_event(db_url: str) -> None:
    lf.seed(db_url)
    store = Store.open(db_url)
    try:
        with store.session() as s:
            budgets.set_budget(s, "nlp-month", Decimal("100"), "month", project="nlp")
            budgets.set_budget(s, "gcp-total", Decimal("1000"), "total", clouds=["gcp"])
        with store.session() as s:
            # December: nlp spent $0.006111 of $100. A $99.99 job fits, a $100 one does not.
            assert budgets.check_launch(s, "nlp", "aws", Decimal("99.99"), lf.NOW) == []
            [v] = budgets.check_launch(s, "nlp", "aws", Decimal("100"), lf.NOW)
            assert v.budget == "nlp-month" and v.free_usd == Decimal("99.993889")
            assert budgets.check_launch(s, "vision", "aws", Decimal("5000"), lf.NOW) == []  # no budget covers it
            assert [x.budget for x in budgets.check_launch(s, "nlp", "gcp", Decimal("2000"), lf.NOW)] == [
                "gcp-total", "nlp-month"]
            with pytest.raises(budgets.UserError, match=r"refused: budget 'nlp-month' \(\$100.00 this month\) "
                                                        r"has \$99.99 left"):
                budgets.gate_launch(s, project="nlp", cloud="aws", est_cost_usd=Decimal("150"), now=lf.NOW)
            assert budgets.gate_launch(s, project="nlp", cloud="aws", est_cost_usd=Decimal("150"), now=lf.NOW,
                                       force=True, dry_run=True)
            assert s.query(Event).count() == 0  # a dry run records nothing
            run = Run(name="big", provider="aws", project="nlp", cloud="aws", spec_text="", spec_hash="",
                      est_cost_usd=Decimal("150"))
            s.add(run)
            s.flush()
            # The job's own pending row is not counted as committed against itself.
            overridden = budgets.gate_launch(s, project="nlp", cloud="aws", est_cost_usd=Decimal("150"),
                                             now=lf.NOW, force=True, run_id=run.id)
            assert [v.budget for v in overridden] == ["nlp-month"]
        with store.session() as s:
            [event] = s.query(Event).all()
            assert event.kind == EventKind.BUDGET_OVERRIDE and event.run_id == run.id and "nlp-month" in event.message
            data = payload(event, BudgetOverrideData)
            assert data is not None and [(v.budget, v.est_cost_usd) for v in data.violations] == \
                [("nlp-month", Decimal("150"))]
    finally:
        store.close()


def test_watch_cap_stops_runs_of_an_exhausted_budget(db_url: str) -> None:
    lf.seed(db_url)
    store = Store.open(db_url)
    stopped: list[tuple[str, str]] = []
    try:
        with store.session() as s:
            budgets.set_budget(s, "vision", Decimal("250"), "month", project="vision")

        def stop_run(run: Run, reason: str) -> None:
            # What the watch loop does: terminate the machines and close the instance rows.
            stopped.append((run.id, reason))
            for inst in run.instances:
                inst.terminated_at = inst.terminated_at or now

        now = lf.NOW
        with store.session() as s:
            assert budgets.enforce(s, now, stop_run) == []  # $229.37 of $250: not yet
        now = lf.t(2026, 12, 11, 9)  # 249 h x $1.006 = $250.494 > $250
        with store.session() as s:
            [action] = budgets.enforce(s, now, stop_run)
            assert action.run_id == "r-3" and "budget 'vision' exhausted: spent $250.49 of $250.00" in action.reason
        with store.session() as s:
            run = s.get(Run, "r-3")
            assert run.state == "capped" and run.state_reason == action.reason and run.ended_at == now
            assert costing.total_cost(run.instances, now + dt.timedelta(days=3)) == Decimal("250.494")
            [event] = s.query(Event).filter_by(kind="capped").all()
            assert event.run_id == "r-3"
            assert budgets.enforce(s, now + dt.timedelta(hours=1), stop_run) == []  # nothing live is left
        assert [r for r, _ in stopped] == ["r-3"]
    finally:
        store.close()
