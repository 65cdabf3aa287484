"""Alembic environment: runs on the connection gpuplan hands over (gpuplan.store.migrate.upgrade), or on
the URL in the config (the `alembic` CLI). SQLite uses batch mode, since it cannot ALTER most things.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from gpuplan.store.models import Base
from gpuplan.store.types import UTCDateTime

config = context.config
target_metadata = Base.metadata


def _render_item(type_, obj, autogen_context):  # type: ignore[no-untyped-def]
    """Render gpuplan's UTCDateTime as its plain impl, so revisions never import application code."""
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


def _configure(connection) -> None:  # type: ignore[no-untyped-def]
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        render_item=_render_item,
    )


def run_migrations_offline() -> None:
    context.configure(url=config.get_main_option("sqlalchemy.url"), target_metadata=target_metadata,
                      literal_binds=True, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = config.attributes.get("engine") or create_engine(config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
