"""Spend aggregated from instance rows: the one place reports and budgets get their dollars from.

Cost is derived with gpuplan.runs.cost's rule. The bulk of the work runs in SQL so a million instance rows report
in about a second: the rows are read in slices of launch time (one per reporting bucket, or per month), each a
range scan of the `launched_at` index with no sort, and every instance that lies wholly inside its bucket (and
inside the --since/--until window) is costed *per row* in exact integer micro-dollars (`costing.cost_micros`,
the same rule as `instance_cost`) and summed by the database. The few instances that straddle a bucket or window
edge are fetched and cut at the edges in Python with `costing.split_cost` (exact Decimal). The sum over buckets
is therefore exactly the sum of the per-instance costs. On a database other than SQLite or PostgreSQL, or when
asked (`method="python"`, used by the tests as a cross-check), every row takes the Python path.
"""

from __future__ import annotations

import datetime as dt
import itertools
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from gpuplan.books import periods
from gpuplan.runs import cost as costing

# --by keys that are not time: name -> SQL column (i = instances, r = runs).
KEY_COLUMNS: dict[str, str] = {
    "project": "r.project",
    "user": "r.user",
    "run": "i.run_id",
    "cloud": "i.cloud",
    "gpu": "i.gpu",
    "instance-type": "i.instance_type",
}
NO_VALUE = "(none)"
# `--by gpu --by cloud` groups by both: a compound key "gpu+cloud" whose values are joined with KEY_SEP (a control
# character no name contains), so one SQL column carries the group and the report splits it back into columns.
KEY_JOIN = "+"
KEY_SEP = "\x1f"


def key_names(key: str | None) -> list[str]:
    """"gpu+cloud" -> ["gpu", "cloud"]; None -> []."""
    return key.split(KEY_JOIN) if key else []


def key_values(key: str | None, value: str | None) -> list[str]:
    """A SpendRow's key split into one value per name of its compound key."""
    if not key:
        return []
    return (value or "").split(KEY_SEP) if KEY_JOIN in key else [value or NO_VALUE]


@dataclass(frozen=True)
class Scope:
    """Which instances count: a budget's project and clouds, or a report's filters (None = all)."""

    project: str | None = None
    clouds: tuple[str, ...] | None = None


@dataclass(frozen=True)
class SpendRow:
    """Spend of one (period, key) group. `period` is the bucket's start (None without a time unit)."""

    period: dt.datetime | None
    key: str | None
    cost: Decimal
    billed_seconds: Decimal
    instances: int


@dataclass(frozen=True)
class Spend:
    """The groups plus the totals; `total_cost` is exactly the sum of the groups' costs."""

    rows: list[SpendRow]
    total_cost: Decimal
    total_seconds: Decimal
    instances: int
    method: str


def spend(
    conn: Any,
    *,
    now: dt.datetime,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    unit: str | None = None,
    key: str | None = None,
    scope: Scope = Scope(),
    method: str = "auto",
) -> Spend:
    """Spend from instance rows in [since, until), grouped by time `unit` and/or `key`, running ones up to `now`.

    `conn` is a SQLAlchemy Connection or Session.
    """
    if unit is not None and unit not in periods.TIME_UNITS:
        raise ValueError(f"unknown time unit {unit!r}")
    if key is not None and not all(name in KEY_COLUMNS for name in key_names(key)):
        raise ValueError(f"unknown key {key!r}")
    dialect = (conn.get_bind() if hasattr(conn, "get_bind") else conn).dialect.name
    if method == "auto":
        method = "sql" if dialect in ("sqlite", "postgresql") else "python"
    query = _Query(dialect=dialect, now=now, since=since, until=until, unit=unit, key=key, scope=scope)
    groups: dict[tuple[dt.datetime | None, str | None], list[Any]] = {}
    instances = 0
    if method == "sql":
        chunk = query.chunk_sql()
        for lo, hi in query.chunks(conn):
            for k, micros, billed_us, n in conn.execute(chunk[0], {**chunk[1], "lo": lo, "hi": hi}):
                if not n:  # an empty slice (a plain aggregate still returns its one row)
                    continue
                entry = groups.setdefault((lo if unit else None, _key(key, k)), [Decimal(0), Decimal(0), 0])
                entry[0] += Decimal(int(micros)) / costing.MICROS
                entry[1] += Decimal(int(billed_us)) / costing.MICROS
                entry[2] += int(n)
                instances += int(n)
    for row in conn.execute(*query.rest_sql(only_straddlers=method == "sql")):
        if _add_slices(groups, row, now=now, since=since, until=until, unit=unit, key=key):
            instances += 1
    rows = [
        SpendRow(period, key_value, cost, seconds, count)
        for (period, key_value), (cost, seconds, count) in groups.items()
    ]
    rows.sort(key=lambda r: (r.period or dt.datetime.min.replace(tzinfo=periods.UTC), -r.cost, r.key or ""))
    return Spend(rows, sum((r.cost for r in rows), Decimal(0)), sum((r.billed_seconds for r in rows), Decimal(0)),
                 instances, method)


