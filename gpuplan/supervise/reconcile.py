"""Compare what the clouds run with what the books say: the "no machine gpuplan does not know about" check.

Two kinds of disagreement:
- **orphan**: a live machine carrying gpuplan's run tag that the database does not consider live (no open
  instance row of a live run). A CLI killed between RunInstances and its database commit, a teardown that
  crashed, a run someone deleted: all leave orphans, and orphans cost money. `--terminate` ends them.
- **missing**: an open instance row (no `terminated_at`) whose machine the provider reports gone. The books
  still accrue cost for it until the watch loop (or a human) closes it.

A machine the books do not know yet is not always an orphan: a launch creates its machine first and records the
instance row a moment later, so a `reconcile --terminate` from cron at that moment would kill a legitimate job.
Two rules spare such machines (they are reported, never terminated):
- **in-flight**: its run-id tag names a run the database holds in a launching state (pending, provisioning).
  The run row is committed before any provider call (gpuplan.launching.start), so this is a launch of a known run,
  whatever its age: the launch records it, or, if the launching CLI died, `gpuplan watch` adopts it. Once the
  run is final (failed, stopped, ...) no launch of it can be in flight, and its machine is an orphan.
- **young**: any other unknown machine created less than the grace period ago (the provider's own creation
  time: AWS LaunchTime, GCE creationTimestamp, Slurm submit time, the local process start). This covers what the
  run state cannot: a run recorded in another database, a spot relaunch of a running run. A grace of zero
  turns the rule off.

Provider-agnostic: every provider that can list its tagged machines takes part; one that cannot (not
configured, no credentials) is reported as skipped rather than failing the whole check.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplan.providers.base import Instance, InstanceState, Provider, ProviderError
from gpuplan.store.models import RunState
from gpuplan.store.types import as_utc

ORPHAN = "orphan"
MISSING = "missing"
IN_FLIGHT = "in-flight"  # its run is recorded and still launching: never terminated
YOUNG = "young"  # unknown, but created within the grace period: left for a later check
SPARED = frozenset({IN_FLIGHT, YOUNG})
LAUNCHING = frozenset({RunState.PENDING, RunState.PROVISIONING})
DEFAULT_GRACE = dt.timedelta(minutes=15)

RunStates = Callable[[Collection[str]], Mapping[str, str]]  # run ids -> the states of those the database holds


@dataclass(frozen=True)
class Finding:
    """One disagreement between a cloud and the database (the JSON row of `gpuplan reconcile`)."""

    cloud: str
    region: str | None
    instance_id: str
    run_id: str | None
    state: str
    kind: str
    provider: str = ""
    age_s: int | None = None  # seconds since the provider created it (None: not known or not asked)
    why: str | None = None  # for machines the books do not know: why it is an orphan, or why it is spared

    def as_dict(self) -> dict[str, Any]:
        return {"cloud": self.cloud, "region": self.region, "instance_id": self.instance_id,
                "run_id": self.run_id, "state": self.state, "kind": self.kind, "age_s": self.age_s,
                "why": self.why}


@dataclass(frozen=True)
class Policy:
    """What decides whether a machine the books do not know is an orphan (see the module docstring).

    `run_states` is asked once per provider, with the run ids the unknown machines' tags carry; `now` is fixed
    only by tests (default: the clock when the provider is checked).
    """

    grace: dt.timedelta = DEFAULT_GRACE
    run_states: RunStates = lambda run_ids: {}
    now: dt.datetime | None = None


def classify(inst: Instance, run_state: str | None, grace: dt.timedelta,
             now: dt.datetime) -> tuple[str, int | None, str]:
    """(kind, age in seconds, why) for a live tagged machine the books do not consider live.

    The run's state comes first because it is exact: a launching run's machine is in flight at any age, a
    final run's machine is an orphan at any age. Only when the run says nothing does the machine's age decide;
    a machine whose provider does not say when it was created is spared while a grace is asked for, since
    killing a job is the mistake that cannot be undone.
    """
    age, age_s = age_since(inst.created_at or inst.launched_at, now)
    run = f"run {inst.run_id}"
    if run_state in LAUNCHING:
        return IN_FLIGHT, age_s, f"{run} is {run_state} (its launch records it; if that died, `gpuplan watch` does)"
    if run_state in RunState.FINAL:
        return ORPHAN, age_s, f"{run} is {run_state}"
    if run_state is None:
        books = f"no {run} in the database" if inst.run_id else "no run id tag"
    else:
        books = f"{run} is {run_state} without an instance row for this machine"
    return grace_verdict(books, age, age_s, grace, undated="the provider does not say when it was created")


def age_since(created: dt.datetime | None, now: dt.datetime) -> tuple[dt.timedelta | None, int | None]:
    """How old a cloud resource is (naive times are UTC, a clock skew into the future counts as 0), and in
    whole seconds; (None, None) when the cloud does not say when it was made."""
    if created is None:
        return None, None
    age = max(now - as_utc(created), dt.timedelta(0))
    return age, int(age.total_seconds())


def grace_verdict(books: str, age: dt.timedelta | None, age_s: int | None, grace: dt.timedelta, *,
                  undated: str) -> tuple[str, int | None, str]:
    """The age rule for a resource the books cannot vouch for (machines and secrets alike): spared as young while
    it is younger than the grace, or undated while a grace is asked for (deleting is the mistake that cannot be
    undone); otherwise an orphan. `books` says what the database knows, `undated` why the age is unknown."""
    if grace > dt.timedelta(0):
        if age is None:
            return YOUNG, None, f"{books}; {undated} (--grace 0 ends it)"
        if age < grace:
            return YOUNG, age_s, f"{books}; younger than the {format_age(grace)} grace"
    return ORPHAN, age_s, books


def format_age(age: dt.timedelta) -> str:
    """`45s`, `12m`, `3h05m`, `2d04h`: short enough for a table column."""
    seconds = int(age.total_seconds())
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m"
    if seconds < 86400:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 86400}d{seconds % 86400 // 3600:02d}h"


@dataclass(frozen=True)
class OpenRow:
    """An instance row with no `terminated_at`; `run_live` says whether its run is still live (not final).

    The database considers a machine live only if both hold: an open row of a finished run means a teardown
    that did not complete, so a machine still running behind it is an orphan.
    """

    provider: str
    instance_id: str
    run_id: str
    region: str | None
    run_live: bool = True


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # provider -> why it could not be checked
    checked: list[str] = field(default_factory=list)

    @property
    def orphans(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == ORPHAN]

    @property
    def missing(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == MISSING]

    @property
    def spared(self) -> list[Finding]:
        return [f for f in self.findings if f.kind in SPARED]


def compare(provider: Provider, open_rows: Sequence[OpenRow], policy: Policy | None = None) -> list[Finding]:
    """Findings for one provider: its tagged live machines vs the database's open rows for it."""
    policy = policy or Policy()
    tagged = [i for i in provider.list_tagged() if i.state not in InstanceState.GONE]
    known = {r.instance_id for r in open_rows if r.run_live}
    unknown = [inst for inst in tagged if inst.instance_id not in known]
    states = policy.run_states({i.run_id for i in unknown if i.run_id}) if unknown else {}
    now = policy.now or dt.datetime.now(dt.timezone.utc)
    findings = []
    for inst in unknown:
        kind, age_s, why = classify(inst, states.get(inst.run_id or ""), policy.grace, now)
        findings.append(_finding(provider, inst, kind, age_s=age_s, why=why))
    tagged_ids = {i.instance_id for i in tagged}
    unseen = [r for r in open_rows if r.instance_id not in tagged_ids]
    if unseen:
        described = {i.instance_id: i for i in provider.describe([r.instance_id for r in unseen])}
        for row in unseen:
            seen = described.get(row.instance_id)
            if seen is None or seen.state in InstanceState.GONE:
                findings.append(Finding(cloud=provider.cloud, region=(seen.region if seen else None) or row.region,
                                        instance_id=row.instance_id, run_id=row.run_id,
                                        state=seen.state if seen else InstanceState.TERMINATED, kind=MISSING,
                                        provider=provider.name,
                                        why="the books count it running; the provider reports it gone"))
    return findings


