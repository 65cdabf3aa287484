"""One reconcile pass over the books and the clouds: which providers and regions to check, the comparison, adopting
the unknown machines of recorded runs, ending orphans and leftover run secrets, and recording each of those in the
database. The CLI parses the options, calls `run_reconcile` and renders the outcome; it holds no session.

Two decisions are the caller's and come in as callables: `confirm` (asked before anything is terminated or deleted;
it raises to abort) and `warn` (a provider that cannot be checked, a machine that cannot be adopted, a secret that
cannot be deleted: reported as they happen, never fatal).
"""

from __future__ import annotations

import datetime as dt
import fnmatch
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gpuplan.errors import GpuplanError, UserError
from gpuplan.runs.events import EventKind, new_event
from gpuplan.runs.payloads import OrphanTerminatedData, SecretDeletedData
from gpuplan.supervise.reconcile import Finding, OpenRow, Policy, Report

if TYPE_CHECKING:
    from gpuplan.providers.base import CloudSecret
    from gpuplan.store.db import Store
    from gpuplan.supervise.reconcile_secrets import SecretFinding

Notify = Callable[[str], None]


@dataclass(frozen=True)
class ReconcileRequest:
    """What the user asked for: providers (empty: every provider the books have runs on), region names or globs
    (empty: the recorded regions), the grace for unknown machines, and whether to end the orphans."""

    clouds: tuple[str, ...]
    regions: tuple[str, ...]
    grace: dt.timedelta
    terminate: bool


@dataclass
class ReconcileOutcome:
    """The pass's result, for rendering: machine rows and secret rows (the JSON rows), the comparison report, and
    the instance ids adopted. `names` is empty when the books have no runs and no provider was named."""

    names: list[str]
    report: Report
    rows: list[dict[str, Any]] = field(default_factory=list)
    secret_rows: list[dict[str, Any]] = field(default_factory=list)
    adopted: set[str] = field(default_factory=set)

    @property
    def spared(self) -> list[Finding]:
        """Spared machines still unaccounted for (an adopted one is in its run now)."""
        return [f for f in self.report.spared if f.instance_id not in self.adopted]


def run_reconcile(store: Store, db_url: str | None, request: ReconcileRequest, *, confirm: Notify,
                  warn: Notify) -> ReconcileOutcome:
    """Compare, adopt, and (with `request.terminate`) end orphans and leftover secrets, recording each act."""
    from gpuplan.supervise.reconcile import reconcile, terminate_orphans

    names, open_rows, recorded_regions = _books(store, request.clouds)
    wanted_regions = _expand_regions(request.regions, names, recorded_regions, db_url) if request.regions else {}

    def regions_of(name: str) -> list[str]:
        return wanted_regions.get(name) or sorted(recorded_regions.get(name, set()))

    policy = Policy(grace=request.grace, run_states=_run_states(store))
    report = reconcile(names, open_rows, regions_of, policy=policy)
    for name, why in report.skipped.items():
        warn(f"{name}: not checked: {why}")
    if request.clouds and not report.checked:
        raise GpuplanError("no provider could be checked: " + "; ".join(f"{k}: {v}"
                                                                         for k, v in report.skipped.items()))
    adopted = _adopt_unknown(store, report.findings, regions_of, warn)
    ended: set[str] = set()
    if request.terminate and report.orphans:
        confirm(f"Terminate {len(report.orphans)} orphan(s): {', '.join(f.instance_id for f in report.orphans)}?")
        ended = set(terminate_orphans(report.orphans, regions_of))
        _record_terminations(store, [f for f in report.orphans if f.instance_id in ended])
    rows = [{**f.as_dict(), "action": "terminated" if f.instance_id in ended else
             "adopted" if f.instance_id in adopted else None} for f in report.findings]
    secret_rows = _secrets(store, report.checked, regions_of, policy, terminate=request.terminate,
                           confirm=confirm, warn=warn)
    return ReconcileOutcome(names=names, report=report, rows=rows, secret_rows=secret_rows, adopted=adopted)


