"""How fast is `gpuplan prices --gpu H100`, and how fast does the planner get the whole catalog?

Targets (issue 5): `gpuplan prices --gpu H100` under 300 ms wall; loading the whole catalog in-process well
under 100 ms. Wall time on a shared machine includes waiting for a CPU, so the child's CPU time (user+sys) is
printed too, next to the bare interpreter's start-up as a floor.

    .venv/bin/python bench/prices_speed.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, child CPU ms) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000
    return wall, cpu


def bench_cli(label: str, cmd: list[str], env: dict[str, str], repeats: int) -> None:
    run_timed(cmd, env)  # warm the page cache and .pyc files
    runs = [run_timed(cmd, env) for _ in range(repeats)]
    walls, cpus = [w for w, _ in runs], [c for _, c in runs]
    print(f"{label:<52} wall median {statistics.median(walls):6.0f} ms (min {min(walls):4.0f})   "
          f"cpu median {statistics.median(cpus):5.0f} ms")


def bench_in_process(label: str, fn, repeats: int) -> None:  # type: ignore[no-untyped-def]
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    print(f"{label:<52} median {statistics.median(times):6.1f} ms (min {min(times):5.1f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()

    from gpuplan.catalog import Catalog
    from gpuplan.catalog.tflops import peak_tflops_table
    from gpuplan.catalog.view import cheapest_per_region, sort_rows

    with tempfile.TemporaryDirectory(prefix="gpuplan-bench-") as tmp:
        home = Path(tmp)
        shipped_env = {**os.environ, "GPUPLAN_HOME": str(home / "shipped"),
                       "GPUPLAN_DB": f"sqlite:///{home / 'shipped' / 'gpuplan.db'}"}
        refreshed_url = f"sqlite:///{home / 'refreshed' / 'gpuplan.db'}"
        refreshed_env = {**os.environ, "GPUPLAN_HOME": str(home / "refreshed"), "GPUPLAN_DB": refreshed_url}
        _store_refresh(refreshed_url)  # a DB holding a refreshed snapshot of both clouds (read via sqlite3)

        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{os.getloadavg()[0]:.1f}, {args.repeats} runs each\n")
        bench_cli("python -c pass (interpreter start-up floor)", [sys.executable, "-c", "pass"], shipped_env,
                  args.repeats)
        cmd = [sys.executable, "-m", "gpuplan", "prices", "--gpu", "H100"]
        bench_cli("gpuplan prices --gpu H100 (shipped snapshot)", cmd, shipped_env, args.repeats)
        bench_cli("gpuplan prices --gpu H100 (refreshed SQLite DB)", cmd, refreshed_env, args.repeats)
        bench_cli("gpuplan prices --gpu H100 --json", [*cmd, "--json"], shipped_env, args.repeats)
        print()
        os.environ.update(GPUPLAN_HOME=shipped_env["GPUPLAN_HOME"], GPUPLAN_DB=shipped_env["GPUPLAN_DB"])
        catalog = Catalog.load()
        print(f"whole catalog: {len(catalog.offers)} offers "
              f"({', '.join(f'{c} {s.offer_count}' for c, s in catalog.sources.items())})")
        bench_in_process("Catalog.load() shipped snapshot, in-process", Catalog.load, 30)
        bench_in_process("Catalog.load() refreshed SQLite DB, in-process", lambda: Catalog.load(refreshed_url), 30)
        peaks = peak_tflops_table()
        bench_in_process("select+cheapest zone+sort over all offers (loaded)",
                         lambda: sort_rows(cheapest_per_region(catalog.select(spot=False), spot=False,
                                                               peak_tflops=peaks), "price-per-tflop"), 30)
        bench_in_process("catalog.select(gpus={'H100'}) (loaded)", lambda: catalog.select(gpus={"H100"}), 30)


def _store_refresh(url: str) -> None:
    from gpuplan.catalog import Catalog
    from gpuplan.catalog.stored import save_snapshot
    from gpuplan.store.db import Store

    offers = Catalog.load(f"sqlite:///{url.removeprefix('sqlite:///')}.none").offers
    store = Store.open(url)
    try:
        now = dt.datetime.now(dt.timezone.utc)
        for cloud in ("aws", "gcp"):
            save_snapshot(store, cloud, f"bench copy of the shipped {cloud} rows",
                          [o for o in offers if o.cloud == cloud], now)
    finally:
        store.close()


if __name__ == "__main__":
    main()
