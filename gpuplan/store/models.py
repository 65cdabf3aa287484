"""SQLAlchemy 2.0 ORM models for everything gpuplan records.

The schema covers the whole mission up front (runs, instances, events, benchmarks, calibrations, budgets,
schedules and their fires, leases, price snapshots and offers) so later features extend it rather than rewrite
it. It changes only through an Alembic revision in migrations/versions; tests/unit/store/test_store_migrations.py checks
that these models and the migrations agree.

Rules that keep the books honest:
- cost is never a stored free-typed number: it is derived from instance rows (price at launch x billed
  seconds); `Run.est_cost_usd` is the *estimate*, kept for estimate-vs-actual;
- money is Numeric/Decimal; times are aware UTC (see gpuplan.store.types);
- every state change of a run is also an append-only Event row.
"""

from __future__ import annotations

import datetime as dt
import secrets
from decimal import Decimal

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from gpuplan.store.types import Money, UTCDateTime, utcnow

# Deterministic constraint names: Alembic (and SQLite batch mode) can only alter what it can name.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class RunState:
    """The states a run moves through. Strings, not a DB enum, so adding one needs no schema change."""

    PENDING = "pending"  # recorded, nothing started yet (the row exists BEFORE any provider call)
    PROVISIONING = "provisioning"  # provider asked for machines
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    STOPPED = "stopped"  # the user stopped it
    CAPPED = "capped"  # gpuplan stopped it: budget, max_hours or deadline
    LOST = "lost"  # the machines vanished and gpuplan cannot tell how the job ended

    LIVE = frozenset({PENDING, PROVISIONING, RUNNING})
    FINAL = frozenset({SUCCEEDED, FAILED, STOPPED, CAPPED, LOST})


def new_run_id() -> str:
    """A short, unique, URL- and tag-safe run id (`r-` + 10 hex digits); also the cloud idempotency token."""
    return "r-" + secrets.token_hex(5)


class Run(Base):
    """One launch of a job spec: what was asked, what was estimated, and what happened."""

    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True, default=new_run_id)
    name: Mapped[str] = mapped_column(String(200))
    project: Mapped[str | None] = mapped_column(String(200), index=True)
    user: Mapped[str | None] = mapped_column(String(200))
    provider: Mapped[str] = mapped_column(String(50))
    state: Mapped[str] = mapped_column(String(20), default=RunState.PENDING, index=True)
    state_reason: Mapped[str | None] = mapped_column(Text)
    exit_code: Mapped[int | None] = mapped_column(Integer)

    # The spec exactly as launched (secrets are names only, never values) and its sha256.
    spec_text: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String(64))

    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    started_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)

    # The offer chosen at launch.
    cloud: Mapped[str | None] = mapped_column(String(20))
    region: Mapped[str | None] = mapped_column(String(50))
    zone: Mapped[str | None] = mapped_column(String(50))
    instance_type: Mapped[str | None] = mapped_column(String(100))
    gpu: Mapped[str | None] = mapped_column(String(50))
    gpus_per_node: Mapped[float | None] = mapped_column(Float)
    nodes: Mapped[int] = mapped_column(Integer, default=1)
    spot: Mapped[bool] = mapped_column(Boolean, default=False)

    # The estimate at launch (kept for estimate-vs-actual and calibration).
    params: Mapped[int | None] = mapped_column(BigInteger)
    total_tokens: Mapped[int | None] = mapped_column(BigInteger)
    est_hours: Mapped[float | None] = mapped_column(Float)
    est_cost_usd: Mapped[Decimal | None] = mapped_column(Money)
    est_tokens_per_s: Mapped[float | None] = mapped_column(Float)
    estimate_json: Mapped[str | None] = mapped_column(Text)

    # Limits (from the spec; the budget gate also consults the budgets table).
    budget_usd: Mapped[Decimal | None] = mapped_column(Money)
    max_hours: Mapped[float | None] = mapped_column(Float)
    deadline_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)
    # The most the run can spend (fail-safe hours x price x nodes), reserved against every covering budget when
    # it was recorded (gpuplan.launching.reserve); None: recorded before reservations, or no cap bounds it.
    reserved_usd: Mapped[Decimal | None] = mapped_column(Money)

    # The process that recorded the run: a run left pending/provisioning by a dead launcher settles at once.
    launcher_host: Mapped[str | None] = mapped_column(String(255))
    launcher_pid: Mapped[int | None] = mapped_column(Integer)
    launcher_started: Mapped[int | None] = mapped_column(BigInteger)  # its start, clock ticks since boot

    # Measured from the job's metrics.
    tokens_done: Mapped[int | None] = mapped_column(BigInteger)
    tokens_per_s: Mapped[float | None] = mapped_column(Float)
    measured_mfu: Mapped[float | None] = mapped_column(Float)

    # Where the run's logs and metrics live (a local folder, or the cloud's storage URL).
    run_dir: Mapped[str | None] = mapped_column(Text)
    schedule_id: Mapped[int | None] = mapped_column(ForeignKey("schedules.id", ondelete="SET NULL"))

    instances: Mapped[list[InstanceRow]] = relationship(
        back_populates="run", cascade="all, delete-orphan", order_by="InstanceRow.id"
    )
    events: Mapped[list[Event]] = relationship(back_populates="run", order_by="Event.id")

    def __init__(self, **kwargs: object) -> None:
        # The id exists before the first flush: it is the idempotency token handed to providers, and the
        # run row must be recorded under it BEFORE any cloud call.
        kwargs.setdefault("id", new_run_id())
        super().__init__(**kwargs)


