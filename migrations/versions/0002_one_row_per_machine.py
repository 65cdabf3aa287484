"""one row per machine: merge duplicate instance rows, then a unique index on (run_id, provider, provider_instance_id)

Two gpuplan processes adopting the same machine at the same moment (say `watch` and `status`, gpuplan.supervise.adopt) could
both insert its row, and the machine was then billed twice. From this revision the database refuses the second
row, and gpuplan.runs.machines.record_instances treats the refusal as "someone else recorded it".

The key is the machine's identity *within its run*. A machine is only ever recorded for the run whose tag it
carries, so that is enough to stop double adoption; a key without the run would forbid rows that are legitimate:
a Slurm job id is unique only within one cluster's id sequence (every cluster is the provider `slurm`, and ids
restart after a controller rebuild or wrap at MaxJobId), so two runs can meet the same id. Within a run an id
never names two machines: AWS ids are never reused, a GCE name carries the run, rank and relaunch generation,
a local id is `<run>/node-<rank>`, a Slurm run is one job. The region is not part of the key: Slurm and local
rows have none (NULLs never collide in a unique index, which would void the key), and no cloud reuses an id
across regions.

Before the index can exist, each group of duplicates is folded onto its earliest row (lowest id). Nothing
refers to instances.id (no foreign key points at the table; events name machines by provider_instance_id), so
the other rows can go once their billing facts are on the kept row. Billing is never lost: the kept row gets
the longest span any of them bills (earliest launch; open if any row is still open, else the latest end) at the
highest price and minimum any of them records (an adopted row billed at 0 for want of a price must not win over a
priced one), and its empty descriptive columns are filled from the others. An `instances_merged` event on the
run records which rows were merged and what each said, so the books show why a row changed.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24 15:10:00
"""
from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

INDEX = 'uq_instances_run_machine'
KEY = ('run_id', 'provider', 'provider_instance_id')

# The tables as of 0001 (a revision never imports the application's models: they move on, this must not).
instances = sa.table(
    'instances',
    sa.column('id', sa.Integer()), sa.column('run_id', sa.String()), sa.column('provider', sa.String()),
    sa.column('provider_instance_id', sa.String()), sa.column('cloud', sa.String()),
    sa.column('region', sa.String()), sa.column('zone', sa.String()), sa.column('instance_type', sa.String()),
    sa.column('gpu', sa.String()), sa.column('gpu_count', sa.Float()), sa.column('spot', sa.Boolean()),
    sa.column('node_rank', sa.Integer()), sa.column('price_per_hour', sa.Numeric(16, 6)),
    sa.column('min_billed_seconds', sa.Integer()), sa.column('state', sa.String()),
    sa.column('launched_at', sa.DateTime(timezone=True)), sa.column('terminated_at', sa.DateTime(timezone=True)),
)
events = sa.table(
    'events',
    sa.column('at', sa.DateTime(timezone=True)), sa.column('run_id', sa.String()), sa.column('kind', sa.String()),
    sa.column('message', sa.Text()), sa.column('data_json', sa.Text()),
)
FILLED = ('cloud', 'region', 'zone', 'instance_type', 'gpu')  # descriptive: the kept row's, else another's


def merged_values(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The kept row's new values: the longest billed span, the highest price and minimum (rows oldest first)."""
    keep = rows[0]
    still_open = [r for r in rows if r['terminated_at'] is None]
    last = still_open[0] if still_open else max(rows, key=lambda r: r['terminated_at'])
    values: dict[str, Any] = {
        'launched_at': min(r['launched_at'] for r in rows),
        'terminated_at': last['terminated_at'],
        'state': last['state'],
        'price_per_hour': max(r['price_per_hour'] for r in rows),
        'min_billed_seconds': max(r['min_billed_seconds'] for r in rows),
        'gpu_count': max(r['gpu_count'] for r in rows),
    }
    for column in FILLED:
        values[column] = next((r[column] for r in rows if r[column] is not None), keep[column])
    return values


def _text(value: Any) -> Any:
    return value.isoformat() if isinstance(value, dt.datetime) else str(value) if value is not None else None


def merge_duplicates(conn: sa.Connection) -> int:
    """Fold every group of rows naming one machine of one run onto its earliest row; returns the rows removed."""
    key = [instances.c[name] for name in KEY]
    groups = conn.execute(sa.select(*key).group_by(*key).having(sa.func.count() > 1)).all()
    removed = 0
    now = dt.datetime.now(dt.timezone.utc)
    if conn.dialect.name == 'sqlite':
        now = now.replace(tzinfo=None)  # SQLite keeps naive UTC, as gpuplan.store.types.UTCDateTime writes it
    for group in groups:
        match = sa.and_(*(column == value for column, value in zip(key, group)))
        rows = [dict(r) for r in conn.execute(sa.select(instances).where(match).order_by(instances.c.id)).mappings()]
        keep, extra = rows[0], rows[1:]
        values = merged_values(rows)
        conn.execute(instances.update().where(instances.c.id == keep['id']).values(**values))
        conn.execute(instances.delete().where(instances.c.id.in_([r['id'] for r in extra])))
        removed += len(extra)
        conn.execute(events.insert().values(
            at=now, run_id=keep['run_id'], kind='instances_merged',
            message=(f"{len(rows)} rows recorded machine {keep['provider_instance_id']} ({keep['provider']}); "
                     f"merged onto row {keep['id']} with the longest billed span"),
            data_json=json.dumps({
                'kept': keep['id'], 'removed': [r['id'] for r in extra],
                'rows': [{c: _text(r[c]) for c in ('id', 'price_per_hour', 'min_billed_seconds', 'state',
                                                   'launched_at', 'terminated_at')} for r in rows],
                'merged': {c: _text(v) for c, v in values.items()},
            }),
        ))
    return removed


def upgrade() -> None:
    merge_duplicates(op.get_bind())
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.create_index(INDEX, list(KEY), unique=True)


def downgrade() -> None:
    # The merged rows are not split again: they recorded one machine, and the kept row bills all of it.
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.drop_index(INDEX)
