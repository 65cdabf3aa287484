"""Scale: seed 1,000,000 instance rows into SQLite and time `gpuplan report --by month` (target: under 2 s).

    .venv/bin/python bench/report_scale.py [--rows 1000000] [--db /tmp/gpuplan-scale.db] [--keep]

Rows are bulk-inserted with SQLAlchemy Core executemany (a few seconds per million). The timed part is the
whole CLI as a user runs it (`python -m gpuplan report --by month --format csv`, a fresh process: interpreter
start, imports, opening the store, the query, pandas shaping), best of three; the in-process ledger query time
is printed too. The script checks that the report's total equals the Decimal sum of the costs of every row.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from decimal import Decimal
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuplan.books import ledger  # noqa: E402
from gpuplan.runs import cost as costing  # noqa: E402
from gpuplan.store.db import Store  # noqa: E402
from gpuplan.store.models import InstanceRow  # noqa: E402

UTC = dt.timezone.utc
NOW = dt.datetime(2026, 12, 10, 12, tzinfo=UTC)
PRICES = [("aws", "H100", "p5.48xlarge", "98.32"), ("aws", "A10G", "g5.xlarge", "1.006"),
          ("gcp", "A100", "a2-highgpu-1g", "3.673"), ("gcp", "L4", "g2-standard-4", "0.7068"),
          ("local", None, None, "0")]


def seed(url: str, rows: int, seed_value: int = 1) -> None:
    """Runs of 1-8 instances over two years; ~5% still running; lengths from seconds to days.

    Rows go in in launch order, as a real ledger grows. The schema comes from Store.open (the real
    migrations); the rows are written with the sqlite3 driver's executemany, in SQLAlchemy's storage formats.
    """
    rng = random.Random(seed_value)
    Store.open(url).close()
    start0 = dt.datetime(2025, 1, 1, tzinfo=UTC)
    span = int((NOW - start0).total_seconds())
    fmt = "%Y-%m-%d %H:%M:%S.%f"
    launches = sorted(start0 + dt.timedelta(seconds=rng.randrange(span), microseconds=rng.randrange(10**6))
                      for _ in range(rows // 4))
    run_rows, inst_rows = [], []
    for launched in launches:
        if len(inst_rows) >= rows:
            break
        run_id = f"r-{len(run_rows):010x}"
        cloud, gpu, itype, price = rng.choice(PRICES)
        created = launched.strftime(fmt)
        run_rows.append((run_id, "bench", rng.choice(["nlp", "vision", "speech", None]), rng.choice(["a", "b"]),
                         cloud, "succeeded", "", "", created, created, cloud))
        for rank in range(min(rng.randint(1, 7), rows - len(inst_rows))):
            length = dt.timedelta(seconds=rng.choice([30, 600, 3600 * 4, rng.randrange(3 * 86400)]))
            end = None if rng.random() < 0.05 and launched + length > NOW - dt.timedelta(days=3) else (
                launched + length)
            inst_rows.append((run_id, cloud, f"i-{len(inst_rows)}", cloud, gpu, itype, 8.0, rng.random() < 0.3,
                              rank, price, 0 if cloud == "local" else 60, "terminated", created,
                              None if end is None else end.strftime(fmt)))
    with sqlite3.connect(url.removeprefix("sqlite:///")) as conn:
        conn.executemany("INSERT INTO runs (id, name, project, user, provider, state, spec_text, spec_hash, "
                         "created_at, updated_at, cloud, nodes, spot) VALUES (?,?,?,?,?,?,?,?,?,?,?,1,0)", run_rows)
        conn.executemany("INSERT INTO instances (run_id, provider, provider_instance_id, cloud, gpu, instance_type, "
                         "gpu_count, spot, node_rank, price_per_hour, min_billed_seconds, state, launched_at, "
                         "terminated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)", inst_rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--keep", action="store_true", help="Keep the database afterwards.")
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="gpuplan-scale-")) / "scale.db"
    url = f"sqlite:///{db}"
    if not db.exists():
        t0 = time.perf_counter()
        seed(url, args.rows)
        print(f"seeded {args.rows:,} instance rows in {time.perf_counter() - t0:.1f} s ({db})")

    store = Store.open(url)
    with store.engine.connect() as conn:
        t0 = time.perf_counter()
        result = ledger.spend(conn, now=NOW, unit="month")
        query_s = time.perf_counter() - t0
        rows = conn.execute(InstanceRow.__table__.select()).all()
    expected = costing.total_cost(rows, NOW)
    store.close()
    assert result.total_cost == expected, (result.total_cost, expected)
    print(f"ledger.spend(unit=month) in-process: {query_s:.2f} s, {len(result.rows)} months, "
          f"total ${result.total_cost:,.6f} == Decimal sum over {len(rows):,} rows")

    env = {**os.environ, "GPUPLAN_DB": url, "GPUPLAN_NOW": NOW.isoformat()}
    cmd = [sys.executable, "-m", "gpuplan", "report", "--by", "month", "--format", "csv"]
    times, cpu = [], []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        times.append(time.perf_counter() - t0)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    total = sum(Decimal(line.rsplit(",", 1)[1]) for line in proc.stdout.splitlines()[1:])
    assert total == expected, (total, expected)
    best = min(times)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"gpuplan report --by month (fresh process): wall best {best:.2f} s of "
          f"{', '.join(f'{t:.2f}' for t in times)}; CPU (user+sys) best {min(cpu):.2f} s "
          f"-> {'PASS' if best < 2.0 else 'FAIL'} (target < 2 s wall); load average {load} on {os.cpu_count()} CPUs")
    if not args.keep and args.db is None:
        for path in db.parent.glob("scale.db*"):
            path.unlink()
        db.parent.rmdir()
    sys.exit(0 if best < 2.0 else 1)


if __name__ == "__main__":
    main()