def _finding(provider: Provider, inst: Instance, kind: str, *, age_s: int | None, why: str) -> Finding:
    return Finding(cloud=inst.cloud or provider.cloud, region=inst.region, instance_id=inst.instance_id,
                   run_id=inst.run_id, state=inst.state, kind=kind, provider=provider.name, age_s=age_s, why=why)


def configure_provider(name: str, regions: Sequence[str]) -> Provider:
    """Build a provider for reconcile and hand it the regions to search (`Provider.include_regions`)."""
    from gpuplan.providers.registry import make_provider

    provider = make_provider(name)
    provider.include_regions(regions)
    return provider


def reconcile(
    provider_names: Iterable[str],
    open_rows: Sequence[OpenRow],
    regions_of: Callable[[str], Sequence[str]],
    *,
    build: Callable[[str, Sequence[str]], Provider] = configure_provider,
    policy: Policy | None = None,
) -> Report:
    """Check each named provider; a provider that cannot be built or listed is skipped with its reason."""
    report = Report()
    for name in provider_names:
        try:
            provider = build(name, regions_of(name))
            rows = [r for r in open_rows if r.provider == name]
            report.findings.extend(compare(provider, rows, policy))
            report.checked.append(name)
        except (ProviderError, NotImplementedError) as exc:
            report.skipped[name] = str(exc)
    return report


def terminate_orphans(findings: Sequence[Finding], regions_of: Callable[[str], Sequence[str]], *,
                      build: Callable[[str, Sequence[str]], Provider] = configure_provider) -> list[str]:
    """End every orphan (grouped by provider; in-flight and young machines are never among them); returns the ids
    asked to terminate."""
    ended: list[str] = []
    by_provider: dict[str, list[Finding]] = {}
    for f in findings:
        if f.kind == ORPHAN:
            by_provider.setdefault(f.provider or f.cloud, []).append(f)
    for name, items in by_provider.items():
        regions = sorted({*regions_of(name), *(f.region for f in items if f.region)})
        provider = build(name, regions)
        ids = [f.instance_id for f in items]
        provider.terminate(ids)
        ended.extend(ids)
    return ended
