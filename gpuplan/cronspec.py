"""Cron due-time arithmetic in a time zone: pure functions, no I/O (croniter does the parsing).

Two rules a scheduler must get right, and that these functions encode:
- **Catch-up runs once.** After downtime, only the most recent missed slot is due, not one per missed slot.
- **DST follows cron.** A slot in the hour skipped by spring-forward fires at the first valid minute after it
  (croniter's behaviour, as Vixie cron does); a fixed-time slot in the hour repeated by fall-back fires once
  (the first occurrence). Interval jobs (`*/30 * * * *`, hour `*`) fire in both occurrences, as in cron.
"""

from __future__ import annotations

import datetime as dt
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

UTC = dt.timezone.utc
_ONE_SECOND = dt.timedelta(seconds=1)
_NEVER_FIRES_PROBE = dt.datetime(2000, 1, 1, tzinfo=UTC)  # any fixed start: only "is there a next date" matters


def parse_tz(name: str) -> ZoneInfo:
    """A ZoneInfo for `name`; raises ValueError with a user-facing message for an unknown zone."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, IsADirectoryError) as exc:
        raise ValueError(f"unknown time zone {name!r} (use an IANA name such as Europe/Berlin or UTC)") from exc


# The nicknames Vixie cron accepts (crontab(5)), as the 5-field expressions they stand for. They are stored
# expanded, so everything downstream (DST rules, next-fire, the listing) sees one form.
CRON_NICKNAMES: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def validate_cron(expr: str) -> str:
    """Normalise and check a 5-field cron expression or a nickname (@daily ...); raises ValueError naming the
    problem. A nickname comes back as its 5-field expression."""
    from croniter import CroniterBadDateError, croniter

    normalised = " ".join(expr.split())
    if normalised.startswith("@"):
        if normalised.lower() not in CRON_NICKNAMES:
            raise ValueError(f"unknown cron nickname {expr!r}; known: {', '.join(CRON_NICKNAMES)}")
        normalised = CRON_NICKNAMES[normalised.lower()]
    if len(normalised.split(" ")) != 5:
        raise ValueError(f"cron expression {expr!r} must have 5 fields: minute hour day-of-month month day-of-week")
    if not croniter.is_valid(normalised):
        raise ValueError(f"invalid cron expression {expr!r}")
    try:
        # Each field can be valid while the date never exists (`0 0 30 2 *`, February 30th): such a schedule
        # would never fire, and every later next-fire lookup would fail.
        croniter(normalised, _NEVER_FIRES_PROBE).get_next(dt.datetime)
    except CroniterBadDateError:
        raise ValueError(f"cron expression {expr!r} never fires (no such date)") from None
    return normalised


def _fixed_hour(expr: str) -> bool:
    return expr.split(" ")[1] != "*" and not expr.split(" ")[1].startswith("*/")


@lru_cache(maxsize=256)
def _is_repeated_wall_time(utc_ts: float, tz_name: str) -> bool:
    """True if this instant is the second occurrence of its local wall time (the hour fall-back repeats)."""
    tz = ZoneInfo(tz_name)
    local = dt.datetime.fromtimestamp(utc_ts, tz)
    first = local.replace(tzinfo=None).replace(tzinfo=tz, fold=0)
    return first.astimezone(UTC) != local.astimezone(UTC)


def _skip(expr: str, tz_name: str, instant: dt.datetime) -> bool:
    return _fixed_hour(expr) and _is_repeated_wall_time(instant.timestamp(), tz_name)


def next_fire(expr: str, tz_name: str, after: dt.datetime) -> dt.datetime:
    """The first slot strictly after `after`, as an aware UTC datetime."""
    from croniter import croniter

    tz = parse_tz(tz_name)
    it = croniter(expr, after.astimezone(tz))
    for _ in range(1000):
        slot: dt.datetime = it.get_next(dt.datetime)
        if not _skip(expr, tz_name, slot):
            return slot.astimezone(UTC)
    raise ValueError(f"cron expression {expr!r} never fires")  # pragma: no cover - validate_cron rules this out


def latest_slot(expr: str, tz_name: str, at: dt.datetime) -> dt.datetime:
    """The most recent slot at or before `at` (aware UTC)."""
    from croniter import croniter

    tz = parse_tz(tz_name)
    # croniter's get_prev is strictly before its start: start one second later to include `at` itself.
    it = croniter(expr, (at + _ONE_SECOND).astimezone(tz))
    for _ in range(1000):
        slot: dt.datetime = it.get_prev(dt.datetime)
        if not _skip(expr, tz_name, slot):
            return slot.astimezone(UTC)
    raise ValueError(f"cron expression {expr!r} never fires")  # pragma: no cover


def due_slot(expr: str, tz_name: str, *, last_fire_at: dt.datetime | None, since: dt.datetime,
             at: dt.datetime) -> dt.datetime | None:
    """The slot due at `at`, or None: the latest slot in (last fire or `since`, at].

    Collapsing every missed slot into the latest one is what makes a catch-up after downtime run once.
    """
    slot = latest_slot(expr, tz_name, at)
    floor = last_fire_at or since
    # A slot exactly at `since` (the schedule was added at its fire time) still counts when never fired.
    if slot > floor or (last_fire_at is None and slot == since):
        return slot
    return None


def in_window(window: str, tz_name: str, at: dt.datetime) -> bool:
    """Whether `at` falls in a local daily window `HH:MM-HH:MM` (a window may wrap past midnight)."""
    start, end = parse_window(window)
    local = at.astimezone(parse_tz(tz_name)).time()
    if start <= end:
        return start <= local < end
    return local >= start or local < end


def parse_window(window: str) -> tuple[dt.time, dt.time]:
    """`00:00-06:00` -> (00:00, 06:00); raises ValueError for anything else."""
    try:
        start_text, end_text = (part.strip() for part in window.split("-"))
        start, end = dt.time.fromisoformat(start_text), dt.time.fromisoformat(end_text)
    except ValueError as exc:
        raise ValueError(f"schedule window must look like 00:00-06:00, not {window!r}") from exc
    if start == end:
        raise ValueError(f"schedule window {window!r} is empty")
    return start, end
