"""A job's `setup:` run once per node before its command: its own log section and its own failure reason.

The setup runs as a separate `bash -e` (`sh -e` where there is no bash): not a subshell, which in an `||` list
would ignore `set -e` (POSIX 2.8.1). It runs in the same place as the command (container or host), so whatever it
installs is there for the command; variables it exports are not (as with SkyPilot, whose setup and run are
separate scripts). The marker lines start with `[gpuplan `, which jobs.failure_cause reads and leaves out of the
"last line" it quotes.
"""

from __future__ import annotations

import re
import shlex

SETUP_START = "[gpuplan setup] node ${GPUPLAN_NODE_RANK:-0}: setup started"
SETUP_FAILED = "[gpuplan setup] failed with exit"
RUN_START = "[gpuplan run] node ${GPUPLAN_NODE_RANK:-0}: setup done, command started"
_FAILED_RE = re.compile(r"^\[gpuplan setup\] failed with exit (\d+)\s*$", re.MULTILINE)


def with_setup(setup: str, main: str) -> str:
    """`sh -c` text that runs `setup` (exit on its first failing line), then `main`; a failed setup ends the job
    with the setup's own exit code after a marker line."""
    return "\n".join([
        f'echo "{SETUP_START}" >&2',
        "gpuplan_setup_rc=0",
        "gpuplan_setup_sh=$(command -v bash || echo /bin/sh)",
        f'"$gpuplan_setup_sh" -ec {shlex.quote(setup)} || gpuplan_setup_rc=$?',
        'if [ "$gpuplan_setup_rc" -ne 0 ]; then',
        f'  echo "{SETUP_FAILED} $gpuplan_setup_rc" >&2',
        '  exit "$gpuplan_setup_rc"',
        "fi",
        f'echo "{RUN_START}" >&2',
        main,
    ])


def setup_failure(output: str) -> int | None:
    """The setup's exit code when the log says the setup failed (and the command never started), else None."""
    found = list(_FAILED_RE.finditer(output))
    if not found or "[gpuplan run] node" in output[found[-1].end():]:
        return None
    return int(found[-1].group(1))


def setup_cause(code: int, output: str) -> str | None:
    """The failure reason when a job ended with its setup's exit code after a failed setup, else None."""
    failed = setup_failure(output)
    if failed is None or failed != code or code == 0:
        return None
    lines = [ln.strip() for ln in output.splitlines() if ln.strip() and not ln.startswith("[gpuplan ")]
    last = lines[-1][:300] if lines else ""
    return f"setup failed (exit {code}), the command never ran" + (f": {last}" if last else "")
