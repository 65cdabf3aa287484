"""`gpuplan schedule`: add, list, show, pause, resume, update and remove scheduled jobs."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded_int
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table, say, warn
from gpuplan.errors import UserError

JSON_OPTION = click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _read_spec(path: Path) -> tuple[str, Any]:
    """The spec's text and the JobSpec it parses to (validated for scheduling)."""
    from gpuplan.jobs.spec_bounds import MAX_SPEC_BYTES
    from gpuplan.readfile import read_text
    from gpuplan.scheduling.specs import validate_spec_text

    try:
        text = read_text(path, "the job spec", MAX_SPEC_BYTES)  # /dev/zero, a FIFO: refused at once
    except FileNotFoundError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from exc
    return text, validate_spec_text(text, source=str(path))


def _emit(row: dict[str, Any], as_json: bool, message: str) -> None:
    """The schedule row as JSON, or one human line."""
    if as_json:
        emit_json(row)
    else:
        say(message)


def schedule_row(schedule: Any, now: dt.datetime) -> dict[str, Any]:
    from gpuplan.scheduling.scheduler import next_fire_of

    return {
        "name": schedule.name,
        "cron": schedule.cron,
        "tz": schedule.tz,
        "paused": schedule.paused,
        "spec_hash": schedule.spec_hash,
        "spec_path": schedule.spec_path,
        "created_at": schedule.created_at,
        "last_fire_at": schedule.last_fire_at,
        "next_fire_at": next_fire_of(schedule, now),
    }


@click.group()
def schedule() -> None:
    """Run a job spec on a cron schedule (fired by `gpuplan scheduler run`)."""


@schedule.command("add")
@click.argument("spec", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--cron", help='Cron expression, e.g. "0 2 * * *" (minute hour dom month dow) or @hourly, '
                            "@daily, @weekly, @monthly, @yearly. Default: the "
                            "spec's schedule.cron.")
@click.option("--tz", help="IANA time zone the cron is read in. Default: the spec's schedule.tz, else UTC.")
@click.option("--name", help="Schedule name (default: the spec's name).")
@JSON_OPTION
@pass_app
def add(app: AppContext, spec: Path, cron: str | None, tz: str | None, name: str | None, as_json: bool) -> None:
    """Copy SPEC into the store and fire it on CRON; later edits to the file do not change the schedule.

    The spec's own `schedule:` section gives the defaults (cron, tz); its limits (budget_usd, max_hours,
    deadline), resources (one cloud, GPU, regions, spot) and gates apply at every fire, as for `gpuplan launch`.
    """
    from gpuplan.scheduling.scheduler import add_schedule

    text, job = _read_spec(spec)
    section = job.schedule
    cron = cron or (section.cron if section else None)
    if cron is None:
        raise UserError(f"say when: --cron \"0 2 * * *\", or schedule.cron in {spec}")
    tz = tz or (section.tz if section else "UTC")
    now = _now()
    with app.store.session() as session:
        row = schedule_row(add_schedule(session, name=name or job.name, spec_text=text,
                                        spec_path=str(spec.resolve()), cron=cron, tz=tz, now=now), now)
    _emit(row, as_json, f"scheduled {row['name']}: {row['cron']} ({row['tz']}), next fire "
                        f"{_fmt(row['next_fire_at'])} UTC")


@schedule.command("list")
@JSON_OPTION
@pass_app
def list_(app: AppContext, as_json: bool) -> None:
    """List schedules with their next fire time."""
    from sqlalchemy import select

    from gpuplan.store.models import Schedule

    now = _now()
    with app.store.session() as session:
        rows = [schedule_row(s, now) for s in session.scalars(select(Schedule).order_by(Schedule.name))]
    if as_json:
        emit_json(rows)
        return
    if not rows:
        click.echo("no schedules (add one with 'gpuplan schedule add job.yaml --cron ...')")
        return
    print_table(["name", "cron", "tz", "state", "last fire", "next fire (UTC)"],
                [(r["name"], r["cron"], r["tz"], "paused" if r["paused"] else "active", _fmt(r["last_fire_at"]),
                  _fmt(r["next_fire_at"])) for r in rows])


@schedule.command("show")
@click.argument("name", shell_complete=complete.schedule_names)
@click.option("--fires", type=bounded_int("rows"), default=20, show_default=True,
              help="How many recent fires to show (0: all).")
