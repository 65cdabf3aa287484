"""The dashboard's HTML pages: each gathers its data through gpuplan.ui.views and renders one template.

Templates autoescape everything (a job named `<script>` is shown as text), charts are SVG drawn by
gpuplan.ui.charts with every label escaped, and the pages carry no script at all (the CSP forbids it).
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from gpuplan.errors import NotFoundError, UserError
from gpuplan.ui import actions, charts, views
from gpuplan.ui.format import FILTERS
from gpuplan.ui.settings import UiSettings

TEMPLATES = Path(__file__).parent / "templates"


def environment() -> Environment:
    """Jinja2 with autoescaping on for every template (not only *.html: nothing is ever rendered raw)."""
    env = Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env


def _settings(request: Request) -> UiSettings:
    settings = request.app.state.settings
    assert isinstance(settings, UiSettings)
    return settings


def _render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    settings = _settings(request)
    env = request.app.state.templates
    assert isinstance(env, Environment)
    html = env.get_template(name).render(request=request, allow_actions=settings.allow_actions,
                                         csrf=settings.guard.csrf_token(), page=name.removesuffix(".html"),
                                         **context)
    return HTMLResponse(html, status_code=status)


def _now() -> dt.datetime:
    """The clock of the books: GPUPLAN_NOW as `report`/`budget status` read it, else now."""
    from gpuplan.books.periods import resolve_now

    return resolve_now(os.environ.get("GPUPLAN_NOW"))


def home(request: Request) -> Response:
    return RedirectResponse("/runs", status_code=303)


def runs_page(request: Request) -> Response:
    q = request.query_params
    filters = views.RunFilters(state=q.get("state") or None, project=q.get("project") or None,
                               provider=q.get("provider") or None)
    refresh = q.get("refresh", "on") != "off"
    rows = views.runs(_settings(request).app, filters)
    return _render(request, "runs.html", rows=rows, filters=filters, refresh=refresh,
                   refresh_seconds=_settings(request).refresh_seconds,
                   choices=views.filter_choices(_settings(request).app))


def run_page(request: Request) -> Response:
    found = views.run(_settings(request).app, request.path_params["run_id"])
    points = found["metrics"]
    loss = charts.line([charts.Point(p.step, p.loss) for p in points if p.loss is not None],
                       x_label="step", y_label="loss", title="loss")
    speed = charts.line([charts.Point(p.step, p.tokens_per_s) for p in points if p.tokens_per_s is not None],
                        x_label="step", y_label="tokens/s", title="throughput")
    return _render(request, "run.html", run=found, loss_chart=loss, speed_chart=speed,
                   live=found["state"] in _live_states())


def _live_states() -> frozenset[str]:
    from gpuplan.store.models import RunState

    return frozenset(RunState.LIVE)


def _action_allowed(request: Request) -> UiSettings:
    settings = _settings(request)
    if not settings.allow_actions:
        raise HTTPException(403, "this dashboard is read-only: start it with `gpuplan ui --allow-actions` to stop "
                                 "or launch runs from here")
    return settings


async def _confirmed_form(request: Request) -> FormData:
    """The POSTed form, once its CSRF token and confirmation are checked (the gate checked Host and Origin)."""
    settings = _settings(request)
    form = await request.form()
    token = form.get("csrf")
    if not settings.guard.csrf_ok(token if isinstance(token, str) else None):
        raise HTTPException(403, "refused: the form's CSRF token is missing or wrong")
    if form.get("confirm") != "yes":
        raise HTTPException(400, "confirm first")
    return form


async def stop_page(request: Request) -> Response:
    """GET: the confirmation; POST (with the CSRF token): stop the run as `gpuplan stop RUN` does."""
    settings = _action_allowed(request)
    run_id = request.path_params["run_id"]
    if request.method == "GET":
        found = await run_in_threadpool(views.run, settings.app, run_id)
        return _render(request, "confirm.html", run=found)
    await _confirmed_form(request)
    await run_in_threadpool(actions.stop, settings.app, run_id)
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


async def launch_page(request: Request) -> Response:
    """GET ?spec=PATH: what `launch --dry-run` says it would do; POST (CSRF, confirm): launch it, detached."""
    settings = _action_allowed(request)
    if request.method == "GET":
        spec = request.query_params.get("spec", "")
        try:
            found = await run_in_threadpool(actions.launch_plan, settings.app, spec)
        except UserError as exc:
            return _render(request, "launch.html", status=400, spec=spec, plan=None, error=str(exc))
        return _render(request, "launch.html", spec=spec, plan=found, error=None)
    form = await _confirmed_form(request)
    posted = form.get("spec")
    run_id = await run_in_threadpool(actions.launch, settings.app, posted if isinstance(posted, str) else "")
    return RedirectResponse(f"/runs/{run_id}", status_code=303)


def books_page(request: Request) -> Response:
    found = views.books(_settings(request).app, _now())
    bar_charts = {
        grouping: charts.bars([(r["period_label"] if grouping == "month" else (r["key"] or "-"), float(r["cost_usd"]))
                               for r in found["spend"][grouping]["rows"]], title=f"spend by {grouping}")
        for grouping in views.BOOKS_GROUPINGS}
    return _render(request, "books.html", books=found, bar_charts=bar_charts)


def accuracy_page(request: Request) -> Response:
    found = views.accuracy(_settings(request).app, _now())
    points = [charts.Point(r.est_hours, r.actual_hours,
                           f"{r.name} ({r.run_id}): estimated {r.est_hours:.4g} h, took {r.actual_hours:.4g} h")
              for r in found["runs"] if r.est_hours]
    chart = charts.scatter(points, x_label="estimated hours", y_label="actual hours",
                           title="estimate vs actual (hours)", log=True, diagonal=True)
    return _render(request, "accuracy.html", acc=found, chart=chart)


def plan_page(request: Request) -> Response:
    form = {k: request.query_params.get(k, "") for k in (*views.PLAN_FIELDS, "market")}
    error = None
    found = None
    try:
        found = views.plan(_settings(request).app, form)
    except UserError as exc:
        error = str(exc)
    chart = None
    if found is not None:
        front = set(found["pareto"])
        points = [charts.Point(float(o["est_hours"]), float(o["est_cost_usd"]),
                               f"{o['nodes']} x {o['instance_type']} {'spot' if o['spot'] else 'on-demand'} in "
                               f"{o['region']} ({o['cloud']}): {o['est_hours']:.4g} h, ${o['est_cost_usd']:,.2f}",
                               "pareto" if i in front else "point")
                  for i, o in enumerate(found["options"])
                  if o["est_hours"] is not None and o["est_cost_usd"] is not None]
        chart = charts.scatter(points, x_label="hours", y_label="cost ($)", title="options: cost vs time",
                               log=True, line_kind="pareto")
    return _render(request, "plan.html", form=form, plan=found, chart=chart, error=error,
                   status=400 if error else 200)


async def _error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        status, message = exc.status_code, str(exc.detail)
    elif isinstance(exc, NotFoundError):
        status, message = 404, str(exc)
    else:
        status, message = 400, str(exc)
    if request.url.path.startswith("/api/"):
        from starlette.responses import JSONResponse

        return JSONResponse({"error": message}, status_code=status)
    return _render(request, "error.html", status=status, message=message)


EXCEPTION_HANDLERS: dict[Any, Any] = {HTTPException: _error, UserError: _error}
