"""Accuracy of `gpuplan estimate`'s default MFU prior against published training runs.

Usage:
    python bench/estimate_accuracy.py            # the table (markdown) and the median errors, tune vs holdout
    python bench/estimate_accuracy.py --fit      # grid-search the prior's constants on the *tune* rows only

Each row of tests/data/published_runs.csv is a real run with its source: model shape, GPU type and count,
tokens, and the GPU-hours the authors reported. We predict GPU-hours with the default prior (no --mfu, no
bench record) and report the error. Rows marked `holdout` are never used by --fit; how they were chosen is
SPLIT_SEED below. The `checked` column says whether the figure was re-read from a source in the last revision.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import itertools
import math
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuplan.architecture import Architecture  # noqa: E402
from gpuplan.estimate import Hardware, Workload, estimate  # noqa: E402
from gpuplan.estimating import mfu as mfu_module  # noqa: E402
from gpuplan.gpus import resolve_gpu  # noqa: E402

RUNS = ROOT / "tests" / "data" / "published_runs.csv"
# Held-out rule for rows added after the first 29 (whose split was set by hand before any fitting): a row is
# held out when the first byte of sha256(SPLIT_SEED + ":" + run) is below 77 (~30%). Fixed before fitting and
# independent of the numbers, so adding a row never reshuffles the others.
SPLIT_SEED = "gpuplan-holdout-2025"
HOLDOUT_BELOW = 77


def holdout_by_rule(run: str) -> bool:
    """Whether the seeded hash rule holds the run out of the fit."""
    return hashlib.sha256(f"{SPLIT_SEED}:{run}".encode()).digest()[0] < HOLDOUT_BELOW


def load_runs(path: Path = RUNS) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def workload_of(row: dict[str, str]) -> tuple[Workload, Hardware]:
    """The Workload and Hardware a published run describes."""
    gated = row["gated"] == "1"
    seq = int(row["seq_len"])
    arch = Architecture(
        name=row["run"], hidden_size=int(row["hidden"]), num_layers=int(row["layers"]),
        num_heads=int(row["heads"]), num_kv_heads=int(row["kv_heads"]), intermediate_size=int(row["intermediate"]),
        vocab_size=int(row["vocab"]), max_seq_len=seq, gated_mlp=gated, tied_embeddings=row["tied"] == "1",
        learned_positions=False, biases=not gated, layernorm=not gated,
    )
    gpus = int(row["gpus"])
    global_batch = max(1, round(float(row["global_batch_tokens"]) / seq))
    workload = Workload(params=round(float(row["params"])), tokens=round(float(row["tokens"])), architecture=arch,
                        seq_len=seq, global_batch=global_batch, micro_batch=max(1, min(4, global_batch // gpus)),
                        precision="bf16", sharding="zero1")  # Megatron distributed optimizer / ZeRO-1
    network = float(row["network_gbps"]) if row["network_gbps"] else None
    hardware = Hardware(resolve_gpu(row["gpu"]), gpus=gpus, gpus_per_node=min(8, gpus), network_gbps=network)
    return workload, hardware


def predict(row: dict[str, str]) -> float:
    workload, hardware = workload_of(row)
    return estimate(workload, hardware).gpu_hours


def errors(rows: list[dict[str, str]]) -> list[float]:
    """Signed relative errors (predicted / reported - 1)."""
    return [predict(r) / float(r["reported_gpu_hours"]) - 1 for r in rows]


def table(rows: list[dict[str, str]]) -> str:
    lines = ["| run | split | GPU | GPUs | tokens | reported GPU-h | predicted GPU-h | error | MFU used |",
             "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        workload, hardware = workload_of(r)
        est = estimate(workload, hardware)
        reported = float(r["reported_gpu_hours"])
        err = est.gpu_hours / reported - 1
        lines.append(f"| {r['run']} | {r['split']} | {r['gpu']} | {r['gpus']} | {float(r['tokens']):.3g} | "
                     f"{reported:,.0f} | {est.gpu_hours:,.0f} | {err:+.1%} | {est.effective_mfu:.1%} |")
    return "\n".join(lines)


def summary(rows: list[dict[str, str]]) -> dict[str, float]:
    errs = [abs(e) for e in errors(rows)]
    return {"runs": len(errs), "median_abs_error": statistics.median(errs), "mean_abs_error": statistics.fmean(errs),
            "within_10pct": sum(e <= 0.10 for e in errs) / len(errs)}


def naive(rows: list[dict[str, str]]) -> float:
    """Median |error| of the naive 6·N·D at 40% MFU the issue compares against."""
    errs = []
    for r in rows:
        gpu = resolve_gpu(r["gpu"])
        peak = gpu.peak_tflops("bf16") or 0.0
        hours = 6 * float(r["params"]) * float(r["tokens"]) / (0.4 * peak * 1e12) / 3600
        errs.append(abs(hours / float(r["reported_gpu_hours"]) - 1))
    return statistics.median(errs)


def fit(rows: list[dict[str, str]]) -> None:
    """Grid search of the prior's constants on `rows` (the tune split), minimising mean |log error|.

    Also prints the tune rows' median |error| of each of the best points (the target is a median); the
    held-out rows are never passed in.
    """
    grid = {
        "ampere": [0.50, 0.55, 0.60, 0.65, 0.70],
        "hopper": [0.30, 0.35, 0.40, 0.45, 0.50],
        "n0": [1e8, 3e8, 5e8, 1e9],
        "alpha": [0.2, 0.3, 0.4, 0.5],
        "parallel": [0.0, 0.05, 0.1],
    }
    results = []
    for ampere, hopper, n0, alpha, parallel in itertools.product(*grid.values()):
        mfu_module.BASE_MFU["ampere"], mfu_module.BASE_MFU["hopper"] = ampere, hopper
        mfu_module.SIZE_N0, mfu_module.SIZE_ALPHA, mfu_module.PARALLEL_PENALTY = n0, alpha, parallel
        ratios = [predict(r) / float(r["reported_gpu_hours"]) for r in rows]
        loss = statistics.fmean(abs(math.log(x)) for x in ratios)
        median = statistics.median(abs(x - 1) for x in ratios)
        results.append((loss, median, ampere, hopper, n0, alpha, parallel))
    results.sort()
    # The optimum is flat (many points within a few thousandths); the rule fixed before looking at the
    # held-out rows: among points within 0.005 of the best loss, take the lowest tune median |error|.
    chosen = min((r for r in results if r[0] <= results[0][0] + 0.005), key=lambda r: r[1])
    print("chosen: mean |log error| {:.3f} (median |error| {:.1%}): ampere {:.2f} hopper {:.2f} N0 {:.0e}"
          " alpha {:.1f} parallel {:.2f}".format(*chosen))
    for best in results[:8]:
        print("mean |log error| {:.3f} (median |error| {:.1%}): ampere {:.2f} hopper {:.2f} N0 {:.0e} alpha {:.1f}"
              " parallel {:.2f}".format(*best))


def memory_table() -> str:
    """Memory formulas against published figures (the ZeRO paper, Korthikanti et al., the fp32/fp16 floor)."""
    from gpuplan.estimating import memory
    from gpuplan.estimating.shape import shape_of

    def states(sharding: str) -> float:
        parts = memory.training_memory(shape_of(7_500_000_000, None), params=7_500_000_000,
                                       trainable_params=7_500_000_000, precision="bf16", optimizer="adamw",
                                       sharding=sharding, dp=64, micro_batch=1, seq_len=1024, checkpointing=False)
        return parts.weights + parts.gradients + parts.optimizer

    gpt = shape_of(0, Architecture("gpt", 2048, 24, 16, 16, 8192, 50257, 2048))
    rows = [("ZeRO paper Fig. 1: 7.5B, Adam mixed precision, 64 GPUs, no sharding (GB/GPU)", 120.0, states("none")),
            ("same, ZeRO-1 (optimizer states sharded)", 31.4, states("zero1")),
            ("same, ZeRO-2 (+ gradients)", 16.6, states("zero2")),
            ("same, ZeRO-3 (+ parameters)", 1.9, states("zero3")),
            ("Korthikanti et al. Table 2, eager attention: activations per layer, s·b·h·(34 + 5·a·s/h) bytes "
             "(s=2048, b=1, h=2048, a=16), MB", 2048 * 2048 * (34 + 5 * 16 * 2048 / 2048) / 1e6,
             memory.layer_activation_bytes(gpt, 2048, "bf16", attention="eager", dropout=True) / 1e6),
            ("same, flash attention: the 5·a·s² scores replaced by the fp32 logsumexp (Dao et al. 2022 sec. 3.1), "
             "34·s·b·h + 4·a·s·b bytes, MB", (34 * 2048 * 2048 + 4 * 16 * 2048) / 1e6,
             memory.layer_activation_bytes(gpt, 2048, "bf16", attention="flash", dropout=True) / 1e6)]
    for precision, floor in (("fp32", 28.0), ("fp16", 14.0)):
        est = estimate(Workload(params=7 * 10**9, tokens=1, mode="inference", precision=precision),
                       Hardware(resolve_gpu("A100-80GB")))
        rows.append((f"7B weights for inference in {precision} (GB)", floor, est.memory_gb_per_gpu.weights))
    lines = ["| figure | published | gpuplan |", "| --- | ---: | ---: |"]
    lines += [f"| {name} | {pub:g} | {ours:.3g} |" for name, pub, ours in rows]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="grid-search the prior on the tune split")
    args = parser.parse_args()
    rows = load_runs()
    tune = [r for r in rows if r["split"] == "tune"]
    holdout = [r for r in rows if r["split"] == "holdout"]
    if args.fit:
        fit(tune)
        return 0
    print(table(rows))
    print()
    for name, subset in (("tune", tune), ("holdout", holdout), ("all", rows)):
        s = summary(subset)
        print(f"{name}: {s['runs']} runs, median |error| {s['median_abs_error']:.1%}, "
              f"mean |error| {s['mean_abs_error']:.1%}, within 10%: {s['within_10pct']:.0%}")
    print(f"naive 6·N·D at 40% MFU, all runs: median |error| {naive(rows):.1%}")
    print()
    print(memory_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
