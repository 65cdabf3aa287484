"""The budget gate and cap end to end: `gpuplan launch` (and --dry-run) on the local provider, `gpuplan watch`."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from gpuplan.calibration.startup import provider_default

from support.clihelp import run_cli

PRICE = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "36"}  # $36/h: the 1-hour estimate below costs $36
# ... plus the local start-up allowance (no finished runs yet: its documented default), billed too.
ESTIMATE = f"${36 * (3600 + provider_default('local').seconds) / 3600:.2f}"


def spec(tmp_path: Path, command: str) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(f"name: budget-e2e\nruntime: process\nproject: lab\ncommand: {json.dumps(command)}\n"
                    "workload:\n  tokens: 3600\n  throughput: 1\n")  # 3600 tokens at 1 token/s: one hour
    return path


def events(kind: str) -> list[dict]:
    from gpuplan.store.db import Store
    from gpuplan.store.models import Event

    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        with store.session() as s:
            return [{"run_id": e.run_id, "message": e.message} for e in s.query(Event).filter_by(kind=kind)]
    finally:
        store.close()


def test_launch_refused_over_budget_and_force_records_an_event(tmp_path: Path) -> None:
    job = spec(tmp_path, "echo hello")
    assert run_cli("budget", "set", "lab-month", "--amount", "20", "--period", "month", "--project", "lab"
                   ).exit_code == 0
    for extra in (["--dry-run"], ["-y"]):
        out = run_cli("launch", str(job), *extra, env=PRICE)
        assert out.exit_code == 2, out.stderr
        error = [line for line in out.stderr.splitlines() if line.startswith("error:")]
        assert len(error) == 1 and error[0].startswith(
            "error: refused: budget 'lab-month' ($20.00 this month) has $20.00 left")
        assert f"estimated at {ESTIMATE}" in error[0] and out.stderr.rstrip().endswith(error[0])
    assert run_cli("runs", "--json").json() == []  # nothing recorded
    dry = run_cli("launch", str(job), "--dry-run", "--force", "--json", env=PRICE)
    assert dry.exit_code == 0 and dry.json()["dry_run"] is True and events("budget_override") == []
    forced = run_cli("launch", str(job), "-y", "--force", "--json", env=PRICE)
    assert forced.exit_code == 0, forced.stderr
    run_id = forced.json()["run_id"]
    [event] = events("budget_override")
    assert event["run_id"] == run_id and "lab-month" in event["message"]
    # A job the budget can hold is not refused.
    assert run_cli("budget", "set", "lab-month", "--amount", "100", "--period", "month", "--project", "lab"
                   ).exit_code == 0
    assert run_cli("launch", str(job), "--dry-run", env=PRICE).exit_code == 0


@pytest.mark.timeout(120)
def test_watch_caps_runs_when_a_budget_is_exhausted(tmp_path: Path) -> None:
    job = spec(tmp_path, "sleep 60")
    assert run_cli("budget", "set", "tiny", "--amount", "0.001", "--period", "total").exit_code == 0
    out = run_cli("launch", str(job), "-y", "--force", "--detach", "--json", env=PRICE)
    assert out.exit_code == 0, out.stderr
    run_id = out.json()["run_id"]
    time.sleep(0.5)  # $36/h = $0.01/s: the $0.001 budget is gone after 0.1 s
    watched = run_cli("watch", "--once", "--json", env=PRICE)
    assert watched.exit_code == 0, watched.stderr
    status = run_cli("status", run_id, "--json").json()
    assert status["state"] == "capped"
    assert "budget 'tiny' exhausted" in status["state_reason"]
    assert events("capped")[0]["run_id"] == run_id

    from gpuplan.store.db import Store
    from gpuplan.store.models import InstanceRow
    store = Store.open(os.environ["GPUPLAN_DB"])
    try:
        with store.session() as s:
            assert all(i.terminated_at is not None for i in s.query(InstanceRow).filter_by(run_id=run_id))
    finally:
        store.close()


@pytest.mark.timeout(120)
def test_a_followed_launch_is_capped_by_its_budget(tmp_path: Path) -> None:
    job = spec(tmp_path, "sleep 60")
    assert run_cli("budget", "set", "tiny", "--amount", "0.001", "--period", "month", "--project", "lab"
                   ).exit_code == 0
    started = time.monotonic()
    out = run_cli("launch", str(job), "-y", "--force", "--json", "--interval", "0.2", env=PRICE)
    assert out.exit_code == 1  # followed to its end, which is not `succeeded`
    summary = out.json()
    assert summary["state"] == "capped" and "budget 'tiny' exhausted" in summary["state_reason"]
    assert time.monotonic() - started < 30  # capped within a budget check or two, not after the 60 s job
