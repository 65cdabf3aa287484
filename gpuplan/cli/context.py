"""The per-invocation application context that Click passes to every command.

Holding the database URL and the opened store here (not in module globals) keeps each invocation, and each
CliRunner call in the tests, independent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:
    from gpuplan.store.db import Store


@dataclass
class AppContext:
    """Settings from the top-level options plus lazily opened resources."""

    db_url: str | None = None
    verbose: bool = False
    _store: Store | None = field(default=None, repr=False)

    @property
    def store(self) -> Store:
        """Open (and upgrade, if it is behind) the database on first use; SQLAlchemy is imported only here."""
        if self._store is None:
            from gpuplan.store.db import Store

            self._store = Store.open(self.db_url)
            ctx = click.get_current_context(silent=True)
            if ctx is not None:
                ctx.call_on_close(self._store.close)
        return self._store


pass_app = click.make_pass_decorator(AppContext, ensure=True)


def app_from(ctx: click.Context) -> AppContext:
    """The AppContext of a command's context (for commands that take `ctx` anyway)."""
    obj: Any = ctx.find_object(AppContext)
    return obj if obj is not None else ctx.ensure_object(AppContext)
