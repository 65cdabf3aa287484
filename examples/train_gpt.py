"""Train the GPT of a config.json (or a preset) on CPU or GPU: the same model `gpuplan bench` measures.

Bench first, then launch, and `gpuplan launch` estimates the run from the bench's measured tokens/s:
    gpuplan bench --model-config cfg.json --seq-len 64 --micro-batch 8
    gpuplan launch job.yaml -y     # job.yaml: command: python train_gpt.py --config cfg.json ...,
                                   # workload: {model_config: cfg.json, tokens: ..., seq_len: 64, micro_batch: 8}
Its own training loop (not the bench's): byte-level next-token prediction on the Zen of Python with AdamW,
progress through gpuplan.jobs.metrics (a no-op outside gpuplan), so `launch` shows measured throughput and
`report --accuracy` compares it with the estimate.
With $GPUPLAN_CHECKPOINT_DIR set (a spec's `checkpoint:`), it resumes from the checkpoint there, saves one every
--checkpoint-every steps, and on SIGTERM (a stop, or a spot interruption notice passed on by the boot script)
saves the step it finished and exits with 143, so the steps over every (re)launch add up to --steps.
"""

from __future__ import annotations

import argparse
import codecs
import contextlib
import io
import math
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from gpuplan.bench.model import build_gpt
from gpuplan.estimating.architecture import load_hf_config, preset
from gpuplan.jobs.metrics import log_metrics


def corpus() -> bytes:
    """The Zen of Python (the rot13 source of the `this` module), repeated: small, fixed, learnable."""
    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        import this
    return (codecs.decode(this.s, "rot13") + "\n").encode() * 8


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--config", help="a Hugging Face config.json (vocab_size >= 256)")
    model.add_argument("--model", help="a gpuplan model preset instead (e.g. gpt-tiny)")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--log-every", type=int, default=5)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    args = parser.parse_args()

    arch = load_hf_config(args.config) if args.config else preset(args.model)
    if arch.vocab_size < 256:
        print("the model's vocab_size must be at least 256 (byte-level tokens)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    data = torch.tensor(list(corpus()), dtype=torch.long)
    model = build_gpt(arch, args.seq_len).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    folder = os.environ.get("GPUPLAN_CHECKPOINT_DIR")
    ckpt = Path(folder) / "train-gpt.pt" if folder else None
    start = 0
    if ckpt is not None and ckpt.exists():
        state = torch.load(ckpt, weights_only=True, map_location=device)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
        print(f"resumed from {ckpt} at step {start}", flush=True)

    def save(step: int) -> None:
        if ckpt is None:
            return
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        tmp = ckpt.with_suffix(".tmp")
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, tmp)
        os.replace(tmp, ckpt)  # whole or not at all: a copy to durable storage never sees half a file

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    params = sum(p.numel() for p in model.parameters())
    print(f"{arch.name}: {params:,} parameters, {args.steps} steps of {args.batch}x{args.seq_len} tokens on {device}",
          flush=True)
    generator = torch.Generator().manual_seed(start)
    tokens_per_step = args.batch * args.seq_len
    t0 = time.perf_counter()
    loss = torch.zeros(())
    for step in range(start + 1, args.steps + 1):
        offsets = torch.randint(0, len(data) - args.seq_len - 1, (args.batch,), generator=generator)
        batch = torch.stack([data[o: o + args.seq_len + 1] for o in offsets.tolist()]).to(device)
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % args.log_every == 0 or step == args.steps:
            value = loss.item()
            if not math.isfinite(value):
                print("loss is not finite", file=sys.stderr)
                return 1
            log_metrics(step, tokens=step * tokens_per_step, loss=value, total_steps=args.steps)
        if stop:
            save(step)
            log_metrics(step, tokens=step * tokens_per_step, loss=loss.item(), total_steps=args.steps,
                        checkpoint=ckpt is not None)
            print(f"stopped by signal {stop[0]} at step {step}: checkpoint saved", flush=True)
            return 128 + stop[0]
        if ckpt is not None and (step % args.checkpoint_every == 0 or step == args.steps):
            save(step)
            log_metrics(step, tokens=step * tokens_per_step, loss=loss.item(), total_steps=args.steps, checkpoint=True)
    rate = max(args.steps - start, 0) * tokens_per_step / (time.perf_counter() - t0)
    if start >= args.steps:
        print(f"nothing to do: the checkpoint is at step {start} of {args.steps}", flush=True)
        return 0
    print(f"done: {args.steps} steps ({args.steps - start} this run), final loss {loss.item():.3f}, "
          f"{rate:,.0f} tokens/s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
