"""`gpuplan status` with no run (the queue) and `gpuplan runs` columns and filters, on real local runs."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from support import ledger_fixture as lf
from support.clihelp import run_cli, run_subprocess

SLEEPER = """\
name: sleeper
runtime: process
workload: {params: 1M, tokens: 100000, throughput: 1000}
run: |
  python -c "from gpuplan.jobs.metrics import log_metrics; log_metrics(1, tokens=25000, loss=1.0)"
  sleep 60
"""
FAILING = "name: broken\nruntime: process\nrun: exit 3\n"


def _spec(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_status_without_a_run_lists_live_runs_then_the_last_ended(tmp_path: Path) -> None:
    failed = run_subprocess("launch", str(_spec(tmp_path, FAILING, "broken.yaml")), "-y", "--json")
    assert failed.json()["state"] == "failed"
    launched = run_subprocess("launch", str(_spec(tmp_path, SLEEPER, "sleeper.yaml")), "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    try:
        out = run_cli("status", "--json")
        assert out.exit_code == 0, out.stderr
        doc = out.json()
        assert [r["run_id"] for r in doc["live"]] == [run_id]
        assert [r["run_id"] for r in doc["ended"]] == [failed.json()["run_id"]]
        assert doc["ended"][0]["state_reason"]
        human = run_cli("status")
        lines = human.stdout.splitlines()
        header = lines[0]
        for column in ("RUN", "STATE", "MACHINES", "GPU", "COST", "PROGRESS", "ETA", "REASON"):
            assert column in header
        (live_line,) = [line for line in lines if run_id in line]
        assert "running" in live_line and "1 x local" in live_line
        assert any(failed.json()["run_id"] in line and "failed" in line for line in lines)
        assert run_cli("status", "--ended", "0", "--json").json()["ended"] == []
    finally:
        assert run_cli("stop", run_id).exit_code == 0
    quiet = run_cli("status", "--ended", "0")
    assert quiet.exit_code == 0 and "no live runs" in quiet.stderr


def test_runs_shows_gpu_instance_and_reason_and_filters(db_url: str) -> None:
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    lf.seed(db_url)
    store = Store.open(db_url)
    with store.session() as s:
        s.add(Run(id="r-5", name="big", provider="aws", cloud="aws", state="failed", spec_text="", spec_hash="",
                  nodes=2, instance_type="p5.48xlarge", gpu="H100", gpus_per_node=8.0,
                  state_reason="spot capacity was reclaimed\nby AWS", started_at=lf.t(2026, 11, 2),
                  ended_at=lf.t(2026, 11, 2, 1)))
    store.close()
    out = run_cli("--db", db_url, "runs", "--state", "ended")
    assert out.exit_code == 0, out.stderr
    header = out.stdout.splitlines()[0]
    for column in ("MACHINES", "GPU", "REASON"):
        assert column in header
    (line,) = [line for line in out.stdout.splitlines() if " r-5 " in line]
    assert "2 x p5.48xlarge" in line and "8 x H100" in line and "spot capacity was reclaimed by AWS" in line
    assert " r-3 " not in out.stdout  # r-3 is running
    by_project = run_cli("--db", db_url, "runs", "--project", "nlp", "--json").json()
    assert sorted(r["run_id"] for r in by_project) == ["r-1", "r-2"]
    two = run_cli("--db", db_url, "runs", "--state", "failed,succeeded", "--json").json()
    assert sorted(r["run_id"] for r in two) == ["r-1", "r-2", "r-4", "r-5"]
    future = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=1)).date().isoformat()
    assert run_cli("--db", db_url, "runs", "--since", future, "--json").json() == []
    recent = run_cli("--db", db_url, "runs", "--since", "1h", "--json").json()
    assert len(recent) == 5  # the fixture's rows are created now


def test_runs_bad_filters_are_one_line(tmp_path: Path) -> None:
    for args, needle in ((("--state", "sucess"), "unknown run state 'sucess'"),
                         (("--since", "yesterday"), "--since: not a date or an age"),
                         (("--since", "2026-13-01"), "--since: not a date")):
        out = run_cli("runs", *args)
        assert out.exit_code == 2 and needle in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert os.environ["GPUPLAN_DB"]
