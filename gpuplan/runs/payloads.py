"""The data each kind of event carries, one frozen dataclass per payload (gpuplan.runs.events writes and reads them).

The dataclass is the schema of the event's JSON: its field names are the stored keys, so rows written before the
payloads were typed read as they are. Money is Decimal (stored as its string, so nothing rounds through floats),
times are datetimes (stored as ISO strings), lists are tuples (a payload is a value). Every field has a default:
an older row that lacks a key, or holds a value of the wrong type, reads with that field at its default.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from decimal import Decimal


@dataclass(frozen=True)
class CreatedData:
    """A `created` event: the offer the run was recorded with (gpuplan.launching.record)."""

    provider: str | None = None
    instance_type: str | None = None
    region: str | None = None
    nodes: int | None = None
    est_hours: float | None = None


@dataclass(frozen=True)
class StateData:
    """A `state` event: one transition (gpuplan.runs.records.set_state)."""

    previous: str | None = None
    state: str | None = None
    reason: str | None = None
    exit_code: int | None = None


@dataclass(frozen=True)
class TimerData:
    """A timer's hours (None: no cap bounds it) and the cap that set them, with why: one cap of a fail-safe, or
    the fail-safe a failover placement's machines carry at their own price."""

    cap: str | None = None
    hours: float | None = None
    detail: str | None = None


@dataclass(frozen=True)
class FailSafeData:
    """A `failsafe` event, and the planned timer inside a launch plan (gpuplan.launching.failsafe.FailSafe)."""

    hours: float | None = None
    cap: str | None = None
    detail: str | None = None
    burn_usd_per_hour: Decimal | None = None
    budgets_skipped: bool = False
    notes: tuple[str, ...] = ()
    bounds: tuple[TimerData, ...] = ()
    generation: int | None = None  # a spot relaunch's (only on the `failsafe` event); None for the launch


@dataclass(frozen=True)
class PlannedPlacement:
    """One place a launch plan may start machines, at its price, with the timer they would carry there."""

    region: str | None = None
    zone: str | None = None  # None: the cloud chooses it
    instance_type: str | None = None
    price_per_hour: Decimal | None = None
    spot: bool | None = None  # None: the request's market
    failsafe: TimerData | None = None


@dataclass(frozen=True)
class LaunchPlanData:
    """A `launch_plan` event: where machines may appear (gpuplan.launching.launch_plan), before the provider call."""

    provider: str | None = None
    cloud: str | None = None
    regions: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()
    instance_types: tuple[str, ...] = ()
    placements: tuple[PlannedPlacement, ...] = ()
    host: str | None = None
    pid: int | None = None
    failsafe: FailSafeData | None = None  # the planned timer (gpuplan.launching.failsafe_store)
    generation: int | None = None  # a spot relaunch's; None for the launch


@dataclass(frozen=True)
class AttemptData:
    """A `launch_attempt` event: one failover placement tried and its outcome (gpuplan.launching.failover)."""

    attempt: int | None = None
    provider: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    spot: bool | None = None
    outcome: str | None = None
    code: str | None = None
    why: str | None = None  # the provider's (secret-free) message
    seconds: float | None = None
    instance_ids: tuple[str, ...] = ()
    blocked: str | None = None
    generation: int | None = None


@dataclass(frozen=True)
class LaunchFailedData:
    """A `launch_failed` event: the provider error that started no machine."""

    error: str | None = None
    code: str | None = None


@dataclass(frozen=True)
class MachinesData:
    """A `launched` or `terminated` event: the machines (provider instance ids) it concerns."""

    instances: tuple[str, ...] = ()


@dataclass(frozen=True)
class ViolationData:
    """One budget a forced launch went past (gpuplan.books.budgets.Violation)."""

    budget: str | None = None
    period: str | None = None
    amount_usd: Decimal | None = None
    spent_usd: Decimal | None = None
    reserved_usd: Decimal | None = None
    free_usd: Decimal | None = None
    est_cost_usd: Decimal | None = None


@dataclass(frozen=True)
class BudgetOverrideData:
    """A `budget_override` event: the budgets a launch was --force'd past (rows written before the payloads were
    typed hold the bare list of violations; they read as this)."""

    violations: tuple[ViolationData, ...] = ()


