"""Pause points for crash tests: the one way a test stops `gpuplan launch` at an exact step to SIGKILL it there.

`GPUPLAN_TEST_PAUSE_AT=<point>` makes the process, on reaching `pause_point("<point>")`, write its pid to the file
named by `GPUPLAN_TEST_PAUSE_FILE` (if set) and sleep until it is killed. The test waits for that file, kills the
process with SIGKILL, and checks that a new process (`gpuplan stop`, `status`, `reconcile`) recovers. Outside tests
the variable is unset and a pause point costs one environment lookup.

Points (see tests/e2e/test_crash_recovery.py): `reserved` (the run and its budget reservation committed, no
launch plan yet), `started` (machines started and recorded, the launch about to return), `recorded` (run and
launch plan committed, no cloud call yet),
`launched` (the provider returned machines, their rows not yet committed), `teardown` (a stop or cap committed,
its machines not yet asked to terminate); for a spot relaunch (gpuplan.supervise.relaunch), `relaunch_planned` (the
interruption and the relaunch's plan committed, no cloud call yet) and `relaunched` (new machines started, not yet
recorded).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

PAUSE_AT = "GPUPLAN_TEST_PAUSE_AT"
PAUSE_FILE = "GPUPLAN_TEST_PAUSE_FILE"
PAUSE_RESUME = "GPUPLAN_TEST_PAUSE_RESUME"  # set: go on once the pause file is removed (the disk-full test)


def pause_point(name: str) -> None:
    """Sleep here for good when a crash test asked for this point; otherwise return at once."""
    if os.environ.get(PAUSE_AT) != name:
        return
    marker = os.environ.get(PAUSE_FILE)
    if marker:
        tmp = Path(f"{marker}.{os.getpid()}.tmp")
        tmp.write_text(str(os.getpid()))
        os.replace(tmp, marker)
    if os.environ.get(PAUSE_RESUME) and marker:  # resume when the test removes the file (it changed something)
        while Path(marker).exists():
            time.sleep(0.02)
        return
    while True:
        time.sleep(3600)
