"""`gpuplan schedule` and `gpuplan scheduler` end to end with the local provider, as a user runs them."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
import time
from pathlib import Path

from gpuplan.cronspec import next_fire

from support.clihelp import run_cli, run_subprocess

JOB = """\
name: nightly-hello
runtime: process
command: echo hello from the schedule
workload:
  params: 125M
  tokens: 36M
  throughput: 10000
schedule:
  cron: "0 2 * * *"
"""


def _spec(tmp_path: Path, text: str = JOB) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def _next_slot() -> str:
    slot = next_fire("0 2 * * *", "UTC", dt.datetime.now(dt.timezone.utc))
    return slot.isoformat().replace("+00:00", "Z")


def _wait_finished(run_id: str, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status = run_cli("status", run_id, "--json")
        assert status.exit_code == 0, status.stderr
        data = status.json()
        if data["state"] not in ("pending", "provisioning", "running") or time.monotonic() > deadline:
            return data
        time.sleep(0.3)


def test_add_list_show_pause_resume_rm(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    added = run_cli("schedule", "add", str(spec), "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--json")
    assert added.exit_code == 0, added.stderr
    row = added.json()
    assert row["name"] == "nightly-hello" and row["tz"] == "Europe/Berlin" and row["next_fire_at"].endswith("Z")
    # The spec is copied: editing the file later does not change the schedule.
    stored_hash = row["spec_hash"]
    spec.write_text(JOB.replace("hello", "changed"))
    shown = run_cli("schedule", "show", "nightly-hello", "--json").json()
    assert shown["spec_hash"] == stored_hash and "hello from the schedule" in shown["spec_text"]
    assert run_cli("schedule", "list", "--json").json()[0]["name"] == "nightly-hello"
    assert run_cli("schedule", "pause", "nightly-hello", "--json").json()["paused"] is True
    assert run_cli("schedule", "list", "--json").json()[0]["next_fire_at"] is None
    assert run_cli("schedule", "resume", "nightly-hello", "--json").json()["paused"] is False
    updated = run_cli("schedule", "update", "nightly-hello", str(spec), "--json").json()
    assert updated["spec_hash"] != stored_hash
    assert run_cli("schedule", "rm", "nightly-hello", "-y").exit_code == 0
    assert run_cli("schedule", "list", "--json").json() == []


def test_bad_cron_tz_and_spec_are_one_line_exit_2(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    for args in (["--cron", "61 * * * *"], ["--cron", "0 2 * * *", "--tz", "Mars/Base"]):
        result = run_cli("schedule", "add", str(spec), *args)
        assert result.exit_code == 2, result.stderr
        assert result.stderr.startswith("error: ") and len(result.stderr.strip().splitlines()) == 1
    bad = _spec(tmp_path, "name: x\ncommand: true\nmax_hour: 3\n")
    result = run_cli("schedule", "add", str(bad), "--cron", "0 2 * * *")
    assert result.exit_code == 2 and ":3:" in result.stderr
    assert run_cli("schedule", "show", "nope").exit_code == 2
    assert run_cli("scheduler", "tick", "--at", "tomorrow").exit_code == 2


def test_a_cron_that_never_fires_is_refused_and_records_nothing(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    for cron in ("0 0 30 2 *", "0 0 31 4,6,9,11 *"):  # February 30th; the 31st of 30-day months
        result = run_cli("schedule", "add", str(spec), "--cron", cron)
        assert result.exit_code == 2, result.stderr
        assert result.stderr == f"error: cron expression {cron!r} never fires (no such date)\n"
    assert run_cli("schedule", "list", "--json").json() == []
    assert run_cli("schedule", "add", str(spec), "--cron", "0 0 29 2 *").exit_code == 0  # leap years: fires
    result = run_cli("schedule", "update", "nightly-hello", "--cron", "0 0 30 2 *")
    assert result.exit_code == 2 and "never fires" in result.stderr
    assert run_cli("schedule", "show", "nightly-hello", "--json").json()["cron"] == "0 0 29 2 *"


def test_tick_launches_once_with_the_local_provider(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert run_cli("schedule", "add", str(spec), "--cron", "0 2 * * *").exit_code == 0
    slot = _next_slot()
    first = run_cli("scheduler", "tick", "--at", slot, "--json")
    assert first.exit_code == 0, first.stderr
    fires = first.json()["fires"]
    assert [f["outcome"] for f in fires] == ["launched"], fires
    run_id = fires[0]["run_id"]
    assert run_cli("scheduler", "tick", "--at", slot, "--json").json()["fires"] == []
    finished = _wait_finished(run_id)
    assert finished["state"] == "succeeded", finished
    logs = run_cli("logs", run_id)
    assert "hello from the schedule" in logs.stdout
    shown = run_cli("schedule", "show", "nightly-hello", "--json").json()
    assert [(f["outcome"], f["run_id"]) for f in shown["fires"]] == [("launched", run_id)]


def test_add_takes_cron_and_tz_from_the_spec_and_its_limits_apply_to_the_fire(tmp_path: Path) -> None:
    spec = _spec(tmp_path, JOB.replace('  cron: "0 2 * * *"\n', '  cron: "0 2 * * *"\n  tz: Europe/Berlin\n')
                 + "limits:\n  budget_usd: 5\n  max_hours: 2\n")
    added = run_cli("schedule", "add", str(spec), "--json")
    assert added.exit_code == 0, added.stderr
    assert (added.json()["cron"], added.json()["tz"]) == ("0 2 * * *", "Europe/Berlin")
    # A flag still wins; the spec's tz stays the zone the cron is read in unless --tz says otherwise.
    other = run_cli("schedule", "add", str(spec), "--name", "other", "--cron", "30 1 * * *", "--json").json()
    assert (other["cron"], other["tz"]) == ("30 1 * * *", "Europe/Berlin")
    slot = next_fire("0 2 * * *", "Europe/Berlin", dt.datetime.now(dt.timezone.utc))
    fires = run_cli("scheduler", "tick", "--at", slot.isoformat().replace("+00:00", "Z"), "--json").json()["fires"]
    [fire] = [f for f in fires if f["schedule"] == "nightly-hello"]
    assert fire["outcome"] == "launched", fire
    status = run_cli("status", fire["run_id"], "--json").json()
    assert float(status["budget_usd"]) == 5 and float(status["max_hours"]) == 2
    _wait_finished(fire["run_id"])


def test_a_fire_takes_the_config_files_defaults_where_the_spec_is_silent(tmp_path: Path, monkeypatch) -> None:
    """`[defaults] budget` and `project` cap and label a scheduled run as they do a `gpuplan launch`."""
    config = tmp_path / "config.toml"
    config.write_text('[defaults]\nbudget = 7\nproject = "nightly-team"\n')
    monkeypatch.setenv("GPUPLAN_CONFIG", str(config))
    assert run_cli("schedule", "add", str(_spec(tmp_path)), "--cron", "0 2 * * *").exit_code == 0
    fires = run_cli("scheduler", "tick", "--at", _next_slot(), "--json").json()["fires"]
    assert [f["outcome"] for f in fires] == ["launched"], fires
    status = run_cli("status", fires[0]["run_id"], "--json").json()
    assert float(status["budget_usd"]) == 7 and status["project"] == "nightly-team"
    _wait_finished(fires[0]["run_id"])


def test_update_with_a_spec_whose_cron_changed_says_the_cron_is_kept(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert run_cli("schedule", "add", str(spec)).exit_code == 0
    spec.write_text(JOB.replace('cron: "0 2 * * *"', 'cron: "0 5 * * *"'))
    updated = run_cli("schedule", "update", "nightly-hello", str(spec), "--json")
    assert updated.exit_code == 0 and updated.json()["cron"] == "0 2 * * *"
    assert "the spec's schedule.cron '0 5 * * *' is not applied: nightly-hello keeps '0 2 * * *' (pass --cron" \
        in updated.stderr
    again = run_cli("schedule", "update", "nightly-hello", str(spec), "--cron", "0 5 * * *", "--json")
    assert again.json()["cron"] == "0 5 * * *" and "not applied" not in again.stderr


def test_add_without_any_cron_or_with_several_clouds_is_refused(tmp_path: Path) -> None:
    no_cron = _spec(tmp_path, JOB.replace('schedule:\n  cron: "0 2 * * *"\n', ""))
    result = run_cli("schedule", "add", str(no_cron))
    assert result.exit_code == 2 and result.stderr.startswith('error: say when: --cron "0 2 * * *", or schedule.cron')
    several = _spec(tmp_path, JOB + "resources:\n  clouds: [aws, gcp]\n")
    result = run_cli("schedule", "add", str(several))
    assert result.exit_code == 2 and "runs on one provider; resources.clouds lists aws, gcp" in result.stderr
    assert run_cli("schedule", "list", "--json").json() == []


def test_budget_gate_skip_is_recorded_and_shown(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("GPUPLAN_LOCAL_PRICE_PER_HOUR", "36")  # 36M tokens at 10k tok/s = 1 h = $36
    spec = _spec(tmp_path)
    assert run_cli("budget", "set", "lab", "--amount", "5", "--period", "month").exit_code == 0
    assert run_cli("schedule", "add", str(spec), "--cron", "0 2 * * *").exit_code == 0
    result = run_cli("scheduler", "tick", "--at", _next_slot(), "--json")
    fire = result.json()["fires"][0]
    assert fire["outcome"] == "skipped" and "budget 'lab'" in fire["reason"] and fire["run_id"] is None
    shown = run_cli("schedule", "show", "nightly-hello")
    assert "skipped" in shown.stdout and "lab" in shown.stdout
    assert run_cli("runs", "--json").json() == []


def test_two_scheduler_processes_fire_exactly_once(tmp_path: Path) -> None:
    spec = _spec(tmp_path)
    assert run_subprocess("schedule", "add", str(spec), "--cron", "0 2 * * *").exit_code == 0
    slot = _next_slot()
    procs = [subprocess.Popen([sys.executable, "-m", "gpuplan", "scheduler", "tick", "--at", slot, "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert all(proc.returncode == 0 for proc in procs), [err for _out, err in outputs]
    launched = [f for out, _err in outputs for f in json.loads(out)["fires"] if f["outcome"] == "launched"]
    assert len(launched) == 1
    runs = run_subprocess("runs", "--json").json()
    assert [r["run_id"] for r in runs] == [launched[0]["run_id"]]


def test_scheduler_run_once_catches_up_once_after_downtime(tmp_path: Path) -> None:
    """A scheduler down for three days fires the missed daily slot once, not three times, then exits 0."""
    from gpuplan.store.db import Store
    from gpuplan.store.models import Schedule

    spec = _spec(tmp_path)
    assert run_subprocess("schedule", "add", str(spec), "--cron", "0 2 * * *").exit_code == 0
    store = Store.open()
    with store.session() as session:
        schedule = session.query(Schedule).one()
        schedule.created_at -= dt.timedelta(days=3)  # added three days ago; the scheduler was down since
    store.close()
    result = run_subprocess("scheduler", "run", "--once")
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count(": launched\n") == 1, result.stderr
    again = run_subprocess("scheduler", "run", "--once")
    assert again.exit_code == 0 and "launched" not in again.stderr
    assert len(run_subprocess("runs", "--json").json()) == 1
