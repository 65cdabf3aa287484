"""Alembic plumbing: the migration scripts ship inside the package (gpuplan.migrations).

HEAD_REVISION is kept here as a constant so that opening an up-to-date database does not import Alembic
(~0.5 s); tests/unit/store/test_store_migrations.py fails if it ever disagrees with the scripts' real head.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy import Engine

HEAD_REVISION = "0004"


def script_location() -> str:
    """The folder of the packaged migration scripts, found without importing them: Alembic runs them (their
    env.py reads the models), so the store depends on them as data, not as code."""
    import importlib.util

    spec = importlib.util.find_spec("gpuplan.migrations")
    assert spec is not None and spec.submodule_search_locations, "gpuplan.migrations is not installed"
    return str(Path(next(iter(spec.submodule_search_locations))))


def alembic_config(engine: Engine | None = None) -> Config:
    """An Alembic Config for the packaged scripts; with `engine`, migrations run on that engine."""
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", script_location())
    if engine is not None:
        # configparser interpolates %: a path with % (GPUPLAN_HOME=/tmp/a%b) must be written as %%
        cfg.set_main_option("sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%"))
        cfg.attributes["engine"] = engine
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Upgrade under the migration lock (gpuplan.store.migrate_lock): processes starting together on a new
    database wait for the first, and then find nothing left to do."""
    from alembic import command

    from gpuplan.store.migrate_lock import in_transaction, migration_lock
    from gpuplan.testpoint import pause_point

    cfg = alembic_config(engine)
    with migration_lock(engine), engine.begin() as connection:
        in_transaction(connection)
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)
        pause_point("migrated")  # every step done, nothing committed yet (tests kill the process here)


def known_revisions() -> set[str]:
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    return {rev.revision for rev in script.walk_revisions()}


def history() -> list[tuple[str, str | None, str]]:
    """(revision, down_revision, message) from newest to oldest."""
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())
    rows = []
    for rev in script.walk_revisions():
        down = rev.down_revision if isinstance(rev.down_revision, str) or rev.down_revision is None else ",".join(
            rev.down_revision
        )
        rows.append((rev.revision, down, rev.doc or ""))
    return rows


