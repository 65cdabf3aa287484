"""Budgets under concurrency, through the CLI as separate processes, on SQLite and on PostgreSQL.

Each `gpuplan launch` reserves its most possible spend (fail-safe hours x price x nodes) under a lock in the
transaction that records its run (gpuplan.launching.reserve); these tests start the launches at once and check
that the books never promise, or spend, more than the budget holds.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

from support.clihelp import run_cli

PRICE = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "3600"}  # a dollar a second: a second too many shows


def job(tmp_path: Path, name: str, command: str, extra: str = "") -> Path:
    path = tmp_path / f"{name}.yaml"
    # 8 tokens at 1 token/s plus the local start-up allowance (2.1 s): estimated at $10.10.
    path.write_text(f"name: {name}\nruntime: process\ncommand: {json.dumps(command)}\n"
                    f"workload:\n  tokens: 8\n  throughput: 1\n{extra}")
    return path


def launch_at_once(spec: Path, env: dict[str, str], count: int) -> list[subprocess.CompletedProcess[str]]:
    """`count` `gpuplan launch -y --detach --json` processes started together; their results."""
    full = {**os.environ, **env}
    procs = [subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(spec), "-y", "--detach", "--json"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)
             for _ in range(count)]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=240)
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


def usd(value: float | str) -> Decimal:
    """A JSON amount as the exact decimal it was printed as."""
    return Decimal(str(value))


def cli(env: dict[str, str], *args: str) -> dict | list:
    """A query around the launches, in-process (the same code; the launches themselves are the processes)."""
    out = run_cli(*args, "--json", env=env)
    assert out.exit_code == 0, out.stderr
    return out.json()  # type: ignore[no-any-return]


def wait_until_ended(env: dict[str, str], run_id: str) -> dict:
    """`status` (which settles a run whose machines ended) until the run is over; its summary."""
    deadline = time.monotonic() + 60
    while True:
        summary = cli(env, "status", run_id)
        if summary["state"] not in ("pending", "provisioning", "running") or time.monotonic() > deadline:
            return summary  # type: ignore[return-value]
        time.sleep(0.3)


@pytest.mark.timeout(300)
def test_eight_parallel_launches_where_two_fit_run_exactly_two(tmp_path: Path, db_url: str) -> None:
    env = {**PRICE, "GPUPLAN_DB": db_url}
    # Each run reserves 20 s = $20 (max_hours); $45 holds two, and then $5 is free: under the $10.10 estimate.
    spec = job(tmp_path, "two-fit", "sleep 1", "limits:\n  max_hours: 0.0055555556\n")
    assert run_cli("budget", "set", "lab", "--amount", "45", "--period", "total", env=env).exit_code == 0
    results = launch_at_once(spec, env, 8)
    ran = [r for r in results if r.returncode == 0]
    refused = [r for r in results if r.returncode != 0]
    assert len(ran) == 2, [r.stderr for r in results]
    assert len(refused) == 6 and all(r.returncode == 2 for r in refused), [r.stderr for r in refused]
    for r in refused:
        errors = [line for line in r.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and errors[0].startswith("error: refused: budget 'lab'"), r.stderr
        assert "Traceback" not in r.stderr
    [status] = cli(env, "budget", "status")  # nobody has looked at the runs yet: both still hold $20
    assert Decimal(39) <= usd(status["spent_usd"]) + usd(status["reserved_usd"]) <= Decimal(45)
    runs = cli(env, "runs")
    assert sorted(r["run_id"] for r in runs) == sorted(json.loads(r.stdout)["run_id"] for r in ran)  # nothing else
    # Once the runs ended and settled, their unused reservations are free again.
    for run in runs:
        wait_until_ended(env, run["run_id"])
    [status] = cli(env, "budget", "status")
    assert usd(status["reserved_usd"]) == 0
    assert usd(status["free_usd"]) == Decimal(45) - usd(status["spent_usd"])


@pytest.mark.timeout(300)
def test_concurrent_launches_without_a_watcher_never_spend_more_than_the_budget(tmp_path: Path, db_url: str) -> None:
    """The issue's race: three jobs estimated under the budget each, launched at once, nobody watching. The first
    reserves all the $4 (no max_hours: its fail-safe is what is free), the others are refused, and its own timer
    stops it before it has cost more than that."""
    env = {**PRICE, "GPUPLAN_DB": db_url}
    spec = tmp_path / "race.yaml"
    # Estimated at $2.60 (0.5 s of work + the 2.1 s start-up allowance): one fits in $4, two do not.
    spec.write_text("name: race\nruntime: process\ncommand: sleep 60\nworkload:\n  tokens: 1\n  throughput: 2\n")
    assert run_cli("budget", "set", "cap", "--amount", "4", "--period", "total", env=env).exit_code == 0
    results = launch_at_once(spec, env, 3)
    assert sorted(r.returncode for r in results) == [0, 2, 2], [r.stderr for r in results]
    [winner] = [json.loads(r.stdout)["run_id"] for r in results if r.returncode == 0]
    final = wait_until_ended(env, winner)
    assert final["state"] == "capped", final
    assert Decimal(2) <= usd(final["cost_usd"]) <= Decimal(4), final
    [status] = cli(env, "budget", "status")
    assert usd(status["spent_usd"]) <= Decimal(4) and usd(status["reserved_usd"]) == 0
