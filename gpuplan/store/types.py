"""Column types shared by the models: UTC-aware datetimes and exact money."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from sqlalchemy import DateTime, Numeric
from sqlalchemy.types import TypeDecorator

from gpuplan.units import MONEY_LIMIT as UNITS_MONEY_LIMIT

# Money: 6 decimal places covers sub-cent spot prices (AWS quotes spot to 4-6 places); 16 digits is
# plenty for any bill.
Money = Numeric(16, 6, asdecimal=True)
# The first amount a Money column cannot hold: larger input is refused up front (gpuplan.units owns the rule).
MONEY_LIMIT = Decimal(UNITS_MONEY_LIMIT)


def utcnow() -> dt.datetime:
    """The current time as an aware UTC datetime (the only kind the store accepts)."""
    return dt.datetime.now(dt.timezone.utc)


def as_utc(value: dt.datetime) -> dt.datetime:
    """`value` as an aware datetime: a naive one is UTC (what SQLite, ISO text without an offset and the clouds'
    timestamps mean by it)."""
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


class UTCDateTime(TypeDecorator[dt.datetime]):
    """Store aware datetimes as UTC; always hand back aware UTC datetimes.

    SQLite has no time zones and drops tzinfo; PostgreSQL's `timestamptz` keeps it. Normalising at this one
    boundary means no code ever compares a naive datetime with an aware one.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r} given to the store; use an aware UTC datetime")
        value = value.astimezone(dt.timezone.utc)
        if dialect.name == "sqlite":
            return value.replace(tzinfo=None)
        return value

    def process_result_value(self, value: dt.datetime | None, dialect: Any) -> dt.datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=dt.timezone.utc)
        return value.astimezone(dt.timezone.utc)