def _key(key: str | None, value: Any) -> str | None:
    if key is None:
        return None
    if KEY_JOIN in key:
        return KEY_SEP.join(part or NO_VALUE for part in str(value or "").split(KEY_SEP))
    return NO_VALUE if value is None or value == "" else str(value)


def _utc(value: Any) -> dt.datetime | None:
    """A timestamp as the driver returns it (SQLite: SQLAlchemy's 'YYYY-MM-DD HH:MM:SS.ffffff' text in UTC;
    PostgreSQL: an aware datetime) as an aware UTC datetime, without the generic per-column result processing."""
    if value is None:
        return None
    if isinstance(value, str):
        value = dt.datetime.fromisoformat(value)
    return value.replace(tzinfo=periods.UTC) if value.tzinfo is None else value.astimezone(periods.UTC)


@dataclass(frozen=True)
class _Row:
    """An instance row as costing.split_cost wants it."""

    price_per_hour: Decimal
    min_billed_seconds: int
    launched_at: dt.datetime
    terminated_at: dt.datetime | None


def _add_slices(groups: dict[tuple[dt.datetime | None, str | None], list[Any]], row: Any, *, now: dt.datetime,
                since: dt.datetime | None, until: dt.datetime | None, unit: str | None, key: str | None) -> bool:
    """Cut one instance at the window and bucket edges and add its slices inside the window to `groups`."""
    launched_at = _utc(row.launched_at)
    if launched_at is None:  # the column is NOT NULL with a default: a row without it is not an instance row
        raise ValueError(f"instance row without launched_at: {row!r}")
    inst = _Row(Decimal(str(row.price_per_hour)), int(row.min_billed_seconds or 0), launched_at,
                _utc(row.terminated_at))
    end = max(inst.terminated_at or now, inst.launched_at)
    lo = inst.launched_at if since is None else max(inst.launched_at, since)
    hi = end if until is None else min(end, until)
    edges = sorted({e for e in (since, until) if e is not None} |
                   (set(periods.edges_between(lo, hi, unit)) if unit and lo < hi else set()))
    touched = False
    key_value = _key(key, row.k)
    for piece in costing.split_cost(inst, edges, now):
        holds_launch = (piece.start is None or piece.start <= inst.launched_at) and (
            piece.end is None or inst.launched_at < piece.end)
        if piece.seconds == 0 and piece.cost == 0 and not holds_launch:
            continue
        if (since is not None and (piece.start is None or piece.start < since)) or (
                until is not None and (piece.end is None or piece.end > until)):
            continue
        # A slice's bucket is where its billed time begins (the window edge, a bucket edge or the launch).
        begins = inst.launched_at if piece.start is None else max(piece.start, inst.launched_at)
        period = periods.floor(begins, unit) if unit else None
        entry = groups.setdefault((period, key_value), [Decimal(0), Decimal(0), 0])
        entry[0] += piece.cost
        entry[1] += piece.seconds
        entry[2] += 1
        touched = True
    return touched


