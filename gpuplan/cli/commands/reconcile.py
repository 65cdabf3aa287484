"""`gpuplan reconcile`: find machines gpuplan tagged but does not consider live, and rows whose machine is gone."""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, print_table, warn

if TYPE_CHECKING:
    from gpuplan.supervise.reconcile_pass import ReconcileOutcome


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
    from gpuplan.supervise.reconcile_pass import ReconcileRequest, run_reconcile

    clouds = tuple(dict.fromkeys(c.strip() for raw in clouds for c in raw.split(",") if c.strip()))
    _check_names(clouds)
    request = ReconcileRequest(clouds=clouds, regions=regions, grace=_parse_grace(grace_text), terminate=terminate)

    def confirm(question: str) -> None:
        if not yes:
            click.confirm(question, abort=True, err=True)

    outcome = run_reconcile(app.store, app.db_url, request, confirm=confirm, warn=warn)
    _render(outcome, terminate=terminate, as_json=as_json)


def _render(outcome: ReconcileOutcome, *, terminate: bool, as_json: bool) -> None:
    """The pass's rows as JSON, or as tables with a note per kind of thing the user may act on."""
    from gpuplan.supervise.reconcile import format_age

    rows, secret_rows, report = outcome.rows, outcome.secret_rows, outcome.report
    if not outcome.names:
        note("no runs recorded and no --cloud given: nothing to reconcile")
    if as_json:
        emit_json(rows + secret_rows)
        return
    if not rows and not secret_rows:
        note(f"in agreement: checked {', '.join(report.checked) or 'nothing'}; no orphans, nothing missing")
        return
    if rows:
        print_table(["kind", "cloud", "region", "instance", "run", "state", "age", "action / why"],
                    [(r["kind"], r["cloud"], r["region"], r["instance_id"], r["run_id"], r["state"],
                      format_age(dt.timedelta(seconds=r["age_s"])) if r["age_s"] is not None else "",
                      r["action"] or r["why"] or "") for r in rows])
    if outcome.spared:
        note(f"{len(outcome.spared)} spared: a launch may be about to record them (never terminated; "
             "see `gpuplan reconcile --help`)")
    if outcome.adopted:
        note(f"{len(outcome.adopted)} adopted: recorded in their runs, billed from their launch "
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


def _check_names(clouds: tuple[str, ...]) -> None:
    """A misspelt --cloud is bad input (exit 2) before anything is checked, not 'no provider could be checked'
    (exit 1), which reads as a cloud outage."""
    from gpuplan.errors import UserError
    from gpuplan.providers.registry import provider_names

    known = provider_names()
    for name in clouds:
        if name not in known:
            raise UserError(f"--cloud: unknown provider {name!r}; known: {', '.join(known)}")


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