def _expand_regions(regions: tuple[str, ...], names: list[str], recorded: Mapping[str, set[str]],
                    db_url: str | None) -> dict[str, list[str]]:
    """Per provider, the regions `--regions` names: plain names as given, globs matched against the regions that
    cloud is known to have (its price catalog, plus where the books have runs). A glob that matches no region of
    any provider checked is bad input: searching nowhere would report "in agreement" and hide every orphan."""
    from gpuplan.catalog.gpu_names import KNOWN_CLOUDS, compile_region_patterns

    patterns = compile_region_patterns(",".join(regions))
    catalog_clouds = [n for n in names if n in KNOWN_CLOUDS]
    known: dict[str, set[str]] = {name: set(recorded.get(name, set())) for name in names}
    if catalog_clouds and any(_is_glob(p) for p in patterns):
        from gpuplan.catalog.catalog import Catalog

        for offer in Catalog.load(db_url, catalog_clouds).offers:
            known[offer.cloud].add(offer.region)
    expanded: dict[str, list[str]] = {}
    for name in names:
        chosen: list[str] = []
        for pattern in patterns:
            chosen += [pattern] if not _is_glob(pattern) else sorted(fnmatch.filter(known[name], pattern))
        expanded[name] = list(dict.fromkeys(chosen))
    for pattern in patterns:
        if _is_glob(pattern) and not any(fnmatch.filter(known[name], pattern) for name in names):
            raise UserError(f"--regions: {pattern!r} matches no region of {', '.join(names) or 'any provider'}")
    return expanded


def _is_glob(pattern: str) -> bool:
    return "*" in pattern or "?" in pattern


def _run_states(store: Store) -> Callable[[Collection[str]], Mapping[str, str]]:
    """The lookup reconcile asks for the states of the runs the unknown machines' tags name."""

    def states(run_ids: Collection[str]) -> Mapping[str, str]:
        from sqlalchemy import select

        from gpuplan.store.models import Run

        if not run_ids:
            return {}
        with store.session() as s:
            rows = s.execute(select(Run.id, Run.state).where(Run.id.in_(sorted(run_ids)))).all()
            return {run_id: state for run_id, state in rows}

    return states


def _books(store: Store, clouds: tuple[str, ...]) -> tuple[list[str], list[OpenRow], dict[str, set[str]]]:
    """The providers to check, the open instance rows, and the regions each provider has been used in."""
    from sqlalchemy import select

    from gpuplan.store.models import InstanceRow, Run, RunState
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.adopt import planned_regions

    with store.session() as s:
        providers = sorted(set(s.scalars(select(Run.provider).distinct())))
        rows = s.execute(select(InstanceRow.provider, InstanceRow.provider_instance_id, InstanceRow.run_id,
                                InstanceRow.region, Run.state)
                         .join(Run, Run.id == InstanceRow.run_id)
                         .where(InstanceRow.terminated_at.is_(None))).all()
        region_pairs: set[tuple[str, str | None]] = {
            (p, r) for p, r in s.execute(select(InstanceRow.provider, InstanceRow.region).distinct())}
        region_pairs |= {(p, r) for p, r in s.execute(select(Run.provider, Run.region).distinct())}
        region_pairs |= {(p, r) for p, regions in planned_regions(s, utcnow()).items() for r in regions}
    recorded: dict[str, set[str]] = {}
    for provider, region in region_pairs:
        if region:
            recorded.setdefault(provider, set()).add(region)
    open_rows = [OpenRow(provider=p, instance_id=i, run_id=r, region=reg, run_live=state in RunState.LIVE)
                 for p, i, r, reg, state in rows]
    names = list(dict.fromkeys(clouds)) if clouds else providers
    return names, open_rows, recorded


def _record_terminations(store: Store, findings: Sequence[Finding]) -> None:
    """Close the rows of terminated orphans that have one, and write an event per orphan of a known run."""
    from sqlalchemy import select

    from gpuplan.store.models import InstanceRow, Run
    from gpuplan.store.types import utcnow

    now = utcnow()
    with store.session() as s:
        for f in findings:
            for row in s.scalars(select(InstanceRow).where(InstanceRow.provider_instance_id == f.instance_id,
                                                        InstanceRow.terminated_at.is_(None))):
                row.terminated_at = now
                row.state = "terminated"
            run_id = f.run_id if f.run_id and s.get(Run, f.run_id) is not None else None
            s.add(new_event(EventKind.RECONCILE_TERMINATED,
                            f"orphan {f.instance_id} ({f.cloud} {f.region}) terminated by reconcile",
                            OrphanTerminatedData(**f.as_dict()), run_id=run_id))
        s.commit()


