"""`gpuplan scheduler`: the loop that fires due schedules (`run`), or one evaluation at an instant (`tick`)."""

from __future__ import annotations

import datetime as dt
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuplan.cli.commands.params import bounded
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table
from gpuplan.errors import UserError
from gpuplan.limits import limit

if TYPE_CHECKING:
    from gpuplan.scheduling.scheduler import FireResult

log = logging.getLogger("gpuplan.scheduling.scheduler")

LEASE_NAME = "scheduler"


@click.group()
def scheduler() -> None:
    """Fire scheduled jobs: `run` is the long-lived loop for systemd or cron, `tick` one evaluation."""


def _parse_at(value: str) -> dt.datetime:
    try:
        at = dt.datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise UserError(f"--at must be an ISO time like 2026-11-23T02:00:00Z, not {value!r}") from exc
    at = at if at.tzinfo else at.replace(tzinfo=dt.timezone.utc)
    # Within 100 years of now (the `hours` limit): at 0001-01-01 or 9999-12-31 the cron arithmetic and the books'
    # times overflow the datetime range (OverflowError), and nothing is scheduled that far away.
    span = dt.timedelta(hours=limit("hours").high)
    try:
        now = dt.datetime.now(dt.timezone.utc)
        inside = now - span <= at.astimezone(dt.timezone.utc) <= now + span
    except OverflowError:
        inside = False
    if not inside:
        raise UserError(f"--at must be within 100 years of now, not {value!r}")
    return at


def _result_rows(results: Sequence[FireResult]) -> list[dict[str, object]]:
    return [{"schedule": r.schedule, "fire_at": r.fire_at, "outcome": r.outcome, "reason": r.reason,
             "run_id": r.run_id} for r in results]


def _print_results(results: Sequence[FireResult], at: dt.datetime) -> None:
    if not results:
        click.echo(f"nothing due at {at:%Y-%m-%d %H:%M %Z}")
        return
    print_table(["schedule", "slot (UTC)", "outcome", "run", "reason"],
                [(r.schedule, f"{r.fire_at:%Y-%m-%d %H:%M}", r.outcome, r.run_id or "", r.reason or "")
                 for r in results])