@dataclass(frozen=True)
class CappedData:
    """A `capped` event: the covering budget that ran out, and what it had spent of how much."""

    budget: str | None = None
    spent_usd: Decimal | None = None
    amount_usd: Decimal | None = None


@dataclass(frozen=True)
class CalibratedData:
    """A `calibrated` event: the calibration row the run's MFU went into (gpuplan.supervise.settle)."""

    calibration_id: int | None = None


@dataclass(frozen=True)
class SpotBilledData:
    """A `spot_billed` event: one spot machine re-priced from the cloud's history (gpuplan.supervise.spot_bill)."""

    instance: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    quoted_price_per_hour: Decimal | None = None
    billed_price_per_hour: Decimal | None = None
    quoted_cost_usd: Decimal | None = None
    billed_cost_usd: Decimal | None = None
    billed_seconds: Decimal | None = None
    price_steps: int | None = None
    source: str | None = None
    history_starts_late: bool = False


@dataclass(frozen=True)
class QuoteData:
    """The price an adopted machine was recorded at and where it came from (gpuplan.supervise.adopt_price)."""

    source: str | None = None  # cloud | launch_plan | run | catalog | none
    price_per_hour: Decimal | None = None
    detail: str | None = None


@dataclass(frozen=True)
class AdoptedData:
    """An `adopted` event: machines carrying the run's tag that no launch recorded (gpuplan.supervise.adopt)."""

    instances: tuple[str, ...] = ()
    launched_at: tuple[dt.datetime, ...] = ()
    unpriced: tuple[str, ...] = ()
    prices: dict[str, QuoteData] = field(default_factory=dict)


@dataclass(frozen=True)
class NoticeData:
    """The interruption notice a node's boot script recorded (gpuplan.supervise.resume.interruption_notice)."""

    node_rank: int | None = None
    cloud: str | None = None
    action: str | None = None
    noticed_at: str | None = None  # as the cloud's metadata said it


@dataclass(frozen=True)
class RelaunchData:
    """A `relaunch` or `relaunch_failed` event (gpuplan.supervise.relaunch)."""

    generation: int | None = None
    instances: tuple[str, ...] = ()
    resumed_from_step: int | None = None
    checkpoint_at: str | None = None
    lost_steps: int | None = None
    lost_seconds: float | None = None
    recovered: bool = False
    notice: NoticeData | None = None
    code: str | None = None  # a failed relaunch's provider error code


@dataclass(frozen=True)
class MergedRow:
    """One of the duplicate instance rows migration 0002 folded, as it read (the migration wrote each as text)."""

    id: str | None = None
    price_per_hour: Decimal | None = None
    min_billed_seconds: str | None = None
    state: str | None = None
    launched_at: dt.datetime | None = None
    terminated_at: dt.datetime | None = None


@dataclass(frozen=True)
class InstancesMergedData:
    """An `instances_merged` event (written by migration 0002 alone, which cannot import this module)."""

    kept: int | None = None
    removed: tuple[int, ...] = ()
    rows: tuple[MergedRow, ...] = ()
    merged: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class OrphanTerminatedData:
    """A `reconcile_terminated` event: a machine the books did not account for, ended (gpuplan.supervise.reconcile)."""

    cloud: str | None = None
    region: str | None = None
    instance_id: str | None = None
    run_id: str | None = None
    state: str | None = None
    kind: str | None = None
    age_s: int | None = None
    why: str | None = None


@dataclass(frozen=True)
class SecretDeletedData:
    """A `reconcile_secret_deleted` event: an orphan secret deleted, by name (never its value)."""

    resource: str | None = None
    cloud: str | None = None
    provider: str | None = None
    region: str | None = None
    secret: str | None = None
    run_id: str | None = None
    run_state: str | None = None
    kind: str | None = None
    age_s: int | None = None
    why: str | None = None
    action: str | None = None


@dataclass(frozen=True)
class ScheduleData:
    """A `schedule_added` event (all three set) or `schedule_updated` one (only what changed is set)."""

    cron: str | None = None
    tz: str | None = None
    spec_hash: str | None = None


@dataclass(frozen=True)
class ScheduleFireData:
    """A `schedule_launched`/`skipped`/`failed` event: the slot the fire was for."""

    fire_at: dt.datetime | None = None
