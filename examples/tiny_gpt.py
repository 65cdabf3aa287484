"""Train a tiny GPT (byte-level, the `gpt-tiny` preset's shape) on the Zen of Python, on CPU, in seconds.

A real training loop: causal self-attention, AdamW, periodic checkpoints with resume, and progress reports
through gpuplan.jobs.metrics (a no-op outside gpuplan). Checkpoints go to $GPUPLAN_CHECKPOINT_DIR when gpuplan
sets it, else ./checkpoints. On SIGTERM (gpuplan's stop, or the boot script passing on a spot interruption notice)
it finishes the step it is in, saves a checkpoint and exits with 143; the next launch resumes from that step, so
the steps over every (re)launch add up to --steps.
"""

from __future__ import annotations

import argparse
import codecs
import math
import os
import signal
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

try:
    from gpuplan.jobs.metrics import log_metrics
except ImportError:  # running outside an environment with gpuplan: metrics are optional

    def log_metrics(step: int, tokens: int | None = None, loss: float | None = None, **extra: object) -> None:
        return None


def corpus() -> bytes:
    """The Zen of Python (its rot13 source in the `this` module), repeated: small, fixed, learnable."""
    import contextlib
    import io

    with contextlib.redirect_stdout(io.StringIO()):  # importing `this` prints the Zen
        import this
    return (codecs.decode(this.s, "rot13") + "\n").encode() * 8


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attn.transpose(1, 2).reshape(b, t, c))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 1024, width: int = 128, layers: int = 2, heads: int = 4, ctx: int = 256) -> None:
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, width), nn.Embedding(ctx, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tok.weight  # tied, as in GPT-2

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def save(path: Path, model: nn.Module, optimizer: torch.optim.Optimizer, step: int) -> None:
    """Write the checkpoint whole or not at all (a copy to durable storage never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}, tmp)
    os.replace(tmp, path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--seq-len", type=int, default=64)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--checkpoint-every", type=int, default=50)
    args = parser.parse_args()

    torch.manual_seed(0)
    data = torch.tensor(list(corpus()), dtype=torch.long)
    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    ckpt_dir = Path(os.environ.get("GPUPLAN_CHECKPOINT_DIR", "checkpoints"))
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    ckpt = ckpt_dir / "tiny-gpt.pt"
    start = 0
    if ckpt.exists():
        state = torch.load(ckpt, weights_only=True)
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        start = int(state["step"])
        print(f"resumed from {ckpt} at step {start}")
    params = sum(p.numel() for p in model.parameters())
    print(f"tiny GPT: {params:,} parameters, {args.steps} steps of {args.batch}x{args.seq_len} tokens", flush=True)

    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    generator = torch.Generator().manual_seed(start)
    tokens_per_step = args.batch * args.seq_len
    t0 = time.perf_counter()
    step = start
    for step in range(start + 1, args.steps + 1):
        offsets = torch.randint(0, len(data) - args.seq_len - 1, (args.batch,), generator=generator)
        batch = torch.stack([data[o: o + args.seq_len + 1] for o in offsets.tolist()])
        logits = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if not math.isfinite(loss.item()):
            print("loss is not finite", file=sys.stderr)
            return 1
        if step % 10 == 0 or step == args.steps:
            log_metrics(step, tokens=step * tokens_per_step, loss=loss.item(), total_steps=args.steps)
        if step % 50 == 0 or step == args.steps:
            rate = (step - start) * tokens_per_step / (time.perf_counter() - t0)
            print(f"step {step:4d}  loss {loss.item():.3f}  {rate:,.0f} tokens/s", flush=True)
        if stop:  # asked to stop: keep this step's work, then leave
            save(ckpt, model, optimizer, step)
            log_metrics(step, tokens=step * tokens_per_step, loss=loss.item(), total_steps=args.steps, checkpoint=True)
            print(f"stopped by signal {stop[0]} at step {step}: checkpoint saved ({step - start} steps this run)",
                  flush=True)
            return 128 + stop[0]
        if step % args.checkpoint_every == 0 or step == args.steps:
            save(ckpt, model, optimizer, step)
            # `checkpoint: true` tells gpuplan which step a relaunch resumes from and when it was saved.
            log_metrics(step, tokens=step * tokens_per_step, loss=loss.item(), total_steps=args.steps, checkpoint=True)
    print(f"trained steps {start + 1}-{step} ({step - start} steps this run)", flush=True)
    print(f"done: final loss {loss.item():.3f}" if args.steps > start else "nothing to do", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
