"""What `gpuplan ui --allow-actions` may do that costs money: stop a run, launch a job spec.

Stopping is `gpuplan stop`'s own function. Launching is the CLI itself, run as a child process
(`gpuplan launch SPEC --dry-run --json` for the confirmation, then `gpuplan launch SPEC -y --detach --json`), so
the dashboard's launch goes through exactly the CLI's gates: where it runs, the estimate, budgets, caps and the
machine fail-safe. The pages only call these after a confirmation carrying the CSRF token (gpuplan.ui.pages).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpuplan.cli.context import AppContext
from gpuplan.errors import UserError

LAUNCH_TIMEOUT_S = 600  # `launch --detach` returns once the machines are started; a cloud may take minutes


def stop(app: AppContext, run_ref: str) -> None:
    """`gpuplan stop RUN`."""
    from gpuplan.runs.records import get_run
    from gpuplan.supervise.watch import stop_run

    with app.store.session() as session:
        run_id = get_run(session, run_ref).id
    stop_run(app.store, run_id)


def _spec(text: str) -> Path:
    path = Path(text.strip()).expanduser()
    if not text.strip() or not path.is_file():
        raise UserError(f"no job spec file at {text.strip()!r} (give a path on the machine gpuplan ui runs on)")
    return path.resolve()


def _cli(app: AppContext, *args: str) -> dict[str, Any]:
    """`gpuplan ARGS` on this dashboard's database; its JSON answer, or its one error line as a UserError."""
    argv = [sys.executable, "-m", "gpuplan", *(["--db", app.db_url] if app.db_url else []), *args]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=LAUNCH_TIMEOUT_S, env=dict(os.environ),
                          stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
        raise UserError(lines[-1].removeprefix("error: ") if lines else f"gpuplan {args[0]} exited {done.returncode}")
    try:
        value = json.loads(done.stdout)
    except ValueError:
        raise UserError(f"gpuplan {args[0]} did not answer JSON") from None
    if not isinstance(value, dict):
        raise UserError(f"gpuplan {args[0]} did not answer a JSON object")
    return value


def launch_plan(app: AppContext, spec_text: str) -> dict[str, Any]:
    """What launching the spec would do: `gpuplan launch SPEC --dry-run --json` (nothing started)."""
    path = _spec(spec_text)
    return {"spec": str(path), **_cli(app, "launch", str(path), "--dry-run", "--json")}


def launch(app: AppContext, spec_text: str) -> str:
    """`gpuplan launch SPEC -y --detach --json`; the new run's id."""
    found = _cli(app, "launch", str(_spec(spec_text)), "-y", "--detach", "--json")
    run_id = found.get("run_id")
    if not isinstance(run_id, str):
        raise UserError("gpuplan launch answered no run id")
    return run_id
