"""budget reservations and the launcher's identity on each run

`runs.reserved_usd`: the most the run can spend (its machine fail-safe hours x price x nodes), reserved against
every covering budget in the same transaction that records the run (gpuplan.launching.reserve), so concurrent
launches can never together promise more than a budget holds. A live run counts toward a budget's `reserved` for
what of it is not spent yet; a run that ended reserves nothing. NULL for runs recorded before this revision (they
still count by their estimate, as before) and for runs no cap bounds.

`runs.launcher_host` / `launcher_pid` / `launcher_started`: the process that recorded the run (host name, pid and
the process's start time in clock ticks since boot, which tells a reused pid from the original), so a run left
`pending`/`provisioning` by a launcher that died can be settled at once instead of after a timeout.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-26 01:00:00
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("reserved_usd", sa.Numeric(precision=16, scale=6), nullable=True))
        batch.add_column(sa.Column("launcher_host", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("launcher_pid", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("launcher_started", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("launcher_started")
        batch.drop_column("launcher_pid")
        batch.drop_column("launcher_host")
        batch.drop_column("reserved_usd")
