"""How one dashboard was started: its database, its gate, and whether it may stop and launch runs."""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.cli.context import AppContext
from gpuplan.ui.security import Guard


@dataclass(frozen=True)
class UiSettings:
    """Read by every page through the Starlette app's state (no module-level state)."""

    app: AppContext
    guard: Guard
    allow_actions: bool = False
    refresh_seconds: int = 10
