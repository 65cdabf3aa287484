"""The runs as `gpuplan runs`, `gpuplan status` and the dashboard list them: live ones asked of their provider now.

One function per view, so the table in a terminal and the page in a browser show the same runs with the same
state, cost so far and ETA: a live run is refreshed by the watch step (which also measures its progress, so the
ETA comes from its metrics); when its provider cannot be asked, the recorded row stands, with a warning, so one
cloud's outage hides no other run.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gpuplan.errors import GpuplanError
from gpuplan.runs.records import list_runs, live_runs
from gpuplan.store.models import Run, RunState
from gpuplan.store.types import utcnow
from gpuplan.supervise.summary import summary

if TYPE_CHECKING:
    from gpuplan.store.db import Store

Warn = Callable[[str], None]


def _ignore(_message: str) -> None:
    return None


def watched(store: Store, run_id: str, warn: Warn = _ignore) -> dict[str, Any]:
    """A live run refreshed from its provider (state, progress, ETA, cost so far), or its recorded row with a
    warning when the provider cannot be asked (no credentials, a network error)."""
    from gpuplan.providers.base import ProviderError
    from gpuplan.supervise.watch import watch_run

    try:
        return watch_run(store, run_id).summary
    except (GpuplanError, ProviderError) as exc:
        warn(f"{run_id}: could not ask its provider ({' '.join(str(exc).split())}); showing the recorded state")
    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None
        return summary(run)


def run_summaries(store: Store, limit: int = 50, *, states: frozenset[str] | None = None,
                  project: str | None = None, since: dt.datetime | None = None, provider: str | None = None,
                  warn: Warn = _ignore) -> list[dict[str, Any]]:
    """The newest `limit` runs matching the filters, newest first, live ones refreshed from their provider."""
    filters: dict[str, Any] = {"states": states, "project": project, "since": since, "provider": provider}
    with store.session() as session:
        live = [r.id for r in list_runs(session, limit, **filters) if r.state in RunState.LIVE]
    fresh = {run_id: watched(store, run_id, warn) for run_id in live}
    now = utcnow()
    with store.session() as session:
        # Listed again: the watch step may have ended a run, which then no longer matches `--state live`.
        return [fresh[r.id] if r.id in fresh and fresh[r.id]["state"] == r.state else summary(r, now)
                for r in list_runs(session, limit, **filters)]


def queue(store: Store, ended_count: int, warn: Warn = _ignore) -> dict[str, list[dict[str, Any]]]:
    """`gpuplan status` without a run: every live run (refreshed) and the `ended_count` most recently ended."""
    with store.session() as session:
        live_ids = [r.id for r in live_runs(session)]
    refreshed = [watched(store, run_id, warn) for run_id in live_ids]
    # Asking the provider may end a run (its fail-safe fired, it finished): it is listed once, with the ended
    # ones (first: it ended just now), never both as live and again from the ended rows read after (issue 35).
    live = [s for s in refreshed if s["state"] in RunState.LIVE]
    just_ended = [s for s in refreshed if s["state"] not in RunState.LIVE]
    listed = {s["run_id"] for s in refreshed}
    with store.session() as session:
        now = utcnow()
        ended = [summary(r, now) for r in list_runs(session, ended_count, states=RunState.FINAL)
                 if r.id not in listed] if ended_count else []
    return {"live": live, "ended": [*just_ended, *ended][:max(ended_count, len(just_ended))]}
