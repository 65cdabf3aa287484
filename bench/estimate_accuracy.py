"""Accuracy of `gpuplan estimate`'s default MFU prior against published training runs.

Usage:
    python bench/estimate_accuracy.py            # the table (markdown) and the median errors per split
    python bench/estimate_accuracy.py --loo      # + leave-one-out / leave-one-family-out errors (all scored rows)
    python bench/estimate_accuracy.py --fit      # fit the prior's constants on the *tune* rows only

Each row of tests/data/published_runs.csv is a real run with its source: model shape, GPU type and count,
tokens, and the GPU-hours the authors reported. We predict GPU-hours with the default prior (no --mfu, no
bench record) and report the error. Splits:
- `tune`: the rows the constants are fitted on. Their in-sample median flatters the prior; `--loo` predicts
  every scored row (tune and test) from constants fitted on all the other rows, and on all the other model
  families: the honest figures for a run, and for a model family, the prior has not seen.
- `test`: rows found after the model and its constants were frozen, by someone told not to look at
  predictions; evaluated once, never fitted. Their median is the figure for runs we have not seen.
Rows with a reason in `exclude` (hours that cover more than one model's pre-training, mixture-of-experts,
non-NVIDIA hardware, unknown GPU count, not an attention transformer: rules fixed before any of them was
predicted) are listed, not scored. A row without the model's shape is predicted from its parameter count.
The `checked` column says whether the figure was re-read from a source.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import math
import re
import statistics
import sys
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpuplan.architecture import Architecture  # noqa: E402
from gpuplan.estimate import Hardware, Workload, estimate  # noqa: E402
from gpuplan.estimating import mfu as mfu_module  # noqa: E402
from gpuplan.gpus import resolve_gpu  # noqa: E402

RUNS = ROOT / "tests" / "data" / "published_runs.csv"
SPLITS = ("tune", "test")
# The fitted constants: generation ceilings with published runs in the table, and the size curve.
FITTED = ("ampere", "hopper", "n0", "alpha")


def load_runs(path: Path = RUNS, *, scored: bool = True) -> list[dict[str, str]]:
    """The table's rows; `scored` drops the rows with an `exclude` reason."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if not (scored and r.get("exclude", "").strip())]


