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
        return expand_user(explicit)
    xdg = os.environ.get("XDG_DATA_HOME")
    base = expand_user(xdg) if xdg else Path.home() / ".local" / "share"
    return base / "gpuplan"


def expand_user(path: str | os.PathLike[str]) -> Path:
    """`~` and `~user` expanded; a user that does not exist (`~0`, `~nobody2`) is the user's mistake (exit 2), not
    the RuntimeError pathlib raises."""
    try:
        return Path(path).expanduser()
    except RuntimeError:
        from gpuplan.errors import UserError

        raise UserError(f"{str(path)[:80]!r}: no such user's home folder (~ names a user)") from None


def default_db_url() -> str:
    """The SQLite file used when neither --db nor GPUPLAN_DB names a database."""
    return f"sqlite:///{data_home() / 'gpuplan.db'}"


def runs_dir() -> Path:
    """Parent folder of every run's own folder (logs, metrics, checkpoints of local runs)."""
    return data_home() / "runs"


PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


def make_private_dir(path: str | os.PathLike[str]) -> Path:
    """Create `path` and any missing parents readable by the owner only (0700); return it.

    Run folders hold job output (a job may print a token it was given) and the database holds the books, so what
    gpuplan creates for them is private whatever the umask. Folders that already exist keep their mode: a user's
    own choice of parent (say /scratch/team) is not gpuplan's to change.
    """
    path = expand_user(path)
    missing = []
    for folder in (path, *path.parents):
        if folder.exists():
            break
        missing.append(folder)
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:  # another gpuplan process made it first
            continue
        os.chmod(folder, PRIVATE_DIR_MODE)  # mkdir's mode is filtered by the umask; be exact
    return path


def create_private_file(path: str | os.PathLike[str]) -> None:
    """Create `path` empty with mode 0600 unless it exists (then it is left as it is)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE_MODE)
    except FileExistsError:
        return
    os.close(fd)
