"""Finding a job's processes from outside by a marker: each test's job runs `sleep N` with an N no other process
uses, so what still sleeps N after the run ended is a process that outlived its books."""

from __future__ import annotations

from pathlib import Path

from gpuplan.jobs.processes import pid_alive


def sleeping(seconds: str) -> list[int]:
    """The live processes running `sleep <seconds>`, read from /proc."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            argv = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", seconds.encode()] and pid_alive(int(cmdline.parent.name)):
            found.append(int(cmdline.parent.name))
    return found
