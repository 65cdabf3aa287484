"""initial schema: runs, instances, events, benchmarks, budgets, schedules, prices

The whole mission's tables at once, so later revisions extend rather than rewrite. Timestamps are
DateTime(timezone=True) (gpuplan.store.types.UTCDateTime stores UTC in them); money is Numeric(16, 6).

Revision ID: 0001
Revises: 
Create Date: 2026-11-22 01:55:01.857692
"""
from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('budgets',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('amount_usd', sa.Numeric(precision=16, scale=6), nullable=False),
    sa.Column('period', sa.String(length=10), nullable=False),
    sa.Column('project', sa.String(length=200), nullable=True),
    sa.Column('clouds', sa.String(length=200), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_budgets')),
    sa.UniqueConstraint('name', name=op.f('uq_budgets_name'))
    )
    op.create_table('leases',
    sa.Column('name', sa.String(length=100), nullable=False),
    sa.Column('holder', sa.String(length=200), nullable=False),
    sa.Column('acquired_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_leases'))
    )
    op.create_table('price_snapshots',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('cloud', sa.String(length=20), nullable=False),
    sa.Column('source', sa.String(length=200), nullable=False),
    sa.Column('fetched_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('offer_count', sa.Integer(), nullable=False),
    sa.Column('complete', sa.Boolean(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_price_snapshots'))
    )
    with op.batch_alter_table('price_snapshots', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_price_snapshots_cloud'), ['cloud'], unique=False)

    op.create_table('schedules',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('cron', sa.String(length=100), nullable=False),
    sa.Column('tz', sa.String(length=64), nullable=False),
    sa.Column('spec_text', sa.Text(), nullable=False),
    sa.Column('spec_hash', sa.String(length=64), nullable=False),
    sa.Column('spec_path', sa.Text(), nullable=True),
    sa.Column('paused', sa.Boolean(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_fire_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedules')),
    sa.UniqueConstraint('name', name=op.f('uq_schedules_name'))
    )
    op.create_table('price_offers',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('snapshot_id', sa.Integer(), nullable=False),
    sa.Column('cloud', sa.String(length=20), nullable=False),
    sa.Column('region', sa.String(length=50), nullable=False),
    sa.Column('zone', sa.String(length=50), nullable=True),
    sa.Column('instance_type', sa.String(length=100), nullable=False),
    sa.Column('gpu', sa.String(length=50), nullable=False),
    sa.Column('gpu_count', sa.Float(), nullable=False),
    sa.Column('gpu_memory_gb', sa.Float(), nullable=True),
    sa.Column('vcpus', sa.Float(), nullable=True),
    sa.Column('memory_gb', sa.Float(), nullable=True),
    sa.Column('price_per_hour', sa.Numeric(precision=16, scale=6), nullable=True),
    sa.Column('spot_price_per_hour', sa.Numeric(precision=16, scale=6), nullable=True),
    sa.Column('arch', sa.String(length=20), nullable=True),
    sa.ForeignKeyConstraint(['snapshot_id'], ['price_snapshots.id'], name=op.f('fk_price_offers_snapshot_id_price_snapshots'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_price_offers'))
    )
    with op.batch_alter_table('price_offers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_price_offers_gpu'), ['gpu'], unique=False)
        batch_op.create_index(batch_op.f('ix_price_offers_snapshot_id'), ['snapshot_id'], unique=False)

    op.create_table('runs',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('project', sa.String(length=200), nullable=True),
    sa.Column('user', sa.String(length=200), nullable=True),
    sa.Column('provider', sa.String(length=50), nullable=False),
    sa.Column('state', sa.String(length=20), nullable=False),
    sa.Column('state_reason', sa.Text(), nullable=True),
    sa.Column('exit_code', sa.Integer(), nullable=True),
    sa.Column('spec_text', sa.Text(), nullable=False),
    sa.Column('spec_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('ended_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('updated_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('cloud', sa.String(length=20), nullable=True),
    sa.Column('region', sa.String(length=50), nullable=True),
    sa.Column('zone', sa.String(length=50), nullable=True),
    sa.Column('instance_type', sa.String(length=100), nullable=True),
    sa.Column('gpu', sa.String(length=50), nullable=True),
    sa.Column('gpus_per_node', sa.Float(), nullable=True),
    sa.Column('nodes', sa.Integer(), nullable=False),
    sa.Column('spot', sa.Boolean(), nullable=False),
    sa.Column('params', sa.BigInteger(), nullable=True),
    sa.Column('total_tokens', sa.BigInteger(), nullable=True),
    sa.Column('est_hours', sa.Float(), nullable=True),
    sa.Column('est_cost_usd', sa.Numeric(precision=16, scale=6), nullable=True),
    sa.Column('est_tokens_per_s', sa.Float(), nullable=True),
    sa.Column('estimate_json', sa.Text(), nullable=True),
    sa.Column('budget_usd', sa.Numeric(precision=16, scale=6), nullable=True),
    sa.Column('max_hours', sa.Float(), nullable=True),
    sa.Column('deadline_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('tokens_done', sa.BigInteger(), nullable=True),
    sa.Column('tokens_per_s', sa.Float(), nullable=True),
    sa.Column('measured_mfu', sa.Float(), nullable=True),
    sa.Column('run_dir', sa.Text(), nullable=True),
    sa.Column('schedule_id', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['schedule_id'], ['schedules.id'], name=op.f('fk_runs_schedule_id_schedules'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_runs'))
    )
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_runs_created_at'), ['created_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_project'), ['project'], unique=False)
        batch_op.create_index(batch_op.f('ix_runs_state'), ['state'], unique=False)

    op.create_table('benchmarks',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('host', sa.String(length=200), nullable=True),
    sa.Column('device', sa.String(length=50), nullable=False),
    sa.Column('device_name', sa.String(length=200), nullable=True),
    sa.Column('gpu', sa.String(length=50), nullable=True),
    sa.Column('model_name', sa.String(length=200), nullable=True),
    sa.Column('model_signature', sa.String(length=200), nullable=False),
    sa.Column('params', sa.BigInteger(), nullable=True),
    sa.Column('layers', sa.Integer(), nullable=True),
    sa.Column('precision', sa.String(length=10), nullable=False),
    sa.Column('seq_len', sa.Integer(), nullable=False),
    sa.Column('micro_batch', sa.Integer(), nullable=False),
    sa.Column('steps', sa.Integer(), nullable=False),
    sa.Column('compiled', sa.Boolean(), nullable=False),
    sa.Column('tokens_per_s', sa.Float(), nullable=False),
    sa.Column('samples_per_s', sa.Float(), nullable=True),
    sa.Column('step_time_p50_s', sa.Float(), nullable=True),
    sa.Column('step_time_p90_s', sa.Float(), nullable=True),
    sa.Column('achieved_tflops', sa.Float(), nullable=True),
    sa.Column('peak_tflops', sa.Float(), nullable=True),
    sa.Column('mfu', sa.Float(), nullable=True),
    sa.Column('peak_memory_gb', sa.Float(), nullable=True),
    sa.Column('torch_version', sa.String(length=50), nullable=True),
    sa.Column('config_json', sa.Text(), nullable=True),
    sa.Column('run_id', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_benchmarks_run_id_runs'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_benchmarks'))
    )
    with op.batch_alter_table('benchmarks', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_benchmarks_gpu'), ['gpu'], unique=False)
        batch_op.create_index(batch_op.f('ix_benchmarks_model_signature'), ['model_signature'], unique=False)

    op.create_table('calibrations',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('gpu', sa.String(length=50), nullable=False),
    sa.Column('params_bucket', sa.String(length=20), nullable=False),
    sa.Column('mfu', sa.Float(), nullable=False),
    sa.Column('samples', sa.Integer(), nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_calibrations_run_id_runs'), ondelete='SET NULL'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_calibrations'))
    )
    with op.batch_alter_table('calibrations', schema=None) as batch_op:
        batch_op.create_index('ix_calibrations_gpu_bucket', ['gpu', 'params_bucket'], unique=False)

    op.create_table('events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=True),
    sa.Column('schedule_id', sa.Integer(), nullable=True),
    sa.Column('kind', sa.String(length=50), nullable=False),
    sa.Column('message', sa.Text(), nullable=False),
    sa.Column('data_json', sa.Text(), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_events_run_id_runs'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['schedule_id'], ['schedules.id'], name=op.f('fk_events_schedule_id_schedules'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events'))
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_events_at'), ['at'], unique=False)
        batch_op.create_index(batch_op.f('ix_events_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_events_schedule_id'), ['schedule_id'], unique=False)

    op.create_table('instances',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('provider', sa.String(length=50), nullable=False),
    sa.Column('provider_instance_id', sa.String(length=200), nullable=False),
    sa.Column('cloud', sa.String(length=20), nullable=False),
    sa.Column('region', sa.String(length=50), nullable=True),
    sa.Column('zone', sa.String(length=50), nullable=True),
    sa.Column('instance_type', sa.String(length=100), nullable=True),
    sa.Column('gpu', sa.String(length=50), nullable=True),
    sa.Column('gpu_count', sa.Float(), nullable=False),
    sa.Column('spot', sa.Boolean(), nullable=False),
    sa.Column('node_rank', sa.Integer(), nullable=False),
    sa.Column('price_per_hour', sa.Numeric(precision=16, scale=6), nullable=False),
    sa.Column('min_billed_seconds', sa.Integer(), nullable=False),
    sa.Column('state', sa.String(length=30), nullable=False),
    sa.Column('launched_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('terminated_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_instances_run_id_runs'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_instances'))
    )
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_instances_launched_at'), ['launched_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_instances_provider_instance_id'), ['provider_instance_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_instances_run_id'), ['run_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_instances_terminated_at'), ['terminated_at'], unique=False)

    op.create_table('schedule_fires',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('schedule_id', sa.Integer(), nullable=False),
    sa.Column('fire_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('fired_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('outcome', sa.String(length=20), nullable=False),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('run_id', sa.String(length=32), nullable=True),
    sa.ForeignKeyConstraint(['run_id'], ['runs.id'], name=op.f('fk_schedule_fires_run_id_runs'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['schedule_id'], ['schedules.id'], name=op.f('fk_schedule_fires_schedule_id_schedules'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_schedule_fires')),
    sa.UniqueConstraint('schedule_id', 'fire_at', name=op.f('uq_schedule_fires_schedule_id_fire_at'))
    )


def downgrade() -> None:
    op.drop_table('schedule_fires')
    with op.batch_alter_table('instances', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_instances_terminated_at'))
        batch_op.drop_index(batch_op.f('ix_instances_run_id'))
        batch_op.drop_index(batch_op.f('ix_instances_provider_instance_id'))
        batch_op.drop_index(batch_op.f('ix_instances_launched_at'))

    op.drop_table('instances')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_schedule_id'))
        batch_op.drop_index(batch_op.f('ix_events_run_id'))
        batch_op.drop_index(batch_op.f('ix_events_at'))

    op.drop_table('events')
    with op.batch_alter_table('calibrations', schema=None) as batch_op:
        batch_op.drop_index('ix_calibrations_gpu_bucket')

    op.drop_table('calibrations')
    with op.batch_alter_table('benchmarks', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_benchmarks_model_signature'))
        batch_op.drop_index(batch_op.f('ix_benchmarks_gpu'))

    op.drop_table('benchmarks')
    with op.batch_alter_table('runs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_runs_state'))
        batch_op.drop_index(batch_op.f('ix_runs_project'))
        batch_op.drop_index(batch_op.f('ix_runs_created_at'))

    op.drop_table('runs')
    with op.batch_alter_table('price_offers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_price_offers_snapshot_id'))
        batch_op.drop_index(batch_op.f('ix_price_offers_gpu'))

    op.drop_table('price_offers')
    op.drop_table('schedules')
    with op.batch_alter_table('price_snapshots', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_price_snapshots_cloud'))

    op.drop_table('price_snapshots')
    op.drop_table('leases')
    op.drop_table('budgets')
