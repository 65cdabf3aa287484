"""A throw-away memory cgroup with a limit, to make the kernel's OOM killer end a real job in a test."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

V1 = Path("/sys/fs/cgroup/memory")
V2 = Path("/sys/fs/cgroup")


def _base() -> tuple[Path, str] | None:
    """(parent folder, limit file name) where this process may make a memory cgroup, or None."""
    if (V1 / "memory.limit_in_bytes").exists() and os.access(V1, os.W_OK):
        return V1, "memory.limit_in_bytes"
    controllers = V2 / "cgroup.subtree_control"
    if controllers.exists() and "memory" in controllers.read_text().split() and os.access(V2, os.W_OK):
        return V2, "memory.max"
    return None


@contextlib.contextmanager
def memory_limited(limit_bytes: int, name: str) -> Iterator[Callable[[], None]]:
    """A memory cgroup limited to `limit_bytes` (no swap); yields a preexec_fn that moves a child into it.
    Skips where no memory cgroup can be made (not root, no delegation)."""
    found = _base()
    if found is None:
        pytest.skip("cannot create a memory cgroup here (needs root and a writable cgroup memory controller)")
    parent, limit_file = found
    group = parent / f"{name}-{os.getpid()}"
    group.mkdir()
    try:
        (group / limit_file).write_text(str(limit_bytes))
        for swap in ("memory.memsw.limit_in_bytes", "memory.swap.max"):
            if (group / swap).exists():
                (group / swap).write_text(str(limit_bytes) if swap.endswith("bytes") else "0")
        procs = group / "cgroup.procs"

        def enter() -> None:
            procs.write_text(str(os.getpid()))

        yield enter
    finally:
        for _ in range(50):  # the killed processes leave the group a moment after they are reaped
            try:
                group.rmdir()
                break
            except OSError:
                time.sleep(0.1)
