"""How much does `gpuplan bench`'s machinery cost? Its step time against a bare hand-written torch loop.

Both train the same GPT (same architecture, seed, batch, optimizer settings) on the same device. The bare loop
is what anyone would write: zero_grad, forward, cross-entropy, backward, AdamW step, one clock around the whole
loop. The bench side is exactly what `gpuplan bench` runs: gpuplan.bench.runner.run_prepared with the rich
progress bar the command draws (to a throwaway stderr), per-step timing and all.

The two alternate for several rounds (this machine is shared, so load drifts; interleaving makes the drift hit
both sides alike, and the order alternates); the overhead is the median of the per-round ratios of the mean step
times. Two clocks: wall time (what the bench reports) and the process's CPU time over all its threads (what
the bench's extra work, progress-bar thread included, costs). On a shared machine other processes' load
swings wall time by tens of percent between rounds, but not a process's own CPU time, so the verdict uses
CPU time; both are printed. The target: overhead < 5 %.

    .venv/bin/python bench/bench_overhead.py [--model gpt-tiny] [--steps 30] [--rounds 7] [--threads 1]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from rich.console import Console

from gpuplan.bench.model import build_gpt
from gpuplan.bench.runner import prepare_bench, run_prepared
from gpuplan.bench.spec import BenchSettings, resolve_target, validate_settings
from gpuplan.cli.commands.bench import ProgressObserver, progress_bar

TARGET_OVERHEAD = 0.05


@dataclass
class Timing:
    """Per-step seconds of one side: wall clock, and the process's CPU time (all its threads)."""

    wall: float
    cpu: float


def bare_loop(arch, seq_len: int, micro_batch: int, steps: int, warmup: int) -> Timing:
    """The plainest correct fp32 training loop on the CPU."""
    torch.manual_seed(0)
    model = build_gpt(arch, seq_len)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1)
    tokens = torch.randint(0, arch.vocab_size, (micro_batch, seq_len + 1))
    inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(inputs).float().flatten(0, 1), targets.flatten())
        loss.backward()
        optimizer.step()

    for _ in range(warmup):
        step()
    wall, cpu = time.perf_counter(), time.process_time()
    for _ in range(steps):
        step()
    return Timing((time.perf_counter() - wall) / steps, (time.process_time() - cpu) / steps)


class _CpuClock(ProgressObserver):
    """The command's progress observer, also reading the process CPU clock from the first timed step's start
    to the last one's end (the bench's own wall-clock step times come from its result)."""

    def __init__(self, progress) -> None:
        super().__init__(progress)
        self.timing = False
        self.start = self.end = 0.0

    def phase(self, name: str, total: int) -> None:
        super().phase(name, total)
        self.timing = name == "steps"
        if self.timing:
            self.start = time.process_time()

    def step(self) -> None:
        super().step()
        if self.timing:
            self.end = time.process_time()


def bench_loop(target, settings: BenchSettings) -> Timing:
    """`gpuplan bench`'s loop as the command runs it, progress bar included (drawn to a throwaway console)."""
    torch.manual_seed(0)
    prepared = prepare_bench(target, settings)
    console = Console(file=io.StringIO(), force_terminal=True)
    with progress_bar(console) as progress:
        clock = _CpuClock(progress)
        result = run_prepared(prepared, clock)
    return Timing(result.step_time_mean_s, (clock.end - clock.start) / settings.steps)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="gpt-tiny")
    parser.add_argument("--layers", type=int)
    parser.add_argument("--seq-len", type=int, default=128)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (1: on a shared machine, OpenMP threads fighting other "
                             "processes for cores swamp the effect being measured)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    target = resolve_target(args.model, None, None, args.layers)
    settings = validate_settings(BenchSettings(device="cpu", precision="fp32", seq_len=args.seq_len,
                                               micro_batch=args.micro_batch, steps=args.steps,
                                               warmup=args.warmup), target)
    arch = target.run_arch
    bare: list[Timing] = []
    bench: list[Timing] = []
    for round_no in range(args.rounds):
        # Alternate which side goes first, so a load trend within a round favours neither.
        for side in ((0, 1) if round_no % 2 == 0 else (1, 0)):
            if side == 0:
                bare.append(bare_loop(arch, args.seq_len, args.micro_batch, args.steps, args.warmup))
            else:
                bench.append(bench_loop(target, settings))
        print(f"round {round_no + 1}: bare {bare[-1].wall * 1000:.2f} ms wall / {bare[-1].cpu * 1000:.2f} ms CPU,"
              f" gpuplan bench {bench[-1].wall * 1000:.2f} ms wall / {bench[-1].cpu * 1000:.2f} ms CPU per step",
              file=sys.stderr)

    def overhead(kind: str) -> float:
        # Paired: each round's two sides saw the same machine load.
        return statistics.median(getattr(b, kind) / getattr(a, kind) for a, b in zip(bare, bench, strict=True)) - 1

    print(f"model {arch.name} ({args.micro_batch} x {args.seq_len} tokens, fp32, CPU, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)), {args.steps} steps x {args.rounds} rounds")
    for kind, label in (("cpu", "process CPU time"), ("wall", "wall clock")):
        bare_ms = statistics.median(getattr(t, kind) for t in bare) * 1000
        bench_ms = statistics.median(getattr(t, kind) for t in bench) * 1000
        print(f"{label:>16}: bare {bare_ms:.2f} ms/step, gpuplan bench {bench_ms:.2f} ms/step, "
              f"overhead {overhead(kind):+.1%} (median of per-round ratios)")
    result = overhead("cpu")
    verdict = "PASS" if result < TARGET_OVERHEAD else "FAIL"
    print(f"overhead (CPU time): {result:+.1%}, target < {TARGET_OVERHEAD:.0%}: {verdict}")
    return 0 if result < TARGET_OVERHEAD else 1


if __name__ == "__main__":
    sys.exit(main())