@JSON_OPTION
@pass_app
def show(app: AppContext, name: str, fires: int, as_json: bool) -> None:
    """Show a schedule, its stored spec and its recent fires (launched, skipped with the reason, failed)."""
    from gpuplan.scheduling.scheduler import get_schedule

    now = _now()
    with app.store.session() as session:
        sched = get_schedule(session, name)
        row = schedule_row(sched, now)
        row["spec_text"] = sched.spec_text
        row["fires"] = [{"fire_at": f.fire_at, "fired_at": f.fired_at, "outcome": f.outcome, "reason": f.reason,
                         "run_id": f.run_id} for f in sorted(sched.fires, key=lambda f: f.fire_at)[-fires:]]
    if as_json:
        emit_json(row)
        return
    say(f"{row['name']}: {row['cron']} ({row['tz']}) {'paused' if row['paused'] else 'active'}")
    say(f"  spec: {row['spec_path'] or '-'} (sha256 {row['spec_hash'][:12]})")
    click.echo(f"  last fire: {_fmt(row['last_fire_at'])}   next fire: {_fmt(row['next_fire_at'])}")
    if row["fires"]:
        print_table(["slot (UTC)", "outcome", "run", "reason"],
                    [(_fmt(f["fire_at"]), f["outcome"], f["run_id"] or "", f["reason"] or "") for f in row["fires"]])
    else:
        click.echo("  no fires yet")


def _set_paused(app: AppContext, name: str, paused: bool, as_json: bool) -> None:
    from gpuplan.scheduling.scheduler import set_paused

    now = _now()
    with app.store.session() as session:
        row = schedule_row(set_paused(session, name, paused, now), now)
    _emit(row, as_json, f"{name}: {'paused' if paused else 'resumed'}")


@schedule.command("pause")
@click.argument("name", shell_complete=complete.schedule_names)
@JSON_OPTION
@pass_app
def pause(app: AppContext, name: str, as_json: bool) -> None:
    """Stop firing a schedule until `resume`."""
    _set_paused(app, name, True, as_json)


@schedule.command("resume")
@click.argument("name", shell_complete=complete.schedule_names)
@JSON_OPTION
@pass_app
def resume(app: AppContext, name: str, as_json: bool) -> None:
    """Fire a paused schedule again (slots missed while paused are not caught up)."""
    from gpuplan.scheduling.scheduler import get_schedule

    with app.store.session() as session:
        sched = get_schedule(session, name)
        # Missed slots while paused are not owed: fires resume from now.
        sched.last_fire_at = max(filter(None, [sched.last_fire_at, _now()]))
    _set_paused(app, name, False, as_json)


@schedule.command("update")
@click.argument("name", shell_complete=complete.schedule_names)
@click.argument("spec", required=False, type=click.Path(path_type=Path, dir_okay=False))
@click.option("--cron", help="New cron expression.")
@click.option("--tz", help="New time zone.")
@JSON_OPTION
@pass_app
def update(app: AppContext, name: str, spec: Path | None, cron: str | None, tz: str | None, as_json: bool) -> None:
    """Replace a schedule's stored spec (from SPEC), cron or time zone, deliberately."""
    from gpuplan.scheduling.scheduler import update_schedule

    text, job = _read_spec(spec) if spec is not None else (None, None)
    now = _now()
    with app.store.session() as session:
        row = schedule_row(update_schedule(session, name, now=now, spec_text=text,
                                           spec_path=str(spec.resolve()) if spec else None, cron=cron, tz=tz), now)
    section = job.schedule if job is not None else None
    for key, flag, given in (("cron", "--cron", cron), ("tz", "--tz", tz)):
        stated = getattr(section, key) if section is not None else None
        if given is None and stated is not None and " ".join(stated.split()) != row[key]:
            # The stored schedule keeps its own cron/tz (a deliberate change takes the flag); say so rather than
            # let the spec's new value look applied.
            warn(f"the spec's schedule.{key} {stated!r} is not applied: {name} keeps {row[key]!r} "
                 f"(pass {flag} to change it)")
    _emit(row, as_json, f"updated {name}: {row['cron']} ({row['tz']}), spec sha256 {row['spec_hash'][:12]}")


@schedule.command("rm")
@click.argument("name", shell_complete=complete.schedule_names)
@click.option("-y", "--yes", is_flag=True, help="Do not ask for confirmation.")
@JSON_OPTION
@pass_app
def rm(app: AppContext, name: str, yes: bool, as_json: bool) -> None:
    """Remove a schedule (its past runs stay in the books)."""
    from gpuplan.scheduling.scheduler import get_schedule

    with app.store.session() as session:
        get_schedule(session, name)  # no such schedule: said at once (exit 2), not after asking to confirm
    if not yes and not as_json:
        click.confirm(f"remove schedule {name!r}?", abort=True, err=True)
    with app.store.session() as session:
        session.delete(get_schedule(session, name))
    if as_json:
        emit_json({"name": name, "removed": True})
    else:
        say(f"removed {name}")


def _fmt(value: dt.datetime | None) -> str:
    return value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M") if value else "-"
