"""Due times across DST changes, catch-up after downtime, and windows."""

from __future__ import annotations

import datetime as dt

import pytest

from gpuplan.cronspec import due_slot, in_window, latest_slot, next_fire, parse_tz, validate_cron

UTC = dt.timezone.utc


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=UTC)


def test_next_fire_in_a_time_zone() -> None:
    # 02:00 Berlin in winter is 01:00 UTC.
    assert next_fire("0 2 * * *", "Europe/Berlin", utc(2026, 11, 22, 12)) == utc(2026, 11, 23, 1)


def test_spring_forward_fires_once_after_the_gap() -> None:
    """2026-03-29 02:00 does not exist in Berlin: the job runs at 03:00 CEST (01:00 UTC), once."""
    fires = []
    at = utc(2026, 3, 27, 12)
    for _ in range(4):
        at = next_fire("0 2 * * *", "Europe/Berlin", at)
        fires.append(at)
    assert fires == [utc(2026, 3, 28, 1), utc(2026, 3, 29, 1), utc(2026, 3, 30, 0), utc(2026, 3, 31, 0)]


def test_fall_back_fires_a_fixed_time_job_once() -> None:
    """2026-10-25 02:30 happens twice in Berlin; a daily 02:30 job must run only the first time."""
    fires = []
    at = utc(2026, 10, 23, 12)
    for _ in range(3):
        at = next_fire("30 2 * * *", "Europe/Berlin", at)
        fires.append(at)
    assert fires == [utc(2026, 10, 24, 0, 30), utc(2026, 10, 25, 0, 30), utc(2026, 10, 26, 1, 30)]


def test_fall_back_interval_job_fires_in_both_hours() -> None:
    fires = []
    at = utc(2026, 10, 24, 23, 50)  # 01:50 CEST
    for _ in range(5):
        at = next_fire("*/30 * * * *", "Europe/Berlin", at)
        fires.append(at)
    assert fires == [utc(2026, 10, 25, 0, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 0),
                     utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 2, 0)]


def test_catch_up_collapses_missed_slots() -> None:
    added = utc(2026, 11, 1)
    # Down for a week: only the latest missed slot is due.
    assert due_slot("0 2 * * *", "UTC", last_fire_at=utc(2026, 11, 15, 2), since=added,
                    at=utc(2026, 11, 22, 12)) == utc(2026, 11, 22, 2)
    # Once fired, nothing is due until the next slot.
    assert due_slot("0 2 * * *", "UTC", last_fire_at=utc(2026, 11, 22, 2), since=added,
                    at=utc(2026, 11, 22, 23)) is None
    # Never fired, added after today's slot: not due until tomorrow.
    assert due_slot("0 2 * * *", "UTC", last_fire_at=None, since=utc(2026, 11, 22, 3),
                    at=utc(2026, 11, 22, 23)) is None


def test_slot_exactly_at_the_tick_is_due() -> None:
    assert latest_slot("0 2 * * *", "UTC", utc(2026, 11, 23, 2)) == utc(2026, 11, 23, 2)
    assert due_slot("0 2 * * *", "UTC", last_fire_at=None, since=utc(2026, 11, 1),
                    at=utc(2026, 11, 23, 2)) == utc(2026, 11, 23, 2)


@pytest.mark.parametrize("expr", ["61 * * * *", "0 2 * *", "every day", "0 2 * * * *"])
def test_bad_cron(expr: str) -> None:
    with pytest.raises(ValueError):
        validate_cron(expr)


def test_bad_tz() -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        parse_tz("Mars/Olympus")


def test_windows() -> None:
    assert in_window("00:00-06:00", "UTC", utc(2026, 11, 23, 2))
    assert not in_window("00:00-06:00", "UTC", utc(2026, 11, 23, 7))
    assert in_window("22:00-04:00", "Europe/Berlin", utc(2026, 11, 23, 0))  # 01:00 local, wraps midnight
    with pytest.raises(ValueError):
        in_window("late", "UTC", utc(2026, 11, 23))
