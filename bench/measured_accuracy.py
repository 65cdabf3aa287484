"""How close is the *measured* path to what a real run then takes? bench -> launch -> estimate vs actual.

What a user does, through the real CLI in child processes, with an isolated GPUPLAN_HOME and database:
for each of several small GPT shapes (width, depth, sequence length and batch vary; step times span ~30x),
  1. `gpuplan bench --model-config cfg.json --seq-len S --micro-batch B` records tokens/s on this CPU;
  2. `gpuplan launch job.yaml -y --json` runs examples/train_gpt.py (its own training loop, not the bench's)
     on that config for ~RUN_SECONDS as a local process job; the spec's workload names the model, tokens,
     seq_len, micro_batch and precision but no throughput, so launch must find the bench record itself
     (mfu_source "bench" is checked);
  3. the run's estimate (recorded at launch) is compared with its actual hours, also via
     `gpuplan report --accuracy --json`.
The estimate is start-up + tokens / bench tokens/s (gpuplan.calibration.startup). The table shows the error with and
without the start-up part, so both the measured throughput and the start-up allowance are visible. Runs go in
order, so each run's start-up allowance is learned only from the runs before it (the first uses the default).

First it re-measures the local default start-up: `launch -y` of a no-op torch job
(gpuplan.calibration.startup.DEFAULTS).

Both bench and job run with OMP_NUM_THREADS=1 (the same setting for both: CPU throughput depends on it).
Usage: python bench/measured_accuracy.py [--run-seconds 25] [--only N]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TRAIN = ROOT / "examples" / "train_gpt.py"


@dataclass(frozen=True)
class Config:
    """A GPT-2-style shape (byte vocabulary) and the batch it trains with; `bench_steps` keeps the timed bench
    phase at a few seconds on this machine."""

    name: str
    width: int
    layers: int
    heads: int
    seq_len: int
    batch: int
    bench_steps: int

    def hf_config(self) -> dict[str, object]:
        return {"model_type": "gpt2", "n_embd": self.width, "n_layer": self.layers, "n_head": self.heads,
                "vocab_size": 256, "n_positions": 256}


CONFIGS = (
    Config("w64-l2 32x4", 64, 2, 2, 32, 4, 500),
    Config("w128-l2 64x8", 128, 2, 4, 64, 8, 100),
    Config("w128-l4 64x16", 128, 4, 4, 64, 16, 30),
    Config("w192-l3 128x8", 192, 3, 4, 128, 8, 15),
    Config("w256-l4 64x8", 256, 4, 4, 64, 8, 16),
)


def gpuplan(*args: str, env: dict[str, str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "gpuplan", *args], env=env, cwd=cwd, capture_output=True,
                            text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise SystemExit(f"gpuplan {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-2000:]}")
    return result


def seconds_between(summary: dict[str, object]) -> float:
    start = dt.datetime.fromisoformat(str(summary["started_at"]).replace("Z", "+00:00"))
    end = dt.datetime.fromisoformat(str(summary["ended_at"]).replace("Z", "+00:00"))
    return (end - start).total_seconds()


def noop_startup(env: dict[str, str], work: Path, repeats: int = 3) -> list[float]:
    """Seconds from start to end of a local job that only imports torch (the local default's measurement)."""
    spec = work / "noop.yaml"
    spec.write_text("name: noop-torch\nruntime: process\n"
                    "command: python -c \"import torch; torch.zeros(1)\"\nenv: {OMP_NUM_THREADS: 1}\n")
    return [seconds_between(json.loads(gpuplan("launch", str(spec), "-y", "--json", "--interval", "0.2",
                                               env=env, cwd=work).stdout)) for _ in range(repeats)]


@dataclass(frozen=True)
class Row:
    config: Config
    bench_tps: float
    run_tps: float | None
    run_id: str
    mfu_source: str | None
    startup_s: float
    startup_source: str | None
    est_s: float
    actual_s: float

    @property
    def throughput_only_s(self) -> float:
        return self.est_s - self.startup_s

    @property
    def error(self) -> float:
        return self.actual_s / self.est_s - 1

    @property
    def error_without_startup(self) -> float:
        return self.actual_s / self.throughput_only_s - 1


def measure(config: Config, env: dict[str, str], work: Path, run_seconds: float) -> Row:
    cfg = work / f"{config.name.replace(' ', '_')}.json"
    cfg.write_text(json.dumps(config.hf_config()))
    bench = json.loads(gpuplan("bench", "--model-config", str(cfg), "--seq-len", str(config.seq_len),
                               "--micro-batch", str(config.batch), "--steps", str(config.bench_steps),
                               "--warmup", "5", "--precision", "fp32", "--json", env=env, cwd=work).stdout)
    tps = float(bench["tokens_per_s"])
    per_step = config.batch * config.seq_len
    steps = max(20, round(run_seconds * tps / per_step))
    log_every = max(1, steps // 50)
    spec = work / f"{cfg.stem}.yaml"
    spec.write_text(
        f"name: measured-{cfg.stem}\nruntime: process\n"
        f"command: python {TRAIN} --config {cfg} --steps {steps} --batch {config.batch} "
        f"--seq-len {config.seq_len} --log-every {log_every}\n"
        "env: {OMP_NUM_THREADS: 1}\n"
        f"workload:\n  model_config: {cfg}\n  tokens: {steps * per_step}\n  seq_len: {config.seq_len}\n"
        f"  micro_batch: {config.batch}\n  precision: fp32\n"
        "limits: {max_hours: 0.1}\n")
    summary = json.loads(gpuplan("launch", str(spec), "-y", "--json", "--interval", "0.5", env=env,
                                 cwd=work).stdout)
    if summary["state"] != "succeeded":
        raise SystemExit(f"{config.name}: run {summary['run_id']} {summary['state']}: {summary.get('state_reason')}")
    return Row(config=config, bench_tps=tps, run_tps=summary.get("tokens_per_s"), run_id=str(summary["run_id"]),
               mfu_source=summary.get("mfu_source"), startup_s=float(summary.get("startup_s") or 0.0),
               startup_source=summary.get("startup_source"), est_s=float(summary["est_hours"]) * 3600,
               actual_s=seconds_between(summary))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-seconds", type=float, default=25.0, help="training time each run aims at")
    parser.add_argument("--only", type=int, help="the first N configurations only")
    args = parser.parse_args()
    configs = CONFIGS[: args.only] if args.only else CONFIGS
    started = time.monotonic()
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="gpuplan-measured-") as tmp:
        work = Path(tmp)
        env = {**os.environ, "GPUPLAN_HOME": str(work / "home"), "GPUPLAN_DB": f"sqlite:///{work / 'gpuplan.db'}",
               "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        env.pop("GPUPLAN_LOCAL_PRICE_PER_HOUR", None)
        noop = noop_startup(env, work)
        rows = []
        for config in configs:
            rows.append(measure(config, env, work, args.run_seconds))
            print(f"  {config.name}: done ({time.monotonic() - started:.0f} s so far)", file=sys.stderr, flush=True)
        accuracy = json.loads(gpuplan("report", "--accuracy", "--json", env=env, cwd=work).stdout)
    load_after = os.getloadavg()[0]
    by_run = {r["run_id"]: r for r in accuracy["runs"]}
    print(f"no-op torch job on local (start -> end): median {statistics.median(noop):.2f} s "
          f"({', '.join(f'{s:.2f}' for s in noop)})")
    print(f"machine: {os.cpu_count()} cores, load average {load_before:.1f} before / {load_after:.1f} after; "
          f"OMP_NUM_THREADS=1; {args.run_seconds:.0f} s of training per run\n")
    print("| config (width-layers seq x batch) | bench tok/s | run tok/s | est s (tokens/bench) | start-up s "
          "| est s | actual s | error w/o start-up | error |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    failures = []
    for row in rows:
        if row.mfu_source != "bench":
            failures.append(f"{row.config.name}: launch used mfu_source {row.mfu_source!r}, not the bench record")
        reported = by_run.get(row.run_id)
        if reported is None or not math.isclose(reported["actual_hours"] * 3600, row.actual_s, abs_tol=0.01):
            failures.append(f"{row.config.name}: report --accuracy disagrees with status for {row.run_id}")
        run_tps = f"{row.run_tps:,.0f}" if row.run_tps else "-"
        print(f"| {row.config.name} | {row.bench_tps:,.0f} | {run_tps} | {row.throughput_only_s:.1f} "
              f"| {row.startup_s:.1f} ({row.startup_source}) | {row.est_s:.1f} | {row.actual_s:.1f} "
              f"| {row.error_without_startup:+.1%} | {row.error:+.1%} |")
    before = statistics.median(abs(r.error_without_startup) for r in rows)
    after = statistics.median(abs(r.error) for r in rows)
    print(f"\nmedian |error|: {before:.1%} without the start-up allowance, {after:.1%} with it "
          f"(report --accuracy median_abs_hours_error {accuracy['summary']['median_abs_hours_error']:.1%})")
    print(f"total {time.monotonic() - started:.0f} s")
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
