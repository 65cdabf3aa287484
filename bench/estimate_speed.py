"""Wall time of `gpuplan estimate ...` in a fresh subprocess (target: < 150 ms), and what it imported.

Usage: python bench/estimate_speed.py [--runs 20]
Prints the median and best wall time of a few typical invocations, the bare-interpreter baseline, and fails
(exit 1) when the median exceeds the target or a heavy module (pandas, torch, boto3, sqlalchemy) was imported.
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

TARGET_S = 0.150
HEAVY = ("pandas", "torch", "boto3", "botocore", "sqlalchemy", "alembic", "numpy", "google", "rich")
CASES = [
    ["estimate", "--model", "llama-2-7b", "--tokens", "2T", "--gpu", "A100-80GB", "--gpus", "64"],
    ["estimate", "--params", "70B", "--tokens", "1T", "--gpu", "H100", "--sharding", "zero3", "--json"],
    ["estimate", "--params", "7B", "--tokens", "1B", "--gpu", "L4", "--mode", "inference", "--json"],
]


def wall(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    return elapsed


def imported_modules(args: list[str], env: dict[str, str]) -> set[str]:
    code = ("import sys, runpy; sys.argv = ['gpuplan', *sys.argv[1:]]\n"
            "try:\n    runpy.run_module('gpuplan', run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "sys.stderr.write('\\nMODULES ' + ' '.join(sorted(sys.modules)))")
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env)
    line = proc.stderr.rsplit("MODULES ", 1)[-1]
    return {m.split(".")[0] for m in line.split()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        # A fresh home: no database, as on a new machine (the store is only read if it exists).
        env = {**os.environ, "GPUPLAN_HOME": home, "GPUPLAN_DB": f"sqlite:///{home}/gpuplan.db"}
        baseline = [wall([sys.executable, "-c", "pass"], env) for _ in range(args.runs)]
        results = []
        for case in CASES:
            times = [wall([sys.executable, "-m", "gpuplan", *case], env) for _ in range(args.runs)]
            heavy = sorted(imported_modules(case, env) & set(HEAVY))
            results.append({"command": "gpuplan " + " ".join(case), "median_ms": statistics.median(times) * 1e3,
                            "best_ms": min(times) * 1e3, "heavy_imports": heavy})
    report = {"target_ms": TARGET_S * 1e3, "runs": args.runs,
              "python_startup_median_ms": statistics.median(baseline) * 1e3, "cases": results}
    print(json.dumps(report, indent=2))
    ok = all(r["median_ms"] <= TARGET_S * 1e3 and not r["heavy_imports"] for r in results)
    print("PASS" if ok else "FAIL", file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
