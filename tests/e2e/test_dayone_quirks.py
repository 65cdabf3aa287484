"""Issue 35, item 9: the quirks a newcomer met on day one, through the CLI in child processes."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path

from gpuplan.books.plot import BudgetLine, budget_label

from support import ledger_fixture as lf
from support.clihelp import run_subprocess


def test_declining_the_launch_prompt_exits_3_and_records_nothing(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: declined\nruntime: process\ncommand: echo hi\n")
    out = run_subprocess("launch", str(spec), input="n\n")
    assert out.exit_code == 3, out.stderr
    assert "not started: nothing recorded" in out.stderr and "error" not in out.stderr
    runs = run_subprocess("runs", "--json")
    assert runs.exit_code == 0 and runs.json() == []


def test_report_billed_hours_are_hours_even_under_an_hour() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    out = run_subprocess("report", "--now", lf.NOW_TEXT, "--since", "2026-11-01", "--until", "2026-12-01",
                         "--by", "cloud", "--format", "markdown")
    assert out.exit_code == 0, out.stderr
    gcp = next(line for line in out.stdout.splitlines() if line.startswith("| gcp |"))
    # r-2 on GCP: 60 s + the 40 s of November of its second instance = 100 s = 0.0278 h, shown in hours
    cells = [c.strip() for c in gcp.strip("|").split("|")]
    assert cells[-2] == "0.0278", gcp


def test_plot_legend_shows_the_budget_in_cents() -> None:
    assert budget_label(BudgetLine("tiny", Decimal("0.05"), "month")) == "budget tiny ($0.05/month)"
    assert budget_label(BudgetLine("big", Decimal("5000"), "total")) == "budget big ($5,000 total)"
