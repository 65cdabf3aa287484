"""`gpuplan reconcile`: find machines gpuplan tagged but does not consider live, and rows whose machine is gone."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Collection, Mapping
from typing import Any

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, print_table, warn
from gpuplan.runs.events import EventKind


@click.command("reconcile")
@click.option("--cloud", "clouds", multiple=True, metavar="NAME[,NAME]",
              help="Provider to check (repeatable or comma-separated; e.g. aws,gcp). Default: every provider the "
                   "database has runs on.")
@click.option("--regions", "regions", multiple=True, metavar="PATTERN",
              help="Regions to search (repeatable or comma-separated); globs such as 'us-*' expand to the "
                   "cloud's regions in the price catalog and the books, and one that matches none is an error. "
                   "Default: the regions of recorded runs plus the SDK's default region.")
@click.option("--terminate", is_flag=True,
              help="Terminate every orphan machine and delete every orphan run secret found (asks first unless -y).")
@click.option("--grace", "grace_text", default="15m", show_default=True, metavar="DURATION",
              help="Spare unknown machines (and secrets of unknown runs) created less than this long ago (e.g. "
                   "30m, 2h); 0 turns it off. Machines of a run that is still launching are spared whatever this "
                   "says, and a live run's secrets are never touched.")
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON rows (cloud, region, instance_id, run_id, state, "
                                                     "kind, age_s, why, action); secret rows have resource: secret, "
                                                     "provider, secret, run_state instead of instance_id and state.")
@pass_app
def reconcile_cmd(app: AppContext, clouds: tuple[str, ...], regions: tuple[str, ...], terminate: bool,
                  grace_text: str, yes: bool, as_json: bool) -> None:
    """List orphans (tagged machines the database does not consider live) and missing machines (open rows whose
    machine is gone); with --terminate, end the orphans. Unknown machines of a recorded run are adopted (recorded
    in that run, billed from their launch time) unless its launch is still in flight. Leftover run secrets in the
    clouds' secret stores (AWS SSM /gpuplan/..., GCP Secret Manager gpuplan-...) of runs that are final or
    unknown are orphans too, and --terminate deletes them; a running run's secrets are never touched. Only names
    are shown, never values.

    \b
    A launch creates its machine a moment before it records it, so two kinds
    of unknown machine are spared (listed, never terminated):
      in-flight  its run-id tag names a run still pending or provisioning
                 whose launching gpuplan is still alive (or, on another host,
                 started less than 10 min ago); once that process is gone,
                 reconcile adopts the machine into its run instead
      young      any other unknown machine created less than --grace ago,
                 by the provider's own creation time
    """
    from gpuplan.supervise.reconcile import Policy, reconcile, terminate_orphans

    clouds = tuple(dict.fromkeys(c.strip() for raw in clouds for c in raw.split(",") if c.strip()))
    _check_names(clouds)
    grace = _parse_grace(grace_text)
    names, open_rows, recorded_regions = _books(app, clouds)
    wanted_regions = _expand_regions(regions, names, recorded_regions, app.db_url) if regions else {}

    def regions_of(name: str) -> list[str]:
        return wanted_regions.get(name) or sorted(recorded_regions.get(name, set()))

    if not names:
        note("no runs recorded and no --cloud given: nothing to reconcile")
    policy = Policy(grace=grace, run_states=_run_states(app))
    report = reconcile(names, open_rows, regions_of, policy=policy)
    for name, why in report.skipped.items():
        warn(f"{name}: not checked: {why}")
    if clouds and not report.checked:
        from gpuplan.errors import GpuplanError

        raise GpuplanError("no provider could be checked: " + "; ".join(f"{k}: {v}"
                                                                         for k, v in report.skipped.items()))
    adopted = _adopt_unknown(app, report.findings, regions_of)
    ended: set[str] = set()
    if terminate and report.orphans:
        ids = ", ".join(f.instance_id for f in report.orphans)
        if not yes:
            click.confirm(f"Terminate {len(report.orphans)} orphan(s): {ids}?", abort=True, err=True)
        ended = set(terminate_orphans(report.orphans, regions_of))
        _record_terminations(app, [f for f in report.orphans if f.instance_id in ended])
    rows = [{**f.as_dict(), "action": "terminated" if f.instance_id in ended else
             "adopted" if f.instance_id in adopted else None} for f in report.findings]
    secret_rows = _secrets(app, report.checked, regions_of, policy, terminate=terminate, yes=yes)
    if as_json:
        emit_json(rows + secret_rows)
        return
    if not rows and not secret_rows:
        note(f"in agreement: checked {', '.join(report.checked) or 'nothing'}; no orphans, nothing missing")
        return
    from gpuplan.supervise.reconcile import format_age

    if rows:
        print_table(["kind", "cloud", "region", "instance", "run", "state", "age", "action / why"],
                    [(r["kind"], r["cloud"], r["region"], r["instance_id"], r["run_id"], r["state"],
                      format_age(dt.timedelta(seconds=r["age_s"])) if r["age_s"] is not None else "",
                      r["action"] or r["why"] or "") for r in rows])
    spared = [f for f in report.spared if f.instance_id not in adopted]
    if spared:
        note(f"{len(spared)} spared: a launch may be about to record them (never terminated; "
             "see `gpuplan reconcile --help`)")
    if adopted:
        note(f"{len(adopted)} adopted: recorded in their runs, billed from their launch "
             "(a run still live keeps running: `gpuplan stop RUN` ends it)")
    if report.orphans and not terminate:
        note("run `gpuplan reconcile --terminate` to end the orphans")
    if secret_rows:
        _print_secrets(secret_rows)


def _parse_grace(text: str) -> dt.timedelta:
    """--grace as a timedelta; zero is allowed (it turns the age rule off), a typo is bad input."""
    from gpuplan.errors import UserError
    from gpuplan.units import parse_duration_hours

    try:
        return dt.timedelta(hours=parse_duration_hours(text, what="--grace", allow_zero=True))
    except ValueError as exc:
        raise UserError(str(exc)) from exc


def _expand_regions(regions: tuple[str, ...], names: list[str], recorded: Mapping[str, set[str]],
                    db_url: str | None) -> dict[str, list[str]]:
    """Per provider, the regions `--regions` names: plain names as given, globs matched against the regions that
    cloud is known to have (its price catalog, plus where the books have runs). A glob that matches no region of
    any provider checked is bad input: searching nowhere would report "in agreement" and hide every orphan."""
    import fnmatch

    from gpuplan.catalog.gpu_names import KNOWN_CLOUDS, compile_region_patterns
    from gpuplan.errors import UserError

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


def _run_states(app: AppContext) -> Callable[[Collection[str]], Mapping[str, str]]:
    """The lookup reconcile asks for the states of the runs the unknown machines' tags name."""

    def states(run_ids: Collection[str]) -> Mapping[str, str]:
        from sqlalchemy import select

        from gpuplan.store.models import Run

        if not run_ids:
            return {}
        with app.store.session() as s:
            rows = s.execute(select(Run.id, Run.state).where(Run.id.in_(sorted(run_ids)))).all()
            return {run_id: state for run_id, state in rows}

    return states


