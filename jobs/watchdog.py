"""The cap of a local node, enforced by a second process that does not depend on the wrapper being scheduled.

The wrapper (gpuplan.jobs.runner) enforces `max_hours` (the tightest of the run's caps) with a timer of its own,
but a wrapper that is stopped (SIGSTOP: a debugger, a job-control ^Z, a frozen cgroup) or hung fires nothing,
and its job runs — and bills — on. `python -m gpuplan.jobs.watchdog NODE_DIR` is started by the local provider
next to the wrapper, in a session of its own, and holds the same two instants (runner.failsafe_deadlines):

- at the stop instant, if the wrapper has not begun its stop (no `stopping` file a second later), it sends
  SIGTERM to the job's processes itself (gpuplan.jobs.containment);
- at the kill instant (just before the cap), it kills every process of the job that is left; if the wrapper has
  not recorded the end a moment later, the wrapper is killed too and the watchdog records the end
  (reason max_hours), with the time the last process was gone: the books equal what ran.

It exits as soon as the node's end is recorded and nothing of the job is left.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from gpuplan.jobs import containment as contained
from gpuplan.jobs.runner import (
    BILLED_FROM_FILE,
    EXIT_FILE,
    LAUNCH_FILE,
    PID_FILE,
    STOPPING_FILE,
    NodeLaunch,
    failsafe_deadlines,
    read_exit,
    write_atomic,
)

POLL_SECONDS = 0.5
WRAPPER_RECORDS_WITHIN = 2.0  # a running wrapper records its end within milliseconds of its job's end
WRAPPER_FINISHES_WITHIN = 120.0  # ... or after copying the last checkpoints (gpuplan.jobs.local_sync)


def _sleep_until(when: float, node_dir: Path) -> bool:
    """Sleep until the epoch instant `when`; False early when the node ended and nothing of it is left."""
    while time.time() < when:
        if read_exit(node_dir) is not None and not contained.members(node_dir):
            return False
        time.sleep(min(POLL_SECONDS, max(when - time.time(), 0.0)))
    return True


def _wrapper(node_dir: Path) -> int | None:
    try:
        return int((node_dir / PID_FILE).read_text().strip())
    except (OSError, ValueError):
        return None


def _stopped(pid: int) -> bool:
    """The process is gone, or stopped by a signal or a tracer (/proc/PID/stat state T or t)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return True


def watch(node_dir: Path) -> int:
    """Enforce the node's cap; returns 0 (nothing to do or done)."""
    launch = NodeLaunch.from_json((node_dir / LAUNCH_FILE).read_text())
    if not launch.max_hours:
        return 0
    try:
        started = dt.datetime.fromisoformat((node_dir / BILLED_FROM_FILE).read_text().strip()).timestamp()
    except (OSError, ValueError):
        started = time.time()
    term_at, kill_at = failsafe_deadlines(started, launch.max_hours)
    if not _sleep_until(term_at + min(1.0, (kill_at - term_at) / 2), node_dir):
        return 0
    if not (node_dir / STOPPING_FILE).exists():  # the wrapper did not begin the stop: it is frozen or gone
        contained.signal_all(node_dir, signal.SIGTERM)
    if not _sleep_until(kill_at, node_dir):
        return 0
    killed = contained.kill_all(node_dir)
    gone_at = dt.datetime.now(dt.timezone.utc)
    wrapper = _wrapper(node_dir)
    quick = time.monotonic() + WRAPPER_RECORDS_WITHIN
    patient = time.monotonic() + WRAPPER_FINISHES_WITHIN
    while read_exit(node_dir) is None:
        # A stopped wrapper gets a moment; a running one may be copying checkpoints after its job's end.
        if time.monotonic() > (quick if wrapper is None or _stopped(wrapper) else patient):
            break
        time.sleep(0.05)
    if read_exit(node_dir) is not None:
        return 0
    if wrapper is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(wrapper, signal.SIGKILL)  # frozen past the cap: it must not record a later end when thawed
    write_atomic(node_dir / EXIT_FILE, json.dumps({
        "exit_code": -int(signal.SIGKILL), "ended_at": gone_at.isoformat(), "reason": "max_hours",
        "detail": f"the watchdog ended the job at its cap ({killed} process(es)): the wrapper did not "
                  "(stopped or hung)"}))
    contained.remove(contained.load(node_dir))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m gpuplan.jobs.watchdog NODE_DIR", file=sys.stderr)
        return 2
    return watch(Path(args[0]))


if __name__ == "__main__":
    sys.exit(main())