class InstanceRow(Base):
    """One machine (or local process group, or Slurm allocation) billed to a run.

    cost = price_per_hour x billed seconds, where billed seconds = max(terminated_at - launched_at,
    min_billed_seconds) and a still-running instance accrues up to now.

    One row per machine of a run: the unique index lets only one of two processes that adopt the same machine
    at once record it (migration 0002 says why the run is part of the key).
    """

    __tablename__ = "instances"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    provider: Mapped[str] = mapped_column(String(50))
    provider_instance_id: Mapped[str] = mapped_column(String(200), index=True)
    cloud: Mapped[str] = mapped_column(String(20))
    region: Mapped[str | None] = mapped_column(String(50))
    zone: Mapped[str | None] = mapped_column(String(50))
    instance_type: Mapped[str | None] = mapped_column(String(100))
    gpu: Mapped[str | None] = mapped_column(String(50))
    gpu_count: Mapped[float] = mapped_column(Float, default=0)
    spot: Mapped[bool] = mapped_column(Boolean, default=False)
    node_rank: Mapped[int] = mapped_column(Integer, default=0)
    price_per_hour: Mapped[Decimal] = mapped_column(Money)
    min_billed_seconds: Mapped[int] = mapped_column(Integer, default=0)
    state: Mapped[str] = mapped_column(String(30), default="pending")
    launched_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    terminated_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime, index=True)

    run: Mapped[Run] = relationship(back_populates="instances")

    __table_args__ = (Index("uq_instances_run_machine", "run_id", "provider", "provider_instance_id", unique=True),)


class Event(Base):
    """An append-only record of something that happened: a state change, a launch attempt, a cap, a skip."""

    __tablename__ = "events"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, index=True)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    schedule_id: Mapped[int | None] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(50))
    message: Mapped[str] = mapped_column(Text, default="")
    data_json: Mapped[str | None] = mapped_column(Text)

    run: Mapped[Run | None] = relationship(back_populates="events")


class Benchmark(Base):
    """One `gpuplan bench` measurement: real training steps of a model on a device."""

    __tablename__ = "benchmarks"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    host: Mapped[str | None] = mapped_column(String(200))
    device: Mapped[str] = mapped_column(String(50))
    device_name: Mapped[str | None] = mapped_column(String(200))
    gpu: Mapped[str | None] = mapped_column(String(50), index=True)
    model_name: Mapped[str | None] = mapped_column(String(200))
    model_signature: Mapped[str] = mapped_column(String(200), index=True)
    params: Mapped[int | None] = mapped_column(BigInteger)
    layers: Mapped[int | None] = mapped_column(Integer)
    precision: Mapped[str] = mapped_column(String(10))
    seq_len: Mapped[int] = mapped_column(Integer)
    micro_batch: Mapped[int] = mapped_column(Integer)
    steps: Mapped[int] = mapped_column(Integer)
    compiled: Mapped[bool] = mapped_column(Boolean, default=False)
    tokens_per_s: Mapped[float] = mapped_column(Float)
    samples_per_s: Mapped[float | None] = mapped_column(Float)
    step_time_p50_s: Mapped[float | None] = mapped_column(Float)
    step_time_p90_s: Mapped[float | None] = mapped_column(Float)
    achieved_tflops: Mapped[float | None] = mapped_column(Float)
    peak_tflops: Mapped[float | None] = mapped_column(Float)
    mfu: Mapped[float | None] = mapped_column(Float)
    peak_memory_gb: Mapped[float | None] = mapped_column(Float)
    torch_version: Mapped[str | None] = mapped_column(String(50))
    config_json: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))


