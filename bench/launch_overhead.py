"""How much time gpuplan itself adds around a job on the local provider.

Launches a job that does nothing (`true`) several times with `gpuplan launch -y --json` (record, start the
detached wrapper, follow to the end, settle) and times `gpuplan status --json` and `gpuplan runs --json`.
Run: .venv/bin/python bench/launch_overhead.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def timed(args: list[str], env: dict[str, str]) -> tuple[float, str]:
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpuplan", *args], capture_output=True, text=True, env=env,
                          check=True)
    return time.perf_counter() - start, proc.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "GPUPLAN_HOME": home, "GPUPLAN_DB": f"sqlite:///{home}/bench.db"}
        spec = Path(home) / "noop.yaml"
        spec.write_text("name: noop\nruntime: process\ncommand: 'true'\n")
        timed(["db", "upgrade"], env)
        launches, statuses, lists = [], [], []
        run_id = ""
        for _ in range(args.repeat):
            seconds, out = timed(["launch", str(spec), "-y", "--json", "--interval", "0.2"], env)
            launches.append(seconds)
            run_id = json.loads(out)["run_id"]
            statuses.append(timed(["status", run_id, "--json"], env)[0])
            lists.append(timed(["runs", "--json"], env)[0])
    load = os.getloadavg()[0]
    print(f"launch -y --json of a no-op job, start to settled end: median {statistics.median(launches):.2f} s")
    print(f"status --json: median {statistics.median(statuses):.2f} s; runs --json: median "
          f"{statistics.median(lists):.2f} s  ({args.repeat} repeats, load average {load:.1f}, "
          f"{os.cpu_count()} CPUs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