def _check_names(clouds: tuple[str, ...]) -> None:
    """A misspelt --cloud is bad input (exit 2) before anything is checked, not 'no provider could be checked'
    (exit 1), which reads as a cloud outage."""
    from gpuplan.errors import UserError
    from gpuplan.providers.registry import provider_names

    known = provider_names()
    for name in clouds:
        if name not in known:
            raise UserError(f"--cloud: unknown provider {name!r}; known: {', '.join(known)}")


def _books(app: AppContext, clouds: tuple[str, ...]) -> tuple[list[str], list, dict[str, set[str]]]:
    """The providers to check, the open instance rows, and the regions each provider has been used in."""
    from sqlalchemy import select

    from gpuplan.store.models import InstanceRow, Run, RunState
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.adopt import planned_regions
    from gpuplan.supervise.reconcile import OpenRow

    with app.store.session() as s:
        providers = sorted(set(s.scalars(select(Run.provider).distinct())))
        rows = s.execute(select(InstanceRow.provider, InstanceRow.provider_instance_id, InstanceRow.run_id,
                                InstanceRow.region, Run.state)
                         .join(Run, Run.id == InstanceRow.run_id)
                         .where(InstanceRow.terminated_at.is_(None))).all()
        region_pairs = set(s.execute(select(InstanceRow.provider, InstanceRow.region).distinct()).all())
        region_pairs |= set(s.execute(select(Run.provider, Run.region).distinct()).all())
        region_pairs |= {(p, r) for p, regions in planned_regions(s, utcnow()).items() for r in regions}
    recorded: dict[str, set[str]] = {}
    for provider, region in region_pairs:
        if region:
            recorded.setdefault(provider, set()).add(region)
    open_rows = [OpenRow(provider=p, instance_id=i, run_id=r, region=reg, run_live=state in RunState.LIVE)
                 for p, i, r, reg, state in rows]
    names = list(dict.fromkeys(clouds)) if clouds else providers
    return names, open_rows, recorded


def _record_terminations(app: AppContext, findings: list) -> None:
    """Close the rows of terminated orphans that have one, and write an event per orphan of a known run."""
    from sqlalchemy import select

    from gpuplan.store.models import Event, InstanceRow, Run
    from gpuplan.store.types import utcnow

    now = utcnow()
    with app.store.session() as s:
        for f in findings:
            for row in s.scalars(select(InstanceRow).where(InstanceRow.provider_instance_id == f.instance_id,
                                                        InstanceRow.terminated_at.is_(None))):
                row.terminated_at = now
                row.state = "terminated"
            run_id = f.run_id if f.run_id and s.get(Run, f.run_id) is not None else None
            s.add(Event(run_id=run_id, kind=EventKind.RECONCILE_TERMINATED,
                        message=f"orphan {f.instance_id} ({f.cloud} {f.region}) terminated by reconcile",
                        data_json=json.dumps(f.as_dict())))
        s.commit()


