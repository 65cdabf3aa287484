"""`gpuplan ui` over HTTP: every page and JSON endpoint against the CLI's own answers on the same database.

The books are made by real local launches (support.uihelp); the dashboard and the CLI are separate processes
reading the same SQLite file (and, once, the same PostgreSQL database). Each JSON endpoint must equal the CLI's
`--json` document, each page must show the same figures, and every name from the database must stay text.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from support.uihelp import IMG_NAME, LOG_SCRIPT, SCRIPT_NAME, Books, Dashboard, book_env, dashboard, make_books

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def books(ui_books: Books) -> Books:
    return ui_books


@pytest.fixture(scope="module")
def ui(books: Books) -> Iterator[Dashboard]:
    with dashboard(books) as running:
        yield running


def _page(ui: Dashboard, path: str) -> str:
    status, headers, body = ui.get(path)
    assert status == 200, (path, status, body)
    assert headers["content-type"].startswith("text/html")
    return body


def _esc(text: str) -> str:
    """The text as the templates escape it (Jinja2's autoescape: markupsafe)."""
    return str(escape(text))


def _no_raw_markup(body: str) -> None:
    """A name from the database is shown as text: escaped, never as a tag."""
    for raw in (SCRIPT_NAME, IMG_NAME, LOG_SCRIPT, "<b>bold</b>"):
        assert raw not in body
    assert "<script" not in body.lower()
    assert "<img" not in body.lower()


@pytest.mark.parametrize("query, flags", [
    ("", ()),
    ("?state=failed", ("--state", "failed")),
    ("?state=ended&project=alpha", ("--state", "ended", "--project", "alpha")),
    ("?provider=local&limit=2", ("--provider", "local", "--limit", "2")),
    ("?provider=aws", ("--provider", "aws")),
])
def test_the_runs_endpoint_is_gpuplan_runs_json(books: Books, ui: Dashboard, query: str,
                                                 flags: tuple[str, ...]) -> None:
    assert ui.json(f"/api/runs{query}") == books.cli_json("runs", *flags)


def test_the_runs_page_lists_the_cli_runs_with_their_cost_and_names_as_text(books: Books, ui: Dashboard) -> None:
    runs = books.cli_json("runs")
    body = _page(ui, "/runs")
    assert len(runs) == 3
    for run in runs:
        assert f'href="/runs/{run["run_id"]}"' in body
        assert _esc(run["name"]) in body
    assert f"${runs[0]['cost_usd']:,.4f}" in body  # cost so far, rendered as the CLI renders it
    assert '<meta http-equiv="refresh"' in body  # auto refresh is on by default
    _no_raw_markup(body)
    filtered = _page(ui, "/runs?state=failed&refresh=off")
    assert "plain-failing" in filtered and _esc(SCRIPT_NAME) not in filtered
    assert '<meta http-equiv="refresh"' not in filtered


def test_a_run_endpoint_is_gpuplan_status_json_and_its_page_shows_events_log_curves_and_machines(
        books: Books, ui: Dashboard) -> None:
    run = next(r for r in books.cli_json("runs") if r["name"] == SCRIPT_NAME)
    status = books.cli_json("status", run["run_id"])
    found = ui.json(f"/api/runs/{run['run_id']}")
    assert {k: found[k] for k in status} == status
    assert [m["cost_usd"] for m in found["machines"]] == [run["cost_usd"]]
    assert LOG_SCRIPT in found["log_tail"]
    assert found["labels"] == {"team": "ml", "kind": "ui-test"}
    assert [p["step"] for p in found["metrics"]] == [1, 2, 3, 4]
    assert found["metrics"][-1]["loss"] == 0.5
    body = _page(ui, f"/runs/{run['run_id']}")
    _no_raw_markup(body)
    assert _esc(LOG_SCRIPT) in body and _esc(SCRIPT_NAME) in body
    for event in status["events"]:
        assert f"<td>{event['kind']}</td>" in body
    assert body.count('class="curve"') == 2  # loss and throughput
    assert run["run_id"] + "/node-0" in body  # the machine and its bill
    assert "Stop this run" not in body  # read-only, and the run has ended
    assert '<span class="label">team=ml</span>' in body


def test_the_books_are_the_reports_and_budget_status_of_the_cli(books: Books, ui: Dashboard) -> None:
    found = ui.json("/api/books")
    for grouping in ("month", "project", "gpu", "cloud"):
        cli = books.cli_json("report", "--by", grouping)
        assert ui.json(f"/api/report?by={grouping}") == cli
        assert found["spend"][grouping] == cli
    statuses = books.cli_json("budget", "status")
    assert ui.json("/api/budgets") == statuses
    assert [b["status"] for b in found["budgets"]] == statuses
    for budget in found["budgets"]:  # the runs behind a budget add up to its spent
        assert round(sum(r["spent_usd"] for r in budget["runs"]), 6) == budget["status"]["spent_usd"]
    alpha = next(b for b in found["budgets"] if b["status"]["name"] == "alpha-only")
    alpha_runs = {r["run_id"] for r in books.cli_json("runs", "--project", "alpha")}
    assert {r["run_id"] for r in alpha["runs"]} == alpha_runs
    body = _page(ui, "/books")
    total = books.cli_json("report")["total"]["cost_usd"]
    assert f'id="total">${total:,.2f}<' in body
    for status in statuses:
        assert _esc(status["name"]) in body
        assert f'class="num spent-usd">${status["spent_usd"]:,.2f}<' in body
    assert "EXHAUSTED".lower() in body.lower()  # alpha-only's $0.001 is spent
    assert body.count('class="chart bars"') == 4


def test_accuracy_is_report_accuracy_and_its_scatter_has_a_dot_per_estimated_run(books: Books, ui: Dashboard) -> None:
    cli = books.cli_json("report", "--accuracy")
    assert ui.json("/api/accuracy") == cli
    body = _page(ui, "/accuracy")
    _no_raw_markup(body)
    estimated = [r for r in cli["runs"] if r["est_hours"]]
    assert len(estimated) == 2  # the two that succeeded
    assert body.count('<circle class="point"') == len(estimated)
    assert _esc(IMG_NAME) in body


def test_the_plan_explorer_is_gpuplan_plan_json(books: Books, ui: Dashboard) -> None:
    args = ("--model", "llama-2-7b", "--tokens", "140B", "--deadline", "72h")
    cli = books.cli_json("plan", *args, "--limit", "0")
    assert cli, "the shipped catalog has options for this job"
    assert ui.json("/api/plan?model=llama-2-7b&tokens=140B&deadline=72h") == cli
    body = _page(ui, "/plan?model=llama-2-7b&tokens=140B&deadline=72h")
    front = [o for o in cli if "pareto" in o["tags"]]
    assert body.count('<circle class="pareto"') == sum(1 for o in front)
    assert 'class="front"' in body
    status, _, bad = ui.get("/plan?model=llama-2-7b&tokens=140B&deadline=soon")
    assert status == 400
    cli_error = books.cli("plan", *args[:4], "--deadline", "soon")
    assert cli_error.returncode == 2
    message = cli_error.stderr.strip().removeprefix("error: ").split(" (see")[0]
    assert _esc(message.split(": ", 1)[-1]) in bad


def test_an_unknown_run_is_a_404_page_and_a_json_error(ui: Dashboard) -> None:
    status, _, body = ui.get("/runs/r-doesnotexist")
    assert status == 404 and "no run" in body
    status, headers, body = ui.get("/api/runs/r-doesnotexist")
    assert status == 404 and headers["content-type"] == "application/json" and "no run" in body
    status, _, body = ui.get("/api/runs?state=sucess")
    assert status == 400 and "unknown run state" in body


def test_every_page_carries_a_strict_content_security_policy(ui: Dashboard) -> None:
    for path in ("/runs", "/books", "/accuracy", "/plan", "/api/runs", "/static/style.css"):
        status, headers, _ = ui.get(path)
        assert status == 200, path
        csp = headers["content-security-policy"]
        assert "script-src 'none'" in csp and "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
        assert headers["x-content-type-options"] == "nosniff"


@pytest.mark.parametrize("host", ["evil.example:80", "attacker.test", "127.0.0.1", "localhost:1"])
def test_a_foreign_host_header_is_refused(ui: Dashboard, host: str) -> None:
    """DNS rebinding: a page on attacker.test whose name now resolves to 127.0.0.1 sends Host: attacker.test."""
    status, _, body = ui.get("/api/runs", {"Host": host})
    assert status == 421 and "Host" in body


def test_loopback_names_with_the_port_are_accepted(ui: Dashboard) -> None:
    port = ui.host.rsplit(":", 1)[1]
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
        assert ui.get("/api/runs", {"Host": host})[0] == 200


def test_a_foreign_origin_is_refused_and_a_read_only_dashboard_stops_nothing(books: Books, ui: Dashboard) -> None:
    status, _, _ = ui.get("/api/runs", {"Origin": "http://evil.example"})
    assert status == 403
    assert ui.get("/api/runs", {"Origin": f"http://{ui.host}"})[0] == 200
    run_id = books.cli_json("runs")[0]["run_id"]
    status, _, body = ui.get(f"/runs/{run_id}/stop", method="POST", body="confirm=yes",
                             headers={"Origin": f"http://{ui.host}"})
    assert status == 403 and "read-only" in body
    assert ui.get(f"/runs/{run_id}/stop")[0] == 403
    assert ui.get("/launch?spec=examples/cpu-hello.yaml")[0] == 403
    assert "launch a job spec" not in _page(ui, "/runs")


LIVE_JOB = """\
name: sleeper
runtime: process
workload: {params: 1M, tokens: 100000, throughput: 2000}
run: |
  python -c "from gpuplan.jobs.metrics import log_metrics; log_metrics(1, tokens=1000)"
  sleep 1
  python -c "from gpuplan.jobs.metrics import log_metrics; log_metrics(2, tokens=2000)"
  sleep 120
"""


def _measured(ui: Dashboard, run_id: str) -> dict[str, Any]:
    """The live run in /api/runs once its metrics give a progress (the job writes them within ~2 s)."""
    deadline = time.monotonic() + 60
    while True:
        row = next(r for r in ui.json("/api/runs?state=live") if r["run_id"] == run_id)
        if (row["progress"] is not None and row["progress"] >= 0.02) or time.monotonic() > deadline:
            return row
        time.sleep(0.5)


def test_actions_stop_and_launch_only_after_a_confirmation_with_the_csrf_token(tmp_path: Path) -> None:
    books = Books(book_env(tmp_path / "home", f"sqlite:///{tmp_path / 'gpuplan.db'}"))  # its own: a run ends here
    spec = tmp_path / "sleeper.yaml"
    spec.write_text(LIVE_JOB)
    launched = books.cli("launch", str(spec), "-y", "--detach", "--json")
    assert launched.returncode == 0, launched.stderr
    run_id = re.search(r'"run_id": "([^"]+)"', launched.stdout).group(1)  # type: ignore[union-attr]
    try:
        with dashboard(books, "--allow-actions") as ui:
            live = _measured(ui, run_id)  # the live run's state, progress and ETA, asked of its provider now
            assert live["state"] == "running" and live["progress"] == 0.02 and live["eta_seconds"] > 0
            assert live["projected_cost_usd"] > live["cost_usd"]
            assert [r["progress"] for r in books.cli_json("runs", "--state", "live")] == [0.02]
            runs_page = _page(ui, "/runs?state=live")
            assert '<td class="num">2%</td>' in runs_page
            page = _page(ui, f"/runs/{run_id}")
            assert f'href="/runs/{run_id}/stop"' in page
            confirm = _page(ui, f"/runs/{run_id}/stop")
            token = re.search(r'name="csrf" value="([0-9a-f]+)"', confirm).group(1)  # type: ignore[union-attr]
            same = {"Origin": f"http://{ui.host}"}
            refused: list[tuple[dict[str, str], str]] = [
                (same, "confirm=yes"),  # no token
                (same, "confirm=yes&csrf=" + "0" * 64),  # a wrong one
                ({"Origin": "http://evil.example"}, f"confirm=yes&csrf={token}"),  # a cross-site form post
                ({"Sec-Fetch-Site": "cross-site"}, f"confirm=yes&csrf={token}"),
            ]
            for headers, body in refused:
                assert ui.get(f"/runs/{run_id}/stop", headers, "POST", body)[0] == 403, (headers, body)
            assert books.cli_json("status", run_id)["state"] == "running"
            status, headers, _ = ui.get(f"/runs/{run_id}/stop", same, "POST", f"confirm=yes&csrf={token}")
            assert status == 303 and headers["location"] == f"/runs/{run_id}"
            assert books.cli_json("status", run_id)["state"] == "stopped"
            quick = tmp_path / "quick.yaml"
            quick.write_text("name: quick\nruntime: process\nrun: echo launched from the dashboard\n")
            check = _page(ui, f"/launch?spec={quick}")
            assert "--dry-run" in check and 'id="confirm-launch"' in check  # what launch would do, first
            assert ui.get(f"/launch?spec={tmp_path / 'absent.yaml'}")[0] == 400
            assert ui.get("/launch", same, "POST", f"confirm=yes&spec={quick}")[0] == 403  # no CSRF token
            status, headers, _ = ui.get("/launch", same, "POST", f"confirm=yes&csrf={token}&spec={quick}")
            assert status == 303 and headers["location"].startswith("/runs/r-")
            launched_id = headers["location"].removeprefix("/runs/")
            assert launched_id in {r["run_id"] for r in books.cli_json("runs")}
    finally:
        books.cli("stop", run_id)


def test_a_token_guards_every_request_and_moves_from_the_link_to_a_cookie(books: Books) -> None:
    token = "t0ken-for-the-tests-0123456789"
    with dashboard(books, "--token", token) as ui:
        assert ui.url.endswith(f"/?token={token}")
        assert ui.get("/api/runs")[0] == 401
        assert ui.get("/api/runs?token=wrong-token-wrong-token")[0] == 401
        assert ui.get("/api/runs", {"Cookie": "gpuplan_ui_token=nope"})[0] == 401
        status, headers, _ = ui.get(f"/runs?state=failed&token={token}")
        assert status == 303 and headers["location"] == "/runs?state=failed"
        assert "HttpOnly" in headers["set-cookie"] and "SameSite=Strict" in headers["set-cookie"]
        assert ui.get("/api/runs", {"Cookie": headers["set-cookie"].split(";")[0]})[0] == 200
        assert ui.get("/api/runs", {"Authorization": f"Bearer {token}"})[0] == 200
        assert ui.get("/api/runs", {"Host": "evil.example", "Authorization": f"Bearer {token}"})[0] == 421


def test_a_bind_beyond_loopback_gets_a_token_of_its_own(books: Books) -> None:
    with dashboard(books, "--host", "0.0.0.0") as ui:
        assert "?token=" in ui.url
        token = ui.url.split("?token=")[1]
        assert len(token) >= 24
        assert ui.get("/api/runs")[0] == 401
        assert ui.get("/api/runs", {"Authorization": f"Bearer {token}"})[0] == 200


def test_bad_options_are_one_line_and_exit_2(books: Books) -> None:
    short = books.cli("ui", "--no-browser", "--token", "short")
    assert short.returncode == 2 and short.stderr.startswith("error: --token")
    with dashboard(books) as ui:
        port = ui.host.rsplit(":", 1)[1]
        taken = books.cli("ui", "--no-browser", "--port", port)
        assert taken.returncode == 2 and "cannot listen" in taken.stderr and "Traceback" not in taken.stderr


@pytest.mark.postgres
def test_on_postgresql_the_dashboard_shows_what_the_cli_shows(fresh_postgres_db: str, tmp_path: Path) -> None:
    books = make_books(tmp_path / "pg", fresh_postgres_db, few=True)
    with dashboard(books) as ui:
        assert ui.json("/api/runs") == books.cli_json("runs")
        assert ui.json("/api/report?by=project") == books.cli_json("report", "--by", "project")
        assert ui.json("/api/budgets") == books.cli_json("budget", "status")
        run_id: Any = books.cli_json("runs")[0]["run_id"]
        assert "Machines and billing" in _page(ui, f"/runs/{run_id}")