def workload_of(row: dict[str, str]) -> tuple[Workload, Hardware]:
    """The Workload and Hardware a published run describes."""
    seq = int(row["seq_len"])
    arch = None  # a row without the model's shape is predicted from its parameter count, as `--params` does
    if row["layers"].strip():
        gated = row["gated"] == "1"
        arch = Architecture(
            name=row["run"], hidden_size=int(row["hidden"]), num_layers=int(row["layers"]),
            num_heads=int(row["heads"]), num_kv_heads=int(row["kv_heads"]),
            intermediate_size=int(row["intermediate"]), vocab_size=int(row["vocab"]), max_seq_len=seq,
            gated_mlp=gated, tied_embeddings=row["tied"] == "1", learned_positions=False, biases=not gated,
            layernorm=not gated,
        )
    gpus = int(row["gpus"])
    gpu = resolve_gpu(row["gpu"])
    precision = "bf16" if gpu.peak_tflops("bf16") else "fp16"  # V100-era runs trained in fp16
    global_batch = max(1, round(float(row["global_batch_tokens"]) / seq))
    workload = Workload(params=round(float(row["params"])), tokens=round(float(row["tokens"])), architecture=arch,
                        seq_len=seq, global_batch=global_batch, micro_batch=max(1, min(4, global_batch // gpus)),
                        precision=precision, sharding="zero1")  # Megatron distributed optimizer / ZeRO-1
    network = float(row["network_gbps"]) if row["network_gbps"] else None
    hardware = Hardware(gpu, gpus=gpus, gpus_per_node=min(8, gpus), network_gbps=network)
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
        peak = gpu.peak_tflops("bf16") or gpu.peak_tflops("fp16") or 0.0
        hours = 6 * float(r["params"]) * float(r["tokens"]) / (0.4 * peak * 1e12) / 3600
        errs.append(abs(hours / float(r["reported_gpu_hours"]) - 1))
    return statistics.median(errs)


@contextlib.contextmanager
def prior_constants(values: dict[str, float]) -> Iterator[None]:
    """Temporarily set the prior's fitted constants (the bench's search only; the product never changes them)."""
    saved = current_constants()
    _apply(values)
    try:
        yield
    finally:
        _apply(saved)


def current_constants() -> dict[str, float]:
    return {"ampere": mfu_module.BASE_MFU["ampere"], "hopper": mfu_module.BASE_MFU["hopper"],
            "n0": mfu_module.SIZE_N0, "alpha": mfu_module.SIZE_ALPHA}


def _apply(values: dict[str, float]) -> None:
    mfu_module.BASE_MFU["ampere"], mfu_module.BASE_MFU["hopper"] = values["ampere"], values["hopper"]
    mfu_module.SIZE_N0, mfu_module.SIZE_ALPHA = values["n0"], values["alpha"]


def log_loss(rows: list[dict[str, str]], values: dict[str, float]) -> float:
    """Mean |log(predicted / reported)|: a ratio error, symmetric for over- and under-prediction, and robust
    (an L1 loss is minimised by the median ratio, which is what the target is stated in)."""
    with prior_constants(values):
        return statistics.fmean(abs(math.log(predict(r) / float(r["reported_gpu_hours"]))) for r in rows)


def fit(rows: list[dict[str, str]], start: dict[str, float] | None = None, rounds: int = 60) -> dict[str, float]:
    """Coordinate descent on the log loss over `rows`: each constant in turn is scaled up or down by a step
    that shrinks when neither direction helps. Deterministic, and fast enough to refit once per row for the
    leave-one-out figure (a grid over four constants is not)."""
    best = dict(start or current_constants())
    best_loss = log_loss(rows, best)
    step = dict.fromkeys(FITTED, 0.3)
    for i in range(rounds * len(FITTED)):
        key = FITTED[i % len(FITTED)]
        for sign in (1, -1):
            candidate = dict(best)
            candidate[key] = best[key] * math.exp(sign * step[key])
            if key in ("ampere", "hopper"):
                candidate[key] = min(candidate[key], mfu_module.MFU_CAP)
            loss = log_loss(rows, candidate)
            if loss < best_loss - 1e-9:
                best, best_loss = candidate, loss
                break
        else:
            step[key] *= 0.6
    return best


def leave_one_out(rows: list[dict[str, str]]) -> list[float]:
    """Signed errors of each row predicted by constants fitted on all the other rows."""
    out = []
    for i, row in enumerate(rows):
        values = fit(rows[:i] + rows[i + 1:], rounds=30)
        with prior_constants(values):
            out.append(predict(row) / float(row["reported_gpu_hours"]) - 1)
    return out


def family(run: str) -> str:
    """A run's model family: the letters its name starts with (llama-2-7b and llama-3.1-405b are both llama)."""
    return re.match(r"[a-z]*", run.lower()).group(0) or run


def leave_family_out(rows: list[dict[str, str]]) -> list[float]:
    """Signed errors of each row predicted by constants fitted without any run of its family: how the prior
    does on a model family it has never seen, which is what a new user's model is."""
    out: dict[int, float] = {}
    for name in sorted({family(r["run"]) for r in rows}):
        inside = [i for i, r in enumerate(rows) if family(r["run"]) == name]
        values = fit([r for r in rows if family(r["run"]) != name], rounds=30)
        with prior_constants(values):
            for i in inside:
                out[i] = predict(rows[i]) / float(rows[i]["reported_gpu_hours"]) - 1
    return [out[i] for i in range(len(rows))]


def spread(signed_errors: list[float]) -> tuple[float, float]:
    """10th and 90th percentiles of reported / predicted: the band 80% of runs fell in."""
    ratios = sorted(1 / (1 + e) for e in signed_errors)
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    return deciles[0], deciles[-1]


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


def describe(name: str, errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return (f"{name}: {len(a)} runs, median |error| {statistics.median(a):.1%}, mean |error| {statistics.fmean(a):.1%},"
            f" within 10%: {sum(e <= 0.10 for e in a) / len(a):.0%}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="fit the prior's constants on the tune split")
    parser.add_argument("--loo", action="store_true",
                        help="leave-one-out and leave-one-family-out errors over all scored rows (slow: refits)")
    args = parser.parse_args()
    rows = load_runs()
    tune = [r for r in rows if r["split"] == "tune"]
    if args.fit:
        values = fit(tune)
        print(f"fitted on {len(tune)} tune runs: mean |log error| {log_loss(tune, values):.3f}: "
              + ", ".join(f"{k} {v:.3g}" for k, v in values.items()))
        return 0
    print(table(rows))
    print()
    for name in SPLITS:
        subset = [r for r in rows if r["split"] == name]
        if subset:
            print(describe(f"{name} (in-sample)" if name == "tune" else name, errors(subset)))
    print(describe("all scored", errors(rows)))
    if args.loo:
        # Out of sample for every run: refit without it (or without its whole family), predict it.
        loo = leave_one_out(rows)
        lo, hi = spread(loo)
        print(describe("all scored, leave-one-out", loo))
        print(f"reported / predicted, leave-one-out: 80% of runs between {lo:.2f}x and {hi:.2f}x")
        families = len({family(r["run"]) for r in rows})
        print(describe(f"all scored, leave-one-family-out ({families} families)", leave_family_out(rows)))
    print(f"naive 6·N·D at 40% MFU, all scored runs: median |error| {naive(rows):.1%}")
    excluded = [r for r in load_runs(scored=False) if r.get("exclude", "").strip()]
    for r in excluded:
        print(f"not scored: {r['run']}: {r['exclude']}")
    print()
    print(memory_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
