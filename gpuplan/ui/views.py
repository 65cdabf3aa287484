"""What each dashboard page and JSON endpoint shows, computed by the functions the CLI commands call.

Runs: gpuplan.supervise.listing (as `gpuplan runs`); a run: the watch step, history and log as `gpuplan status
RUN --events` and `gpuplan logs`; the books: gpuplan.books.report (as `report --json`) and budgets.status (as
`budget status --json`); accuracy: gpuplan.books.accuracy (as `report --accuracy --json`); the plan explorer:
the `plan` command's own option parsing and `plan_answer`. Nothing here decides a number; it only gathers.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from gpuplan.cli.context import AppContext
from gpuplan.errors import UserError

LOG_TAIL_BYTES = 32 * 1024  # the last 32 KiB of a run's log on its page (`gpuplan logs RUN` prints it all)
BOOKS_GROUPINGS = ("month", "project", "gpu", "cloud")


@dataclass(frozen=True)
class RunFilters:
    """The runs page's filters, as `gpuplan runs --state/--project/--provider/--limit` take them."""

    state: str | None = None
    project: str | None = None
    provider: str | None = None
    limit: int = 50


def runs(app: AppContext, filters: RunFilters) -> list[dict[str, Any]]:
    """`gpuplan runs --json` with the same filters."""
    from gpuplan.cli.runlist import parse_states
    from gpuplan.supervise.listing import run_summaries

    if not 1 <= filters.limit <= 10_000:
        raise UserError("limit: give a number of runs from 1 to 10000")
    return run_summaries(app.store, filters.limit, states=parse_states(filters.state), project=filters.project,
                         provider=filters.provider)


def filter_choices(app: AppContext) -> dict[str, list[str]]:
    """The values the filter menus offer: every state, and the projects and providers the books know."""
    from sqlalchemy import select

    from gpuplan.store.models import Run, RunState

    with app.store.session() as session:
        projects = sorted({p for p in session.scalars(select(Run.project).distinct()) if p})
        providers = sorted({p for p in session.scalars(select(Run.provider).distinct()) if p})
    return {"states": ["live", "ended", *sorted(RunState.LIVE | RunState.FINAL)], "projects": projects,
            "providers": providers}


def run(app: AppContext, run_ref: str) -> dict[str, Any]:
    """`gpuplan status RUN --json` (its summary and `events`), plus the log's tail, the metrics' curves and each
    machine's bill."""
    from gpuplan.cli.follow import log_path
    from gpuplan.runs.cost import billed_seconds, instance_cost
    from gpuplan.runs.events import history
    from gpuplan.runs.records import get_run
    from gpuplan.store.models import Run
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.listing import watched
    from gpuplan.supervise.progress import METRICS_FILE, series

    with app.store.session() as session:
        run_id = get_run(session, run_ref).id
    found = watched(app.store, run_id)
    with app.store.session() as session:
        row = session.get(Run, run_id)
        assert row is not None
        now = utcnow()
        bills = [{"instance_id": i.provider_instance_id, "node_rank": i.node_rank, "cloud": i.cloud,
                  "instance_type": i.instance_type, "spot": i.spot, "price_per_hour": i.price_per_hour,
                  "launched_at": i.launched_at, "terminated_at": i.terminated_at,
                  "billed_hours": billed_seconds(i, now) / 3600, "cost_usd": instance_cost(i, now)}
                 for i in row.instances]
        events = history(session, run_id)
        run_dir = row.run_dir
        labels = _labels(row.spec_text)
    metrics = series(f"{run_dir}/{METRICS_FILE}" if run_dir else None)
    return {**found, "events": events, "labels": labels, "machines": bills, "log_tail": _tail(log_path(run_dir)),
            "metrics": metrics}


def _labels(spec_text: str | None) -> dict[str, str]:
    """The labels of the spec the run was launched from (empty when it no longer parses under today's rules)."""
    from gpuplan.jobs.spec import SpecError, parse_spec

    if not spec_text:
        return {}
    try:
        return {str(k): str(v) for k, v in parse_spec(spec_text).labels.items()}
    except (SpecError, ValueError):
        return {}


def _tail(path: Path | None) -> str:
    """The end of a log file, from a line start (empty when there is no log yet)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, 2)
            fh.seek(max(size - LOG_TAIL_BYTES, 0))
            data = fh.read()
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        return ""
    if size > LOG_TAIL_BYTES:
        data = data[data.find(b"\n") + 1:]
    return data.decode(errors="replace")


def books(app: AppContext, now: dt.datetime) -> dict[str, Any]:
    """`report --json --by X` for each of month, project, GPU and cloud, and `budget status --json` with the
    runs behind each budget."""
    from gpuplan.books import budgets
    from gpuplan.books import report as rep

    out: dict[str, Any] = {"now": now, "spend": {}}
    with app.store.session() as session:
        for grouping in BOOKS_GROUPINGS:
            unit, key = rep.parse_by((grouping,))
            request = rep.ReportRequest(now=now, unit=unit, key=key)
            out["spend"][grouping] = rep.to_json(rep.build(session, request), request)
        out["budgets"] = [{"status": budgets.status(session, b, now), "runs": budgets.runs_behind(session, b, now)}
                          for b in budgets.list_budgets(session)]
    return out


def accuracy(app: AppContext, now: dt.datetime) -> dict[str, Any]:
    """`report --accuracy --json`."""
    from gpuplan.books import accuracy as acc

    with app.store.session() as session:
        found = acc.accuracy(session, now)
    return {"runs": found.runs, "summary": found.summary, "by_gpu": found.by_gpu}


PLAN_FIELDS = ("model", "params", "tokens", "gpu", "cloud", "region", "deadline", "budget")


def plan(app: AppContext, form: dict[str, str]) -> dict[str, Any] | None:
    """`gpuplan plan --json --limit 0` for the explorer's fields (None before any model is given).

    The fields become the command's own arguments and are parsed by its Click parameters, so a bad value is the
    CLI's one-line error and every default is the CLI's default."""
    from gpuplan.cli.commands.plan import plan_answer, plan_command

    if not (form.get("model") or form.get("params")):
        return None
    argv: list[str] = []
    for name in PLAN_FIELDS:
        value = (form.get(name) or "").strip()
        if value:
            argv += [f"--{name}", value]
    market = form.get("market") or ""
    if market in ("spot", "on-demand"):
        argv.append("--spot" if market == "spot" else "--no-spot")
    try:
        ctx = plan_command.make_context("plan", argv)
    except click.ClickException as exc:
        raise UserError(exc.format_message()) from None
    params = dict(ctx.params)
    for name in ("limit", "explain", "as_json"):
        params.pop(name)
    answer = plan_answer(app, **params)
    options = list(answer.result.options)
    front = {id(o) for o in answer.result.pareto()}
    return {"argv": argv, "options": [o.as_json() for o in options],
            "pareto": [i for i, o in enumerate(options) if id(o) in front],
            "rejected": len(answer.result.rejected)}