@scheduler.command()
@click.option("--at", "at_text", default=None,
              help="The instant to evaluate, ISO 8601 (UTC if no offset). Default: now.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def tick(app: AppContext, at_text: str | None, as_json: bool) -> None:
    """Fire what is due now (or at --at, for back-fills); a second tick at the same instant fires nothing."""
    from gpuplan.scheduling.fire import gates_of, make_launcher
    from gpuplan.scheduling.scheduler import tick as run_tick

    at = _parse_at(at_text) if at_text is not None else dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    results = run_tick(app.store, at, make_launcher(app.store), gates_of)
    if as_json:
        emit_json({"at": at, "fires": _result_rows(results)})
    else:
        _print_results(results, at)


@scheduler.command()
@click.option("--once", is_flag=True, help="One pass (fire what is due now, watch launched runs), then exit.")
@click.option("--interval", default=30.0, show_default=True, type=bounded("interval_s", low=0.1),
              help="Seconds between passes.")
@click.option("--lease-ttl", default=120.0, show_default=True, type=bounded("interval_s", low=1),
              help="Seconds another scheduler waits before taking over from one that died.")
@pass_app
def run(app: AppContext, once: bool, interval: float, lease_ttl: float) -> None:
    """Fire due schedules and watch what they launched, until SIGTERM/SIGINT (logs go to stderr).

    Holds the `scheduler` lease in the database: a second scheduler on the same database stays idle until
    the first stops or its lease expires, and each slot fires at most once either way.
    """
    from sqlalchemy.engine import make_url

    from gpuplan.scheduling import leases
    from gpuplan.scheduling.fire import gates_of, make_launcher, watch_scheduled_runs
    from gpuplan.scheduling.outlook import outlook
    from gpuplan.scheduling.scheduler import tick as run_tick

    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    interrupted = threading.Event()  # Ctrl-C (SIGINT) exits 130 like every command; SIGTERM is a clean stop (0)

    def on_signal(signum: int, _frame: object) -> None:
        if signum == signal.SIGINT:
            interrupted.set()
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    holder = f"{socket.gethostname()}:{os.getpid()}"
    ttl = dt.timedelta(seconds=lease_ttl)
    store = app.store
    launcher = make_launcher(store)
    database = make_url(store.url).render_as_string(hide_password=True)
    log.info("scheduler started (%s) on %s, a pass every %gs%s; %s", holder, database, interval,
             "" if once else ", SIGTERM or Ctrl-C stops it", outlook(store, dt.datetime.now(dt.timezone.utc)).line())
    try:
        while not stop.is_set():
            now = dt.datetime.now(dt.timezone.utc)
            with store.session() as session:
                holding = leases.acquire(session, LEASE_NAME, holder, ttl, now)
            if holding:
                for result in run_tick(store, now, launcher, gates_of):
                    log.info("schedule %s slot %s: %s%s", result.schedule, result.fire_at.isoformat(),
                             result.outcome, f" ({result.reason})" if result.reason else "")
                watch_scheduled_runs(store, now)
                log.info("pass at %s: %s", now.strftime("%H:%M:%S"), outlook(store, now).line())
            else:
                log.info("another scheduler holds the lease; standing by")
            if once:
                break
            stop.wait(interval)
    finally:
        with store.session() as session:
            leases.release(session, LEASE_NAME, holder)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    log.info("scheduler stopped")
    if interrupted.is_set():
        from gpuplan.cli.interrupt import EXIT_INTERRUPTED

        sys.exit(EXIT_INTERRUPTED)


@scheduler.command("install")
@click.option("--cron", "use_cron", is_flag=True, help="A crontab line (one pass a minute) instead of a systemd unit.")
@click.option("--install", "do_install", is_flag=True,
              help="Write the systemd user unit (~/.config/systemd/user/) instead of printing it; with --cron, add "
                   "the line to your crontab.")
@click.option("--interval", default=30.0, show_default=True, type=bounded("interval_s", low=1),
              help="Seconds between the systemd scheduler's passes.")
@pass_app
def install(app: AppContext, use_cron: bool, do_install: bool, interval: float) -> None:
    """Keep the scheduler running: print (or --install) a systemd user unit, or a cron line with --cron.

    Either runs with this shell's database (GPUPLAN_DB) and gpuplan home."""
    from gpuplan.cli.output import note
    from gpuplan.paths import data_home
    from gpuplan.scheduling.service import cron_line, systemd_unit

    if use_cron:
        text = cron_line(app.store.url, data_home() / "scheduler.log")
        if do_install:
            _add_to_crontab(text.text)
            note("added to your crontab (crontab -l shows it); the scheduler makes one pass a minute")
        else:
            click.echo(text.text, nl=False)
            note("add it with `crontab -e`, or run `gpuplan scheduler install --cron --install`")
        if text.env_file_needed is not None:
            note("the database URL holds a password: it is not in the line; give it through ~/.pgpass "
                 "(https://www.postgresql.org/docs/current/libpq-pgpass.html) and GPUPLAN_DB without it")
        return
    config_home = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    unit = systemd_unit(app.store.url, config_home, interval)
    assert unit.path is not None
    if do_install:
        unit.path.parent.mkdir(parents=True, exist_ok=True)
        unit.path.write_text(unit.text)
        note(f"wrote {unit.path}; start it: {unit.enable}")
    else:
        click.echo(unit.text, nl=False)
        note(f"save it as {unit.path} (or run with --install), then: {unit.enable}")
    if unit.env_file_needed is not None:
        note(f"the database URL holds a password, so it is not in the unit: put GPUPLAN_DB=... in "
             f"{unit.env_file_needed} (chmod 600)")


def _add_to_crontab(line: str) -> None:
    """Append `line` to the user's crontab unless it is there (crontab -l / crontab -)."""
    import shutil
    import subprocess

    if shutil.which("crontab") is None:
        raise UserError("crontab is not installed here; print the line (without --install) and add it by hand, "
                        "or use the systemd unit (without --cron)")
    current = subprocess.run(["crontab", "-l"], capture_output=True, text=True, check=False)
    existing = current.stdout if current.returncode == 0 else ""
    if line.strip() in existing.splitlines():
        return
    updated = existing + ("" if not existing or existing.endswith("\n") else "\n") + line
    done = subprocess.run(["crontab", "-"], input=updated, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise UserError(f"crontab refused the line: {' '.join(done.stderr.split())}")
