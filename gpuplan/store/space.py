"""How much room is left on the disk holding the books or the run folders (a full disk is the user's to fix:
said in one line, exit 2, before anything is recorded)."""

from __future__ import annotations

import os
from pathlib import Path

MIN_FREE_BYTES = 8 * 1024 * 1024  # a run's rows, events and the first lines of its log, with room to spare


def free_bytes(folder: Path) -> int | None:
    """Bytes an unprivileged writer may still use on the filesystem holding `folder` (None: cannot tell)."""
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        stat = os.statvfs(folder)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize


def holds_no_files(folder: Path) -> bool:
    """A pseudo filesystem (/proc, /sys): it reports no blocks at all, so nothing can be stored there (not a full
    disk, which has blocks and none free)."""
    try:
        return os.statvfs(folder).f_blocks == 0
    except OSError:
        return False
