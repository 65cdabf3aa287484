"""`gpuplan db`: see and move the database's schema revision."""

from __future__ import annotations

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table


@click.group()
def db() -> None:
    """Inspect and upgrade the gpuplan database (any command upgrades it on open, too)."""


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def current(app: AppContext, as_json: bool) -> None:
    """Show the database URL and its schema revision."""
    from gpuplan.store import migrate
    from gpuplan.store.db import Store

    store = Store.open(app.db_url, upgrade=False)
    try:
        revision = store.current_revision()
    finally:
        store.close()
    payload = {"url": store.safe_url, "revision": revision, "head": migrate.HEAD_REVISION,
               "at_head": revision == migrate.HEAD_REVISION}
    if as_json:
        emit_json(payload)
        return
    if payload["at_head"]:
        status = "(head)"
    elif revision is not None and revision not in migrate.known_revisions():
        status = f"(unknown to this gpuplan, whose head is {migrate.HEAD_REVISION}: written by a newer version?)"
    else:
        status = f"(behind head {migrate.HEAD_REVISION})"
    click.echo(f"{store.safe_url}: {revision or 'empty'} {status}")


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def upgrade(app: AppContext, as_json: bool) -> None:
    """Upgrade the database schema to the newest revision (creates it if empty)."""
    from gpuplan.store.db import Store

    store = Store.open(app.db_url, upgrade=False)
    try:
        before = store.current_revision()
        store.ensure_schema()
        after = store.current_revision()
    finally:
        store.close()
    if as_json:
        emit_json({"url": store.safe_url, "from": before, "to": after})
    elif before == after:
        click.echo(f"{store.safe_url}: already at {after}")
    else:
        click.echo(f"{store.safe_url}: upgraded {before or 'empty'} -> {after}")


@db.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def history(as_json: bool) -> None:
    """List the schema revisions this gpuplan knows, newest first."""
    from gpuplan.store import migrate

    rows = migrate.history()
    if as_json:
        emit_json([{"revision": r, "down_revision": d, "message": m} for r, d, m in rows])
        return
    print_table(["revision", "revises", "message"], [(r, d or "-", m.splitlines()[0]) for r, d, m in rows])
