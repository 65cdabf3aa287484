"""Where gpuplan keeps its files: the XDG data dir unless GPUPLAN_HOME says otherwise."""

from __future__ import annotations

import os
from pathlib import Path


def data_home() -> Path:
    """The folder for the default database and the run folders (logs, metrics).

    GPUPLAN_HOME wins (the demo and the tests use it to stay out of a user's real books), then
    $XDG_DATA_HOME/gpuplan, then ~/.local/share/gpuplan as the XDG base directory spec says.
    """
    explicit = os.environ.get("GPUPLAN_HOME")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share"
    return base / "gpuplan"


def default_db_url() -> str:
    """The SQLite file used when neither --db nor GPUPLAN_DB names a database."""
    return f"sqlite:///{data_home() / 'gpuplan.db'}"


def runs_dir() -> Path:
    """Parent folder of every run's own folder (logs, metrics, checkpoints of local runs)."""
    return data_home() / "runs"
