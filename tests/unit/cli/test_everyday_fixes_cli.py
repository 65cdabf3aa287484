"""The small everyday fixes of issue 25, each through the CLI: cron nicknames, two --by keys, plan's answer on
stdout, a closed pipe, refresh without credentials, accuracy's run count, sub-minute durations, years."""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import subprocess
import sys
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.cli.display import dollars, hours_text
from gpuplan.cronspec import validate_cron

from support import ledger_fixture as lf
from support.clihelp import run_cli

JOB = """\
name: nightly
runtime: process
command: echo hi
workload:
  params: 125M
  tokens: 36M
  throughput: 10000
"""


@pytest.mark.parametrize("nickname,expr", [
    ("@daily", "0 0 * * *"), ("@midnight", "0 0 * * *"), ("@hourly", "0 * * * *"), ("@weekly", "0 0 * * 0"),
    ("@monthly", "0 0 1 * *"), ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"), ("@DAILY", "0 0 * * *"),
])
def test_cron_nicknames_expand_to_their_five_fields(nickname: str, expr: str) -> None:
    assert validate_cron(nickname) == expr


def test_schedule_add_takes_daily_from_the_flag_and_hourly_from_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB)
    added = run_cli("schedule", "add", str(spec), "--cron", "@daily", "--json")
    assert added.exit_code == 0, added.stderr
    assert added.json()["cron"] == "0 0 * * *" and added.json()["next_fire_at"].endswith("T00:00:00Z")
    spec.write_text(JOB.replace("nightly", "hourly") + "schedule:\n  cron: '@hourly'\n")
    from_spec = run_cli("schedule", "add", str(spec), "--json")
    assert from_spec.exit_code == 0, from_spec.stderr
    assert from_spec.json()["cron"] == "0 * * * *"
    bad = run_cli("schedule", "add", str(spec), "--cron", "@fortnightly", "--name", "x")
    assert bad.exit_code == 2 and "unknown cron nickname '@fortnightly'" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def test_report_by_gpu_and_cloud_groups_by_both(db_url: str) -> None:
    lf.seed(db_url)
    out = run_cli("--db", db_url, "report", "--now", lf.NOW_TEXT, "--by", "gpu", "--by", "cloud", "--json")
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    assert doc["by"] == ["gpu", "cloud"]
    by = {(r["keys"]["gpu"], r["keys"]["cloud"]): Decimal(str(r["cost_usd"])) for r in doc["rows"]}
    assert set(by) == {("H100", "aws"), ("A100", "gcp"), ("A10G", "aws"), ("(none)", "local")}
    assert by[("H100", "aws")] == Decimal("393.28") and sum(by.values()) == lf.TOTAL
    assert {r["key"] for r in doc["rows"]} >= {"H100 / aws", "(none) / local"}
    table = run_cli("--db", db_url, "report", "--now", lf.NOW_TEXT, "--by", "month,gpu,cloud", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert list(rows[0]) == ["month", "gpu", "cloud", "instances", "billed_hours", "cost_usd"]
    assert sum(Decimal(r["cost_usd"]) for r in rows) == lf.TOTAL
    twice = run_cli("report", "--by", "gpu,gpu")
    assert twice.exit_code == 2 and "--by: gpu is given twice" in twice.stderr


def test_report_accuracy_counts_only_runs_with_an_estimate() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        for n in range(5):  # succeeded runs recorded without any estimate
            s.add(Run(id=f"r-x{n}", name="noest", provider="local", cloud="local", state="succeeded",
                      spec_text="", spec_hash="", started_at=lf.t(2026, 11, 21), ended_at=lf.t(2026, 11, 21, 1)))
    store.close()
    out = run_cli("report", "--now", lf.NOW_TEXT, "--accuracy")
    assert out.exit_code == 0, out.stderr
    assert "2 runs with an estimate (5 more without one)" in out.stdout and "7 runs" not in out.stdout
    doc = run_cli("report", "--now", lf.NOW_TEXT, "--accuracy", "--json").json()
    assert doc["summary"]["runs"] == 2 and doc["summary"]["without_estimate"] == 5 and len(doc["runs"]) == 7


def test_plan_prints_its_answer_on_stdout_and_sub_minute_times_in_minutes() -> None:
    out = run_cli("plan", "--model", "gpt2", "--tokens", "1M", "--limit", "3")
    assert out.exit_code == 0, out.stderr
    assert "cheapest: 1 x " in out.stdout and "cheapest" not in out.stderr
    cheapest = next(line for line in out.stdout.splitlines() if line.startswith("cheapest: "))
    assert " min, $" in cheapest and "0.0 h" not in out.stdout  # minutes and cents, not "0.0 h, $0"


def test_plan_warns_when_the_option_it_names_takes_years() -> None:
    out = run_cli("plan", "--model", "llama-3-70b", "--tokens", "15T", "--max-nodes", "1", "--limit", "2")
    assert out.exit_code == 0, out.stderr
    warning = [line for line in out.stderr.splitlines() if line.startswith("warning: the cheapest")]
    assert warning and "years) or more of wall time" in warning[0] and "--deadline" in warning[0]
    short = run_cli("plan", "--model", "gpt2", "--tokens", "1M", "--limit", "2")
    assert "years" not in short.stderr


def test_estimate_shows_a_seconds_long_job_in_seconds() -> None:
    out = run_cli("estimate", "--model", "gpt2", "--tokens", "1M", "--gpu", "H100")
    assert out.exit_code == 0, out.stderr
    time_line = next(line for line in out.stdout.splitlines() if line.strip().startswith("time"))
    assert " s wall" in time_line and "0.0 min" not in time_line


@pytest.mark.parametrize("hours,text", [
    (None, "-"), (0.0, "0 s"), (0.0001, "<1 s"), (10 / 3600, "10 s"), (0.05, "3.0 min"), (0.5, "30 min"),
    (5.5, "5.5 h"), (300.0, "300 h (12.5 days)"), (3 * 8760.0, "26,280 h (3.0 years)"),
])
def test_hours_text(hours: float | None, text: str) -> None:
    assert hours_text(hours) == text


def test_dollars_keeps_cents_for_small_sums() -> None:
    assert (dollars(0.001), dollars(0.03), dollars(99.5), dollars(1234.4)) == ("$0.0010", "$0.03", "$99.50", "$1,234")
    assert dollars(0.00421) == "$0.0042" and dollars(0.0000031) == "$3.1e-06"


def _closed_reader(*args: str) -> subprocess.CompletedProcess[bytes]:
    """Run gpuplan with a stdout pipe whose reader has already gone (`| head -0` that exits at once)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run([sys.executable, "-m", "gpuplan", *args], stdout=write_end, stderr=subprocess.PIPE,
                              timeout=120, check=False)
    finally:
        os.close(write_end)


@pytest.mark.parametrize("args", [
    ("estimate", "--model", "gpt2", "--tokens", "1M", "--gpu", "H100"),
    ("estimate", "--model", "gpt2", "--tokens", "1M", "--gpu", "H100", "--json"),
    ("runs",),
    ("--help",),
])
def test_a_closed_pipe_ends_quietly_by_sigpipe(args: tuple[str, ...]) -> None:
    proc = _closed_reader(*args)
    assert proc.returncode == -13, proc.stderr  # killed by SIGPIPE, as `seq 1000000 | head -1` kills seq
    assert proc.stderr == b""


def test_head_one_sees_its_line_and_the_shell_no_error() -> None:
    shell = (f"set -o pipefail; {sys.executable} -m gpuplan estimate --model gpt2 --tokens 1M --gpu H100 "
             "| head -1; echo status=$?")
    proc = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, timeout=120, check=False)
    first, status = proc.stdout.splitlines()
    assert first.startswith("training 124M parameters") and status in ("status=0", "status=141")
    assert proc.stderr == ""


@pytest.mark.parametrize("cloud,env", [
    ("aws", {"AWS_ACCESS_KEY_ID": None, "AWS_SECRET_ACCESS_KEY": None, "AWS_EC2_METADATA_DISABLED": "true"}),
    ("gcp", {"GOOGLE_APPLICATION_CREDENTIALS": "/nonexistent/key.json", "CLOUDSDK_CONFIG": "/nonexistent"}),
])
def test_catalog_refresh_without_credentials_is_exit_2_and_one_error_line(
        cloud: str, env: dict[str, str | None]) -> None:
    child_env = {k: v for k, v in os.environ.items() if env.get(k, "") is not None}
    child_env.update({k: v for k, v in env.items() if v is not None})
    proc = subprocess.run([sys.executable, "-m", "gpuplan", "catalog", "refresh", "--cloud", cloud, "--source", "api"],
                          capture_output=True, text=True, env=child_env, timeout=120, check=False)
    assert proc.returncode == 2, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and errors[0].startswith(f"error: no {cloud} credentials (")
    assert errors[0].endswith("the previous prices are kept") and "Traceback" not in proc.stderr


def test_report_tables_show_sub_hour_billing_in_hours_and_csv_keeps_the_number() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    table = run_cli("report", "--now", lf.NOW_TEXT, "--by", "run")
    (line,) = [row for row in table.stdout.splitlines() if " r-2 " in row]
    # r-2 billed 2 x 60 s minimum: in the billed_hours column that is 0.0333 h (issue 35: not "2.0 min", and
    # not "0.03" either, which would hide the minimum)
    assert "0.0333" in line and "min" not in line
    rows = list(csv.DictReader(io.StringIO(run_cli("report", "--now", lf.NOW_TEXT, "--by", "run",
                                                   "--format", "csv").stdout)))
    assert {r["run"]: r["billed_hours"] for r in rows}["r-2"] == "0.033333"


def test_report_accuracy_reads_a_short_run_in_seconds_and_cents() -> None:
    """A 20 s run estimated at 18 s must not read `0.00` hours (its machines are not seeded: actual $0)."""
    from gpuplan.store.db import Store
    from gpuplan.store.models import Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        s.add(Run(id="r-short", name="short", provider="local", cloud="local", state="succeeded", spec_text="",
                  spec_hash="", started_at=lf.t(2026, 11, 21), ended_at=lf.t(2026, 11, 21) + dt.timedelta(seconds=20),
                  est_hours=18 / 3600, est_cost_usd=Decimal("0.0125")))
    store.close()
    out = run_cli("report", "--now", lf.NOW_TEXT, "--accuracy")
    assert out.exit_code == 0, out.stderr
    [row] = [line for line in out.stdout.splitlines() if "r-short" in line]
    assert "18 s" in row and "20 s" in row and "+11.1%" in row and "$0.01" in row and " 0.00 " not in row
