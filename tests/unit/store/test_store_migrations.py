"""Migrations and models agree, and every revision upgrades a database with data in it without loss.

When you add a revision: add its seed rows to SEEDS (raw SQL against the schema *at that revision*), so the
upgrade-with-data test proves the next revision keeps them.
"""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import create_engine, text

from gpuplan.store import migrate
from gpuplan.store.db import Store, make_engine
from gpuplan.store.models import Base

# revision -> (seed statements run right after upgrading to it, {table: rows expected to survive to head})
SEEDS: dict[str, tuple[list[str], dict[str, int]]] = {
    "0001": (
        [
            "INSERT INTO schedules (id, name, cron, tz, spec_text, spec_hash, paused, created_at, updated_at) "
            "VALUES (1, 'nightly', '0 2 * * *', 'UTC', 'name: x', 'h', false, "
            "'2026-11-01 00:00:00', '2026-11-01 00:00:00')",
            "INSERT INTO runs (id, name, provider, state, spec_text, spec_hash, created_at, updated_at, nodes, "
            "spot, est_cost_usd, schedule_id) VALUES ('r-seed000001', 'seed', 'local', 'succeeded', "
            "'name: seed', 'h', '2026-11-01 00:00:00', '2026-11-01 00:00:00', 1, false, 1.5, 1)",
            "INSERT INTO instances (run_id, provider, provider_instance_id, cloud, gpu_count, spot, node_rank, "
            "price_per_hour, min_billed_seconds, state, launched_at, terminated_at) VALUES ('r-seed000001', "
            "'aws', 'i-1', 'aws', 8, false, 0, 98.32, 60, 'terminated', '2026-11-01 00:00:00', "
            "'2026-11-01 01:00:00')",
            "INSERT INTO events (at, run_id, kind, message) VALUES ('2026-11-01 00:00:00', 'r-seed000001', "
            "'state', 'pending')",
            "INSERT INTO budgets (name, amount_usd, period, created_at) VALUES ('team', 5000, 'month', "
            "'2026-11-01 00:00:00')",
            "INSERT INTO price_snapshots (id, cloud, source, fetched_at, offer_count, complete) VALUES "
            "(1, 'aws', 'test', '2026-11-01 00:00:00', 1, true)",
            "INSERT INTO price_offers (snapshot_id, cloud, region, instance_type, gpu, gpu_count, "
            "price_per_hour) VALUES (1, 'aws', 'us-east-1', 'p5.48xlarge', 'H100', 8, 98.32)",
        ],
        {"runs": 1, "instances": 1, "events": 1, "budgets": 1, "schedules": 1, "price_offers": 1},
    ),
    "0002": (
        [
            "INSERT INTO instances (run_id, provider, provider_instance_id, cloud, gpu_count, spot, node_rank, "
            "price_per_hour, min_billed_seconds, state, launched_at) VALUES ('r-seed000001', 'aws', 'i-2', 'aws', "
            "8, false, 1, 98.32, 60, 'running', '2026-11-01 00:00:00')",
        ],
        {"instances": 1},
    ),
    "0003": ([], {}),  # renames event kinds only (test_0003_renames_dotted_event_kinds)
    "0004": ([], {}),  # adds nullable columns to runs (reservations, launcher identity)
}


def _ordered_revisions() -> list[str]:
    return [rev for rev, _down, _msg in reversed(migrate.history())]


def test_head_constant_matches_scripts() -> None:
    from alembic.script import ScriptDirectory

    assert ScriptDirectory.from_config(migrate.alembic_config()).get_current_head() == migrate.HEAD_REVISION
    assert set(SEEDS) == set(_ordered_revisions()), "add seed rows for every new revision"


def test_models_and_migrations_agree(db_url: str) -> None:
    store = Store.open(db_url)
    with store.engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    store.close()
    assert diff == [], f"models differ from migrations (write a revision): {diff}"


def test_every_revision_upgrades_with_data(db_url: str) -> None:
    engine = make_engine(db_url)
    cfg = migrate.alembic_config(engine)
    expected: dict[str, int] = {}
    for revision in _ordered_revisions():
        with engine.begin() as conn:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, revision)
        statements, survivors = SEEDS[revision]
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
        for table, count in survivors.items():
            expected[table] = expected.get(table, 0) + count
    # Opening with the store (as the CLI does) brings it to head and keeps every row.
    engine.dispose()
    store = Store.open(db_url)
    assert store.current_revision() == migrate.HEAD_REVISION
    with store.engine.connect() as conn:
        for table, count in expected.items():
            assert conn.execute(text(f"SELECT count(*) FROM {table}")).scalar() == count, table
        cost = conn.execute(text("SELECT est_cost_usd FROM runs")).scalar()
        assert float(cost) == 1.5
    store.close()


def test_0003_renames_dotted_event_kinds(db_url: str) -> None:
    """Events recorded before 0003 with the dotted kinds read back under the one snake_case style."""
    from gpuplan.runs.events import EventKind

    engine = make_engine(db_url)
    cfg = migrate.alembic_config(engine)
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0002")
    with engine.begin() as conn:
        for i, kind in enumerate(("reconcile.terminated", "schedule.skipped", "launch_failed")):
            conn.execute(text("INSERT INTO events (at, kind, message) VALUES ('2026-11-01 00:00:00', :k, :m)"),
                         {"k": kind, "m": str(i)})
    engine.dispose()
    store = Store.open(db_url)
    with store.engine.connect() as conn:
        kinds = [row[0] for row in conn.execute(text("SELECT kind FROM events ORDER BY message"))]
    store.close()
    assert kinds == [EventKind.RECONCILE_TERMINATED, EventKind.SCHEDULE_SKIPPED, EventKind.LAUNCH_FAILED]


def test_store_open_upgrades_an_empty_database(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("CREATE TABLE unrelated (x INTEGER)"))
    engine.dispose()
    store = Store.open(url)
    assert store.current_revision() == migrate.HEAD_REVISION
    store.close()


def test_cli_db_current_reports_head(tmp_path) -> None:
    from support.clihelp import run_subprocess

    url = f"sqlite:///{tmp_path / 'x.db'}"
    up = run_subprocess("db", "upgrade", env={"GPUPLAN_DB": url})
    assert up.exit_code == 0, up.stderr
    current = run_subprocess("db", "current", "--json", env={"GPUPLAN_DB": url})
    assert current.exit_code == 0
    assert current.json()["revision"] == migrate.HEAD_REVISION
    history = run_subprocess("db", "history", "--json")
    assert history.json()[0]["revision"] == migrate.HEAD_REVISION


def test_newer_database_is_refused(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'new.db'}"
    Store.open(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    engine.dispose()
    from support.clihelp import run_cli

    result = run_cli("--db", url, "db", "upgrade")
    assert result.exit_code == 1
    assert "9999" in result.stderr and "newer" in result.stderr


def test_an_extra_schema_version_row_is_refused(db_url: str) -> None:
    """Only the first alembic_version row used to be read: a second (a branch this gpuplan never wrote) passed."""
    from gpuplan.errors import GpuplanError

    store = Store.open(db_url)
    with store.engine.begin() as conn:
        conn.execute(text("INSERT INTO alembic_version (version_num) VALUES ('9999')"))
    with pytest.raises(GpuplanError, match=r"has 2 schema versions \(0004, 9999\)"):
        Store.open(db_url)
    store.close()
