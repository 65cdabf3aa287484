"""`gpuplan report` end to end through the CLI: every format, the PNG, estimate vs actual, bad input."""

from __future__ import annotations

import csv
import io
import os
import struct
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.books import plot

from support import ledger_fixture as lf
from support.clihelp import run_cli


def report(*args: str, db: str | None = None) -> object:
    pre = ["--db", db] if db else []
    return run_cli(*pre, "report", "--now", lf.NOW_TEXT, *args)


def test_json_by_month_exact_on_sqlite_and_postgresql(db_url: str) -> None:
    lf.seed(db_url)
    out = report("--by", "month", "--json", db=db_url)
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    assert {r["period_label"]: Decimal(str(r["cost_usd"])) for r in doc["rows"]} == lf.MONTHS
    assert Decimal(str(doc["total"]["cost_usd"])) == lf.TOTAL
    assert doc["total"]["instances"] == 5 and doc["by"] == ["month"] and doc["now"] == "2026-12-10T12:00:00Z"


def test_csv_is_exact_and_sums_to_the_total() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    out = report("--by", "month", "--by", "project", "--format", "csv")
    assert out.exit_code == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert list(rows[0]) == ["month", "project", "instances", "billed_hours", "cost_usd"]
    assert sum(Decimal(r["cost_usd"]) for r in rows) == lf.TOTAL
    by = {(r["month"], r["project"]): r["cost_usd"] for r in rows}
    assert by[("2026-11", "nlp")] == "196.670555" and by[("2026-12", "vision")] == "229.368000"


def test_window_splits_at_edges() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    out = report("--since", "2026-11-01", "--until", "2026-12-01", "--by", "cloud", "--json")
    doc = out.json()
    assert Decimal(str(doc["total"]["cost_usd"])) == lf.NOVEMBER
    assert {r["key"]: Decimal(str(r["cost_usd"])) for r in doc["rows"]} == {
        "aws": Decimal("196.64"), "gcp": Decimal("0.030555"), "local": Decimal("0")}


@pytest.mark.parametrize("fmt,marker", [("table", "TOTAL"), ("markdown", "| TOTAL | 5 |"), ("html", "<table")])
def test_human_formats_show_rows_and_total(fmt: str, marker: str) -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    out = report("--by", "project", "--format", fmt)
    assert out.exit_code == 0, out.stderr
    assert marker in out.stdout and "$622.68" in out.stdout and "$393.32" in out.stdout and "vision" in out.stdout


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_plot_writes_a_real_png_of_the_right_size(tmp_path: Path) -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    assert run_cli("budget", "set", "team", "--amount", "300", "--period", "month").exit_code == 0
    png = tmp_path / "out" / "spend.png"
    out = report("--by", "project", "--since", "2026-10-20", "--plot", str(png), "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json()["total"]["cost_usd"] == 622.684666  # --plot does not disturb the JSON on stdout
    assert png_size(png) == (plot.PLOT_WIDTH, plot.PLOT_HEIGHT)
    assert png.stat().st_size > 10_000
    total_png = tmp_path / "total.png"
    assert run_cli("budget", "set", "nlp", "--amount", "1000", "--period", "total", "--project", "nlp").exit_code == 0
    assert report("--by", "cloud", "--project", "nlp", "--plot", str(total_png)).exit_code == 0
    assert png_size(total_png) == (plot.PLOT_WIDTH, plot.PLOT_HEIGHT)


def test_plot_budget_lines_are_the_per_bucket_allowance() -> None:
    line = plot.BudgetLine("team", Decimal("3000"), "month")
    assert plot.allowance(line, lf.t(2026, 11, 3), "day") == pytest.approx(100.0)
    assert plot.allowance(line, lf.t(2026, 11, 1), "month") == pytest.approx(3000.0)


def test_accuracy_json_for_calibration() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    out = report("--accuracy", "--json")
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    runs = {r["run_id"]: r for r in doc["runs"]}
    assert set(runs) == {"r-1", "r-4"}  # succeeded runs only: r-2 failed, r-3 is running
    assert runs["r-1"]["actual_hours"] == 4.0 and runs["r-1"]["hours_error"] == pytest.approx(0.25)
    assert runs["r-1"]["actual_cost_usd"] == 393.28
    assert runs["r-1"]["cost_error"] == pytest.approx(393.28 / 314.62 - 1)
    assert runs["r-4"]["hours_error"] == pytest.approx(-0.2) and runs["r-4"]["cost_error"] is None
    s = doc["summary"]
    assert s["runs"] == 2 and s["median_abs_hours_error"] == pytest.approx(0.225)
    assert s["mean_hours_error"] == pytest.approx(0.025) and s["median_hours_ratio"] == pytest.approx(1.025)
    assert doc["by_gpu"]["H100"]["median_hours_ratio"] == pytest.approx(1.25)
    table = report("--accuracy")
    assert table.exit_code == 0 and "+25.0%" in table.stdout and "2 runs" in table.stdout


def test_cloud_takes_a_comma_list_like_plan() -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    comma = report("--by", "cloud", "--cloud", "aws,gcp", "--json")
    repeated = report("--by", "cloud", "--cloud", "aws", "--cloud", "GCP", "--json")
    assert comma.exit_code == 0, comma.stderr
    assert {r["key"] for r in comma.json()["rows"]} == {"aws", "gcp"}
    assert comma.json()["rows"] == repeated.json()["rows"]
    every = report("--json").json()["total"]["cost_usd"]
    assert comma.json()["total"]["cost_usd"] == every  # the fixture's local run costs $0


@pytest.mark.parametrize("args,needle", [
    (["--since", "yesterday"], "--since: not a date"),
    (["--until", "2026-13-01"], "--until: not a date"),
    (["--since", "2026-12-01", "--until", "2026-11-01"], "--since must be before --until"),
    (["--by", "fortnight"], "--by: unknown grouping 'fortnight'"),
    (["--by", "day,month"], "--by: give at most one"),
    (["--by", "gpu,cloud,gpu"], "--by: gpu is given twice"),
    (["--format", "pdf"], "Invalid value for '--format'"),
    (["--cloud", "awz"], "--cloud: unknown cloud 'awz'"),
    (["--accuracy", "--since", "2026-11-01", "--cloud", "aws"], "does not take --since, --cloud"),
    (["--accuracy", "--by", "gpu", "--project", "nlp"], "does not take --by, --project"),
    (["--accuracy", "--until", "2026-12-01"], "does not take --until"),
    (["--accuracy", "--format", "csv"], "does not take --format csv"),
    (["--accuracy", "--plot", "x.png"], "does not take --plot"),
])
def test_bad_input_is_one_line_exit_2(args: list[str], needle: str) -> None:
    out = report(*args)
    assert out.exit_code == 2
    assert needle in out.stderr and len(out.stderr.strip().splitlines()) == 1 and out.stdout == ""