def _secrets(app: AppContext, checked: list[str], regions_of: Callable[[str], list[str]], policy: Any, *,
             terminate: bool, yes: bool) -> list[dict[str, Any]]:
    """Check the checked providers' secret stores for leftover run secrets; with --terminate delete the orphans.

    A store that cannot be listed, or a secret that cannot be deleted, is a warning, never fatal: the machines'
    verdict stands. Rows carry names only (gpuplan.supervise.reconcile_secrets)."""
    from gpuplan.supervise.reconcile_secrets import check_secrets, delete_orphan_secrets

    found = check_secrets(checked, regions_of, policy)
    for name, why in found.skipped.items():
        warn(f"{name}: secrets not checked: {why}")
    outcome: dict[Any, str | None] = {}
    if terminate and found.orphans:
        if not yes:
            names = ", ".join(f.secret.name for f in found.orphans)
            click.confirm(f"Delete {len(found.orphans)} orphan secret(s): {names}?", abort=True, err=True)
        outcome = delete_orphan_secrets(found.orphans, regions_of)
        for secret, why in outcome.items():
            if why is not None:
                warn(f"{secret.provider}: could not delete secret {secret.name}: {why}")
        _record_secret_deletions(app, [f for f in found.orphans if f.secret in outcome
                                       and outcome[f.secret] is None])
    rows = []
    for f in found.findings:
        action = None
        if f.secret in outcome:
            why = outcome[f.secret]
            action = "deleted" if why is None else f"delete failed: {why}"
        rows.append(f.as_dict(action))
    return rows


def _print_secrets(rows: list[dict[str, Any]]) -> None:
    from gpuplan.supervise.reconcile import format_age

    print_table(["kind", "cloud", "region", "secret", "run", "run state", "age", "action / why"],
                [(r["kind"], r["cloud"], r["region"] or "", r["secret"], r["run_id"] or "", r["run_state"] or "",
                  format_age(dt.timedelta(seconds=r["age_s"])) if r["age_s"] is not None else "",
                  r["action"] or r["why"] or "") for r in rows])
    spared = sum(1 for r in rows if r["kind"] != "orphan")
    if spared:
        note(f"{spared} secret(s) spared: an unknown run's secret younger than --grace, or one whose run cannot be "
             "read (never deleted)")
    if any(r["kind"] == "orphan" and r["action"] is None for r in rows):
        note("run `gpuplan reconcile --terminate` to delete the orphan secrets")


def _record_secret_deletions(app: AppContext, findings: list) -> None:
    """An event per deleted secret (its name, never its value), on its run when the database has it."""
    from gpuplan.store.models import Event, Run

    with app.store.session() as s:
        for f in findings:
            run_id = f.secret.run_id if f.secret.run_id and s.get(Run, f.secret.run_id) is not None else None
            where = f" in {f.secret.region}" if f.secret.region else ""
            s.add(Event(run_id=run_id, kind=EventKind.RECONCILE_SECRET_DELETED,
                        message=f"orphan secret {f.secret.name} ({f.secret.provider}{where}) deleted by reconcile",
                        data_json=json.dumps(f.as_dict("deleted"), default=str)))
        s.commit()


def _adopt_unknown(app: AppContext, findings: list, regions_of: Callable[[str], list[str]]) -> set[str]:
    """Record the unknown machines of recorded runs (gpuplan.supervise.adopt), unless their launch is still in flight: a
    launch killed before its commit leaves machines only reconcile (or stop, or watch) can give back to their run,
    and an orphan of a known run is billed to it from its real launch time. Returns the instance ids adopted."""
    from gpuplan.providers.base import ProviderError
    from gpuplan.store.models import Run
    from gpuplan.store.types import utcnow
    from gpuplan.supervise.adopt import adopt, launch_in_flight
    from gpuplan.supervise.reconcile import MISSING, configure_provider

    by_run: dict[str, str] = {f.run_id: f.provider or f.cloud for f in findings if f.kind != MISSING and f.run_id}
    adopted: set[str] = set()
    providers: dict[str, object] = {}
    now = utcnow()
    with app.store.session() as s:
        for run_id, name in by_run.items():
            run = s.get(Run, run_id)
            if run is None or run.provider != name or launch_in_flight(run, now):
                continue
            if name not in providers:
                providers[name] = configure_provider(name, regions_of(name))
            try:
                rows = adopt(s, run, providers[name], now)  # type: ignore[arg-type]
            except ProviderError as exc:
                warn(f"{name}: could not adopt the machines of run {run_id}: {exc}")
                continue
            adopted.update(row.provider_instance_id for row in rows)
            s.commit()
    return adopted
