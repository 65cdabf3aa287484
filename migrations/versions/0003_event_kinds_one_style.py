"""event kinds in one style: the dotted `reconcile.*` and `schedule.*` kinds become snake_case like the others

Every other kind was already a snake_case word (`launch_failed`, `budget_override`); these two families were
written as `reconcile.terminated` and `schedule.launched`. gpuplan.runs.events.EventKind now names each kind once,
in one style, and the rows already recorded are renamed so the books read old and new runs alike.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-25 22:30:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None

RENAMED = {
    "reconcile.terminated": "reconcile_terminated",
    "reconcile.secret_deleted": "reconcile_secret_deleted",
    "schedule.added": "schedule_added",
    "schedule.updated": "schedule_updated",
    "schedule.paused": "schedule_paused",
    "schedule.resumed": "schedule_resumed",
    "schedule.launched": "schedule_launched",
    "schedule.skipped": "schedule_skipped",
    "schedule.failed": "schedule_failed",
}


def _rename(pairs: dict[str, str]) -> None:
    events = sa.table("events", sa.column("kind", sa.String))
    for old, new in pairs.items():
        op.execute(events.update().where(events.c.kind == old).values(kind=new))


def upgrade() -> None:
    _rename(RENAMED)


def downgrade() -> None:
    _rename({new: old for old, new in RENAMED.items()})
