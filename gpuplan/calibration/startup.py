"""The start-up allowance of a launched run: wall time = start-up + tokens / throughput.

A throughput (measured by `gpuplan bench`, given in the spec, or estimated) says how fast the training loop
goes once it runs. A launched run also spends time that no throughput explains: the machine booting (clouds),
the container image arriving, the process starting, `import torch`, building the model and data, the slow
first steps, the last checkpoint and the exit. For a short run this dominates: the demo's 30-second job was
"+92% time" against a throughput-only estimate.

The allowance is *measured* from this provider's finished runs in the store: for each succeeded run with a
measured throughput, its overhead is

    overhead = (ended_at - started_at) - tokens_done / tokens_per_s

(`tokens_per_s` is measured between the job's first and last metrics lines, gpuplan.supervise.progress, so it is the
loop's steady speed; whatever the run took beyond tokens at that speed is start-up and shut-down). The
allowance is the median over the provider's last `HISTORY_RUNS` such runs. With no history the provider's
documented default applies (`Provider.startup_seconds`, declared by each provider with where its number
comes from).

The store is read with the same read-only query helper the throughput lookups use (stdlib sqlite3 for SQLite),
so the launch path does not pay for more than one small SELECT.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

HISTORY_RUNS = 10


@dataclass(frozen=True)
class StartupDefault:
    """A provider's start-up allowance before it has any history, and the evidence for the number."""

    seconds: float
    why: str


# Any provider that declares no start-up figure (a plugin): assume a cloud-like machine start until it has history.
FALLBACK = StartupDefault(100.0, "no history and no default for this provider: a cloud machine start assumed")


def provider_default(provider: str) -> StartupDefault:
    """The provider's declared start-up before it has history (`Provider.startup_seconds`, cited where each
    provider sets it), else FALLBACK; an unknown provider name is FALLBACK too (a run of a plugin since removed)."""
    from gpuplan.providers.registry import UnknownProviderError, load_provider_class

    try:
        cls = load_provider_class(provider)
    except UnknownProviderError:
        return FALLBACK
    if cls.startup_seconds is None:
        return FALLBACK
    return StartupDefault(cls.startup_seconds, cls.startup_why)


@dataclass(frozen=True)
class StartupAllowance:
    """Seconds to add to a run's throughput time, and where the number came from."""

    seconds: float
    source: str  # "measured" (median of finished runs) | "default"
    detail: str
    run_ids: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"startup_s": round(self.seconds, 3), "startup_source": self.source,
                "startup_detail": self.detail, "startup_runs": list(self.run_ids)}


@dataclass(frozen=True)
class FinishedRun:
    """What the derivation needs of one succeeded run (a store row)."""

    run_id: str
    started_at: dt.datetime
    ended_at: dt.datetime
    tokens: int
    tokens_per_s: float


def overhead_seconds(run: FinishedRun) -> float:
    """The run's wall time beyond its tokens at its measured steady speed (never below zero)."""
    wall = (run.ended_at - run.started_at).total_seconds()
    return max(wall - run.tokens / run.tokens_per_s, 0.0)


def allowance_from_runs(runs: Sequence[FinishedRun], provider: str) -> StartupAllowance | None:
    """The median overhead of `runs` (the newest first, already limited), or None without any."""
    if not runs:
        return None
    seconds = statistics.median(overhead_seconds(r) for r in runs)
    return StartupAllowance(seconds=seconds, source="measured",
                            detail=f"median of the last {len(runs)} succeeded {provider} run(s)",
                            run_ids=tuple(r.run_id for r in runs))


def default_allowance(provider: str) -> StartupAllowance:
    """The documented default for a provider without history."""
    default = provider_default(provider)
    return StartupAllowance(seconds=default.seconds, source="default", detail=default.why)


def _when(value: Any) -> dt.datetime | None:
    """A timestamp from either database path: a datetime (PostgreSQL via SQLAlchemy) or SQLite's text."""
    if value is None:
        return None
    if isinstance(value, dt.datetime):
        return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)
    try:
        parsed = dt.datetime.fromisoformat(str(value))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


RUNS_SQL = (
    "SELECT id, started_at, ended_at, tokens_done, total_tokens, tokens_per_s FROM runs "
    "WHERE provider = ? AND state = 'succeeded' AND started_at IS NOT NULL AND ended_at IS NOT NULL "
    "AND tokens_per_s > 0 ORDER BY ended_at DESC, id DESC LIMIT ?"
)


def finished_runs(rows: Iterable[tuple[Any, ...]]) -> list[FinishedRun]:
    """Rows of RUNS_SQL -> FinishedRun, skipping rows that cannot say anything (no tokens, bad times)."""
    out = []
    for run_id, started, ended, tokens_done, total_tokens, rate in rows:
        start, end = _when(started), _when(ended)
        tokens = tokens_done or total_tokens
        if start is None or end is None or end < start or not tokens or not rate:
            continue
        out.append(FinishedRun(str(run_id), start, end, int(tokens), float(rate)))
    return out


def startup_allowance(provider: str, db_url: str | None) -> StartupAllowance:
    """Measured from the provider's last finished runs in the store at `db_url`, else its default.

    `db_url` None: no store to learn from (the default applies).
    """
    if db_url is not None:
        from gpuplan.calibration.throughput import _query

        measured = allowance_from_runs(finished_runs(_query(db_url, RUNS_SQL, (provider, HISTORY_RUNS))), provider)
        if measured is not None:
            return measured
    return default_allowance(provider)
