"""Issue 35, item 4: `status` listed a run twice (live, then ended) right after its fail-safe fired.

The queue is read (the run is live), each live run is asked of its provider (the machine's own timer has ended it:
now it is capped), then the ended list is read: the same run again. Reproduced with a detached local run whose
max_hours timer fires with nobody watching, then one `gpuplan status` in a child process.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from support.clihelp import run_subprocess


def test_a_run_ended_by_its_failsafe_is_listed_once(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: timer\nruntime: process\ncommand: sleep 60\nlimits: {max_hours: 0.0005}\n")  # 1.8 s
    launched = run_subprocess("launch", str(spec), "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    exit_file = Path(launched.json().get("run_dir") or "") / "node-0" / "exit.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not exit_file.exists():  # the wrapper's own timer has fired
        time.sleep(0.2)
    assert exit_file.exists(), "the fail-safe never fired"
    out = run_subprocess("status", "--json")
    assert out.exit_code == 0, out.stderr
    doc = out.json()
    listed = [r["run_id"] for r in [*doc["live"], *doc["ended"]]]
    assert listed.count(run_id) == 1, json.dumps(doc, default=str)
    (row,) = [r for r in doc["ended"] if r["run_id"] == run_id]
    assert row["state"] == "capped"
    table = run_subprocess("status")
    assert table.exit_code == 0 and table.stdout.count(run_id) == 1, table.stdout