class Calibration(Base):
    """An MFU learned from a finished run, per (GPU type, model-size bucket); `estimate` uses the latest."""

    __tablename__ = "calibrations"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    gpu: Mapped[str] = mapped_column(String(50))
    params_bucket: Mapped[str] = mapped_column(String(20))
    mfu: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer, default=1)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))

    __table_args__ = (Index("ix_calibrations_gpu_bucket", "gpu", "params_bucket"),)


class Budget(Base):
    """A spending cap: `amount_usd` per period (month, week or total), optionally per project or clouds."""

    __tablename__ = "budgets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    amount_usd: Mapped[Decimal] = mapped_column(Money)
    period: Mapped[str] = mapped_column(String(10))
    project: Mapped[str | None] = mapped_column(String(200))
    clouds: Mapped[str | None] = mapped_column(String(200))  # comma-separated, None = every cloud
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)


class Schedule(Base):
    """A job spec copied into the store with a cron expression; the scheduler fires it."""

    __tablename__ = "schedules"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    cron: Mapped[str] = mapped_column(String(100))
    tz: Mapped[str] = mapped_column(String(64), default="UTC")
    spec_text: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String(64))
    spec_path: Mapped[str | None] = mapped_column(Text)
    paused: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow, onupdate=utcnow)
    last_fire_at: Mapped[dt.datetime | None] = mapped_column(UTCDateTime)

    fires: Mapped[list[ScheduleFire]] = relationship(
        back_populates="schedule", cascade="all, delete-orphan", order_by="ScheduleFire.fire_at"
    )


class ScheduleFire(Base):
    """One due time of a schedule and what became of it; the unique key makes double-firing impossible."""

    __tablename__ = "schedule_fires"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    schedule_id: Mapped[int] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    fire_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)
    fired_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    outcome: Mapped[str] = mapped_column(String(20))  # launched | skipped | failed
    reason: Mapped[str | None] = mapped_column(Text)
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="SET NULL"))

    schedule: Mapped[Schedule] = relationship(back_populates="fires")

    __table_args__ = (UniqueConstraint("schedule_id", "fire_at"),)


class Lease(Base):
    """A named lease with an expiry, so two schedulers (or watchers) on one database never both act."""

    __tablename__ = "leases"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    holder: Mapped[str] = mapped_column(String(200))
    acquired_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[dt.datetime] = mapped_column(UTCDateTime)


class PriceSnapshot(Base):
    """One load of prices: the shipped snapshot or a live refresh of one cloud."""

    __tablename__ = "price_snapshots"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cloud: Mapped[str] = mapped_column(String(20), index=True)
    source: Mapped[str] = mapped_column(String(200))
    fetched_at: Mapped[dt.datetime] = mapped_column(UTCDateTime, default=utcnow)
    offer_count: Mapped[int] = mapped_column(Integer, default=0)
    complete: Mapped[bool] = mapped_column(Boolean, default=False)

    offers: Mapped[list[PriceOffer]] = relationship(
        back_populates="snapshot", cascade="all, delete-orphan", passive_deletes=True
    )


class PriceOffer(Base):
    """One GPU offer (instance type in a zone) of a price snapshot, in the normalised offer schema."""

    __tablename__ = "price_offers"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    snapshot_id: Mapped[int] = mapped_column(ForeignKey("price_snapshots.id", ondelete="CASCADE"), index=True)
    cloud: Mapped[str] = mapped_column(String(20))
    region: Mapped[str] = mapped_column(String(50))
    zone: Mapped[str | None] = mapped_column(String(50))
    instance_type: Mapped[str] = mapped_column(String(100))
    gpu: Mapped[str] = mapped_column(String(50), index=True)
    gpu_count: Mapped[float] = mapped_column(Float)
    gpu_memory_gb: Mapped[float | None] = mapped_column(Float)
    vcpus: Mapped[float | None] = mapped_column(Float)
    memory_gb: Mapped[float | None] = mapped_column(Float)
    price_per_hour: Mapped[Decimal | None] = mapped_column(Money)
    spot_price_per_hour: Mapped[Decimal | None] = mapped_column(Money)
    arch: Mapped[str | None] = mapped_column(String(20))

    snapshot: Mapped[PriceSnapshot] = relationship(back_populates="offers")
