"""Checkpoints of a job run by gpuplan.jobs.runner (this machine, or a Slurm node) kept in a folder storage.

The boot script does this on cloud machines (gpuplan.jobs.boot_checkpoints); a job the wrapper runs gets the same
contract when its run has a folder storage (`storage: /shared/...`): the stored checkpoints are copied into
`$GPUPLAN_CHECKPOINT_DIR` before the job starts, and the job's are copied back every `checkpoint.interval` and
when it ends. Files are replaced whole (a temporary file, then a rename), so a reader of the storage never sees
half a checkpoint. Object storage (s3://, gs://) is left to the boot script: only folder paths are copied here.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

DEFAULT_SYNC_SECONDS = 600.0


def is_folder(url: str | None) -> bool:
    return bool(url) and str(url).startswith("/")


def copy_tree(src: Path, dst: Path) -> int:
    """Copy every file of `src` into `dst` (sub-folders kept), each replaced whole; returns how many."""
    if not src.is_dir():
        return 0
    copied = 0
    for path in src.rglob("*"):
        if not path.is_file() or path.is_symlink() or path.name.startswith("."):
            continue
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
        shutil.copy2(path, tmp)
        os.replace(tmp, target)
        copied += 1
    return copied


class CheckpointSync:
    """Restore before the job, copy back every `seconds` and at the end (start/stop around the job)."""

    def __init__(self, checkpoint_dir: Path, storage: Path, seconds: float | None) -> None:
        self.checkpoint_dir = checkpoint_dir
        self.storage = storage
        self.seconds = seconds or DEFAULT_SYNC_SECONDS
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def restore(self) -> int:
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        return copy_tree(self.storage, self.checkpoint_dir)

    def push(self) -> int:
        return copy_tree(self.checkpoint_dir, self.storage)

    def start(self) -> None:
        def loop() -> None:
            while not self._stop.wait(self.seconds):
                self.push()

        self._thread = threading.Thread(target=loop, name="checkpoint-sync", daemon=True)
        self._thread.start()

    def stop(self) -> int:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=60)
        return self.push()
