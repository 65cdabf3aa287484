"""The dashboard's JSON API: each endpoint is a CLI command's `--json` document, made by the same function and
serialised by the same rules (gpuplan.cli.output.to_jsonable: Decimal money as numbers, UTC times with `Z`).

/api/runs             `gpuplan runs --json` (?state= &project= &provider= &limit=)
/api/runs/RUN         `gpuplan status RUN --json` (with `events`), plus `machines`, `log_tail`, `metrics`
/api/report?by=KEY    `gpuplan report --json --by KEY` (?since= &until= &project= as the command takes them)
/api/books            the four reports of the books page and the budgets with the runs behind each
/api/budgets          `gpuplan budget status --json`
/api/accuracy         `gpuplan report --accuracy --json`
/api/plan?model=...   `gpuplan plan --json --limit 0` for the explorer's fields
"""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from gpuplan.cli.output import to_jsonable
from gpuplan.ui import views
from gpuplan.ui.pages import _now, _settings


def _json(value: Any, status: int = 200) -> Response:
    return Response(json.dumps(to_jsonable(value), indent=2), status_code=status, media_type="application/json")


def runs(request: Request) -> Response:
    q = request.query_params
    limit = q.get("limit") or "50"
    filters = views.RunFilters(state=q.get("state") or None, project=q.get("project") or None,
                               provider=q.get("provider") or None, limit=int(limit) if limit.isdigit() else 0)
    return _json(views.runs(_settings(request).app, filters))


def run(request: Request) -> Response:
    return _json(views.run(_settings(request).app, request.path_params["run_id"]))


def report(request: Request) -> Response:
    from gpuplan.books import periods
    from gpuplan.books import report as rep

    q = request.query_params
    unit, key = rep.parse_by(tuple(q.getlist("by")))
    req = rep.ReportRequest(now=_now(), unit=unit, key=key, project=q.get("project") or None,
                            since=periods.parse_when(q["since"], "since") if q.get("since") else None,
                            until=periods.parse_when(q["until"], "until") if q.get("until") else None)
    with _settings(request).app.store.session() as session:
        return _json(rep.to_json(rep.build(session, req), req))


def books(request: Request) -> Response:
    return _json(views.books(_settings(request).app, _now()))


def budgets(request: Request) -> Response:
    found = views.books(_settings(request).app, _now())
    return _json([b["status"] for b in found["budgets"]])


def accuracy(request: Request) -> Response:
    return _json(views.accuracy(_settings(request).app, _now()))


def plan(request: Request) -> Response:
    form = {k: request.query_params.get(k, "") for k in (*views.PLAN_FIELDS, "market")}
    found = views.plan(_settings(request).app, form)
    if found is None:
        return _json({"error": "give model= or params= (and tokens=)"}, status=400)
    return _json(found["options"])
