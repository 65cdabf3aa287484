"""Wall time of `gpuplan estimate ...` in a fresh subprocess (target: < 150 ms), and what it imported.

Usage: python bench/estimate_speed.py [--runs 20]
Prints the median and best wall time of a few typical invocations, the bare-interpreter baseline, and fails
(exit 1) when the median exceeds the target or a heavy module (pandas, torch, boto3, sqlalchemy) was imported.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
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


def wall(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of `argv` in a fresh process.

    CPU time is reported too because on a shared, loaded machine the wall time mostly measures the wait for a
    core; the CPU time is what the command itself costs.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, text=True, env=env)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {proc.stderr.strip()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


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
        baseline = [wall([sys.executable, "-c", "pass"], env)[0] for _ in range(args.runs)]
        results = []
        for case in CASES:
            samples = [wall([sys.executable, "-m", "gpuplan", *case], env) for _ in range(args.runs)]
            times, cpus = [w for w, _ in samples], [c for _, c in samples]
            heavy = sorted(imported_modules(case, env) & set(HEAVY))
            results.append({"command": "gpuplan " + " ".join(case),
                            "median_ms": round(statistics.median(times) * 1e3, 1),
                            "best_ms": round(min(times) * 1e3, 1),
                            "median_cpu_ms": round(statistics.median(cpus) * 1e3, 1), "heavy_imports": heavy})
    report = {"target_ms": TARGET_S * 1e3, "runs": args.runs, "load_average": round(os.getloadavg()[0], 2),
              "cpus": os.cpu_count(), "python_startup_median_ms": round(statistics.median(baseline) * 1e3, 1),
              "cases": results}
    print(json.dumps(report, indent=2))
    # On an overloaded machine (load average above the core count) the wall time measures the queue for a core;
    # then the CPU time is the command's own cost and is what we hold to the target. Both are printed.
    loaded = report["load_average"] > (os.cpu_count() or 1)
    key = "median_cpu_ms" if loaded else "median_ms"
    ok = all(r[key] <= TARGET_S * 1e3 and not r["heavy_imports"] for r in results)
    print(f"{'PASS' if ok else 'FAIL'} on {key}" + (" (machine overloaded: wall time is queueing)" if loaded else ""),
          file=sys.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