@dataclass(frozen=True)
class _Query:
    """Builds the two statements: aggregate the simple rows in SQL, fetch the rest for exact splitting."""

    dialect: str
    now: dt.datetime
    since: dt.datetime | None
    until: dt.datetime | None
    unit: str | None
    key: str | None
    scope: Scope

    def _params(self) -> dict[str, Any]:
        params: dict[str, Any] = {"now": self.now}
        if self.since is not None:
            params["since"] = self.since
        if self.until is not None:
            params["until"] = self.until
        if self.scope.project is not None:
            params["project"] = self.scope.project
        if self.scope.clouds:
            params["clouds"] = list(self.scope.clouds)
        return params

    def _text(self, sql: str) -> Any:
        from sqlalchemy import bindparam, text

        from gpuplan.store.types import UTCDateTime

        binds = [bindparam(name, type_=UTCDateTime) for name in ("now", "since", "until") if f":{name}" in sql]
        if ":clouds" in sql:
            binds.append(bindparam("clouds", expanding=True))
        return text(sql).bindparams(*binds)

    def _from_where(self) -> tuple[str, list[str]]:
        needs_runs = self.scope.project is not None or bool({"project", "user"} & set(key_names(self.key)))
        source = "instances i JOIN runs r ON r.id = i.run_id" if needs_runs else "instances i"
        where = []
        if self.since is not None:
            where.append("(i.launched_at >= :since OR COALESCE(i.terminated_at, :now) > :since)")
        if self.until is not None:
            where.append("i.launched_at < :until")
        if self.scope.project is not None:
            where.append("r.project = :project")
        if self.scope.clouds:
            where.append("i.cloud IN :clouds")
        return source, where

    def _key_sql(self) -> str:
        names = key_names(self.key)
        if len(names) > 1:
            return f" || '{KEY_SEP}' || ".join(f"COALESCE({KEY_COLUMNS[name]}, '')" for name in names)
        return KEY_COLUMNS[self.key] if self.key else "NULL"

    def _micros(self, column: str) -> str:
        """Microseconds since the epoch of a stored UTC timestamp, exactly, as a 64-bit integer."""
        if self.dialect == "sqlite":
            # SQLAlchemy stores 'YYYY-MM-DD HH:MM:SS.ffffff'; unixepoch() truncates to whole seconds.
            return f"(unixepoch({column}) * 1000000 + CAST(substr({column}, 21, 6) AS INTEGER))"
        return f"CAST(EXTRACT(EPOCH FROM {column}) * 1000000 AS BIGINT)"

    def _price_micros(self) -> str:
        if self.dialect == "sqlite":
            return "CAST(ROUND(i.price_per_hour * 1000000) AS INTEGER)"
        return "CAST(i.price_per_hour * 1000000 AS BIGINT)"

    def _bucket(self, column: str) -> str:
        """The label (YYYY-MM-DD of the bucket's start) of the UTC day/week/month containing `column`."""
        if self.unit is None:
            return "''"
        if self.dialect == "sqlite":
            return {"day": f"substr({column}, 1, 10)", "month": f"(substr({column}, 1, 7) || '-01')",
                    "week": f"date({column}, '-6 days', 'weekday 1')"}[self.unit]
        return f"to_char(date_trunc('{self.unit}', {column} AT TIME ZONE 'UTC'), 'YYYY-MM-DD')"

    def _greatest(self, a: str, b: str) -> str:
        return f"max({a}, {b})" if self.dialect == "sqlite" else f"GREATEST({a}, {b})"

    def chunks(self, conn: Any) -> list[tuple[dt.datetime, dt.datetime]]:
        """Slices [lo, hi) of launch time covering every row that can be counted whole: the reporting buckets,
        or calendar months when the report has no time unit (small slices keep each GROUP BY small)."""
        from sqlalchemy import func, select

        from gpuplan.store.models import InstanceRow

        first, last = conn.execute(select(func.min(InstanceRow.launched_at), func.max(InstanceRow.launched_at))).one()
        if first is None:
            return []
        if self.since is not None:
            first = max(first, self.since)
        if self.until is not None:
            last = min(last, self.until)
        if first > last:
            return []
        unit = self.unit or "month"
        edges = [periods.floor(first, unit), *periods.edges_between(first, last, unit)]
        while edges[-1] <= last:  # the last slice must hold a row launched exactly at `last`
            edges.append(periods.next_start(edges[-1], unit))
        return list(itertools.pairwise(edges))

    def chunk_sql(self) -> tuple[Any, dict[str, Any]]:
        """SUM per key the exact cost of the rows launched in [:lo, :hi) that lie wholly in their bucket and in
        the window: exactly the rows `rest_sql(only_straddlers=True)` leaves out."""
        from sqlalchemy import bindparam

        from gpuplan.store.types import UTCDateTime

        source, where = self._from_where()
        hour = costing.MICROS_PER_HOUR
        end = "COALESCE(i.terminated_at, :now)"
        where += ["i.launched_at >= :lo", "i.launched_at < :hi"]
        if self.unit:  # the bucket is [lo, hi): the end must fall in it too (same test as _bucket equality)
            where += [f"{end} >= :lo", f"{end} < :hi"]
        if self.since is not None:
            where.append("i.launched_at >= :since")
        if self.until is not None:
            where.append(f"{end} <= :until")
        billed = self._greatest(self._greatest(f"{self._micros(end)} - {self._micros('i.launched_at')}", "0"),
                                "i.min_billed_seconds * 1000000")
        inner = (f"SELECT {self._key_sql()} AS k, {self._price_micros()} AS p, {billed} AS us FROM {source} "
                 f"WHERE {' AND '.join(where)}")
        # costing.cost_micros in SQL: whole hours x price, plus the remainder's product rounded half to even.
        rest = f"(p * (us % {hour}))"
        cost = (
            f"p * (us / {hour}) + {rest} / {hour} + CASE WHEN 2 * ({rest} % {hour}) > {hour} "
            f"OR (2 * ({rest} % {hour}) = {hour} AND ({rest} / {hour}) % 2 = 1) THEN 1 ELSE 0 END"
        )
        # The fence (LIMIT/OFFSET) keeps the planner from inlining the subquery, which would recompute the
        # timestamp arithmetic for every use of `us` (several times slower).
        fence = " LIMIT -1 OFFSET 0" if self.dialect == "sqlite" else " OFFSET 0"
        group = " GROUP BY k" if self.key else ""  # without a key: a plain aggregate, no sorter at all
        sql = f"SELECT {'k' if self.key else 'NULL'}, SUM({cost}), SUM(us), COUNT(*) FROM ({inner}{fence}) AS x{group}"
        stmt = self._text(sql).bindparams(bindparam("lo", type_=UTCDateTime), bindparam("hi", type_=UTCDateTime))
        return stmt, self._params()

    def _simple_condition(self, end: str) -> str:
        parts = [f"{self._bucket('i.launched_at')} = {self._bucket(end)}"] if self.unit else []
        if self.since is not None:
            parts.append("i.launched_at >= :since")
        if self.until is not None:
            parts.append(f"{end} <= :until")
        return "(" + " AND ".join(parts) + ")" if parts else "1 = 1"

    def rest_sql(self, *, only_straddlers: bool) -> tuple[Any, dict[str, Any]]:
        """The rows that need cutting at edges (or every row, for the pure-Python method)."""
        source, where = self._from_where()
        if only_straddlers:
            where.append(f"NOT {self._simple_condition('COALESCE(i.terminated_at, :now)')}")
        sql = (f"SELECT i.price_per_hour AS price_per_hour, i.min_billed_seconds AS min_billed_seconds, "
               f"i.launched_at AS launched_at, i.terminated_at AS terminated_at, {self._key_sql()} AS k "
               f"FROM {source}" + (f" WHERE {' AND '.join(where)}" if where else ""))
        return self._text(sql), self._params()

