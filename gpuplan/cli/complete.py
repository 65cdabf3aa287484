"""Dynamic shell completion (click's `shell_complete` callbacks): GPU names, model presets, run ids, schedule
names, providers and config keys, so TAB offers what gpuplan knows instead of file names.

Completion runs the CLI once per TAB, so each callback is cheap and never fails loudly: the GPU table and the
presets are package data; run ids and schedule names are read from the database only when it already exists
(a TAB must never create or migrate a database), and any error means "no suggestions".
"""

from __future__ import annotations

from collections.abc import Iterable

import click
from click.shell_completion import CompletionItem

MAX_ROWS = 200  # newest runs offered; older ones are typed in full


def _items(pairs: Iterable[tuple[str, str | None]], incomplete: str) -> list[CompletionItem]:
    """The candidates starting with what was typed; for a comma list (`--gpu H100,A1`) the last item is
    completed and the ones before it are kept."""
    head, _, last = incomplete.rpartition(",")
    prefix = f"{head}," if head else ""
    seen: set[str] = set()
    out = []
    for value, help_text in pairs:
        if value.lower().startswith(last.lower()) and value not in seen:
            seen.add(value)
            out.append(CompletionItem(prefix + value, help=help_text))
    return out


def gpu_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Canonical GPU names (the ones the price catalog uses), with memory as the description."""
    from gpuplan.hardware.gpus import all_gpus

    return _items(((g.name, f"{g.memory_gb:g} GB {g.vendor} {g.generation}") for g in all_gpus()), incomplete)


def model_presets(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Model preset names, with their parameter count."""
    from gpuplan.estimating.architecture import PRESETS
    from gpuplan.units import format_size

    return _items(((name, f"{format_size(a.param_count())} parameters") for name, a in PRESETS.items()),
                  incomplete)


def providers(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    from gpuplan.providers.registry import provider_names

    return _items(((name, None) for name in provider_names()), incomplete)


def config_keys(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """`defaults.NAME` with what it is for, and `providers.CLOUD.` prefixes then their settings."""
    from gpuplan.config import DEFAULTS

    pairs: list[tuple[str, str | None]] = [(f"defaults.{k}", s.help) for k, s in DEFAULTS.items()]
    try:
        from gpuplan.providers import registry

        for name in registry.provider_names():
            pairs += [(f"providers.{name}.{key}", None)
                      for key in registry.setting_names(registry.load_provider_class(name))]
    except Exception:  # a plugin that fails to import must not break TAB
        pass
    return _items(pairs, incomplete)


def _read_store(ctx: click.Context, sql: str) -> list[tuple[str, str | None]]:
    """(value, description) rows of `sql` from the database the command would use (--db, $GPUPLAN_DB or the
    default file), if it exists. A SQLite file is read with the standard library, read-only: a TAB costs no
    SQLAlchemy import (a second) and can never create, lock or upgrade the database."""
    try:
        from gpuplan.paths import default_db_url

        url = ctx.find_root().params.get("db_url") or default_db_url()
        if url.startswith("sqlite:///"):
            import sqlite3
            from pathlib import Path
            from urllib.parse import quote

            path = Path(url.removeprefix("sqlite:///").split("?", 1)[0])
            if not path.is_file():
                return []
            conn = sqlite3.connect(f"file:{quote(str(path))}?mode=ro", uri=True, timeout=1)
            try:
                return [(str(row[0]), str(row[1])) for row in conn.execute(sql)]
            finally:
                conn.close()
        from sqlalchemy import text

        from gpuplan.store.db import Store

        store = Store.open(url, upgrade=False)
        try:
            with store.session() as session:
                return [(str(row[0]), str(row[1])) for row in session.execute(text(sql))]
        finally:
            store.close()
    except Exception:  # no database, an old schema, a server that is down: no suggestions
        return []


def run_refs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """The newest runs' ids, described by name and state (`r-1a2b  train-7b running`)."""
    return _items(_read_store(ctx, f"SELECT id, name || ' ' || state FROM runs ORDER BY created_at DESC "
                                   f"LIMIT {MAX_ROWS}"), incomplete)


def live_run_refs(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Runs that may still have machines (for exec, ssh, stop): not ended (a final state sets `ended_at`,
    gpuplan.runs.records.set_state)."""
    return _items(_read_store(ctx, f"SELECT id, name || ' ' || state FROM runs WHERE ended_at IS NULL "
                                   f"ORDER BY created_at DESC LIMIT {MAX_ROWS}"), incomplete)


def schedule_names(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
    """Schedule names, described by their cron."""
    return _items(_read_store(ctx, "SELECT name, cron || ' ' || tz FROM schedules ORDER BY name"), incomplete)