def _secrets(store: Store, checked: list[str], regions_of: Callable[[str], list[str]], policy: Policy, *,
             terminate: bool, confirm: Notify, warn: Notify) -> list[dict[str, Any]]:
    """Check the checked providers' secret stores for leftover run secrets; with `terminate` delete the orphans.

    A store that cannot be listed, or a secret that cannot be deleted, is a warning, never fatal: the machines'
    verdict stands. Rows carry names only (gpuplan.supervise.reconcile_secrets)."""
    from gpuplan.supervise.reconcile_secrets import check_secrets, delete_orphan_secrets

    found = check_secrets(checked, regions_of, policy)
    for name, reason in found.skipped.items():
        warn(f"{name}: secrets not checked: {reason}")
    outcome: dict[CloudSecret, str | None] = {}
    if terminate and found.orphans:
        confirm(f"Delete {len(found.orphans)} orphan secret(s): {', '.join(f.secret.name for f in found.orphans)}?")
        outcome = delete_orphan_secrets(found.orphans, regions_of)
        for secret, why in outcome.items():
            if why is not None:
                warn(f"{secret.provider}: could not delete secret {secret.name}: {why}")
        _record_secret_deletions(store, [f for f in found.orphans if f.secret in outcome
                                         and outcome[f.secret] is None])
    rows = []
    for f in found.findings:
        action = None
        if f.secret in outcome:
            why = outcome[f.secret]
            action = "deleted" if why is None else f"delete failed: {why}"
        rows.append(f.as_dict(action))
    return rows


def _record_secret_deletions(store: Store, findings: Sequence[SecretFinding]) -> None:
    """An event per deleted secret (its name, never its value), on its run when the database has it."""
    from gpuplan.store.models import Run

    with store.session() as s:
        for f in findings:
            run_id = f.secret.run_id if f.secret.run_id and s.get(Run, f.secret.run_id) is not None else None
            where = f" in {f.secret.region}" if f.secret.region else ""
            s.add(new_event(EventKind.RECONCILE_SECRET_DELETED,
                            f"orphan secret {f.secret.name} ({f.secret.provider}{where}) deleted by reconcile",
                            SecretDeletedData(**f.as_dict("deleted")), run_id=run_id))
        s.commit()


def _adopt_unknown(store: Store, findings: Sequence[Finding], regions_of: Callable[[str], list[str]],
                   warn: Notify) -> set[str]:
    """Record the unknown machines of recorded runs (gpuplan.supervise.adopt), unless their launch is still in
    flight: a launch killed before its commit leaves machines only reconcile (or stop, or watch) can give back to
    their run, and an orphan of a known run is billed to it from its real launch time. Returns the ids adopted."""
    from gpuplan.providers.base import Provider, ProviderError
    from gpuplan.store.models import Run
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.adopt import adopt, launch_in_flight
    from gpuplan.supervise.reconcile import MISSING, configure_provider

    by_run: dict[str, str] = {f.run_id: f.provider or f.cloud for f in findings if f.kind != MISSING and f.run_id}
    adopted: set[str] = set()
    providers: dict[str, Provider] = {}
    now = utcnow()
    with store.session() as s:
        for run_id, name in by_run.items():
            run = s.get(Run, run_id)
            if run is None or run.provider != name or launch_in_flight(run, now):
                continue
            if name not in providers:
                providers[name] = configure_provider(name, regions_of(name))
            try:
                rows = adopt(s, run, providers[name], now)
            except ProviderError as exc:
                warn(f"{name}: could not adopt the machines of run {run_id}: {exc}")
                continue
            adopted.update(row.provider_instance_id for row in rows)
            s.commit()
    return adopted
