"""Data-parallel training over torch.distributed (gloo, CPU) with the environment gpuplan gives every rank.

Each rank trains the same small regression on its own shard; DistributedDataParallel all-reduces the gradients,
so the ranks end with identical weights. As a direct check, rank r contributes r + 1 to an all-reduce whose sum
must be W(W+1)/2. Every rank writes what it saw to $GPUPLAN_RUN_DIR/result-rank<r>.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

try:
    from gpuplan.jobs.metrics import log_metrics
except ImportError:

    def log_metrics(step: int, tokens: int | None = None, loss: float | None = None, **extra: object) -> None:
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    dist.init_process_group("gloo", init_method="env://")  # MASTER_ADDR/PORT, RANK, WORLD_SIZE from gpuplan
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world} on {os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']} "
          f"(node {os.environ['NODE_RANK']} of {os.environ['NNODES']})", flush=True)

    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total, op=dist.ReduceOp.SUM)

    torch.manual_seed(1234 + rank)  # different data per rank
    model = DistributedDataParallel(nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    true_w = torch.arange(8, dtype=torch.float32) / 8
    loss = torch.tensor(0.0)
    for step in range(1, args.steps + 1):
        x = torch.randn(32, 8)
        loss = ((model(x).squeeze(1) - x @ true_w) ** 2).mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        log_metrics(step, tokens=step * 32 * world, loss=loss.item(), total_steps=args.steps)

    weights = model.module.weight.detach().flatten()
    checksum = weights.clone()
    dist.all_reduce(checksum, op=dist.ReduceOp.SUM)
    result = {"rank": rank, "world_size": world, "all_reduce_sum": total.item(), "final_loss": loss.item(),
              "weights": weights.tolist(), "weights_identical": bool(torch.allclose(checksum / world, weights))}
    run_dir = Path(os.environ.get("GPUPLAN_RUN_DIR", "."))
    (run_dir / f"result-rank{rank}.json").write_text(json.dumps(result))
    print(f"rank {rank}: all-reduce sum {total.item():.0f}, final loss {loss.item():.4f}", flush=True)
    # Every rank reaches the end before any tears its connections down, and DDP's reducer (which holds gloo
    # work) goes first: a rank that destroys the group while its peer still talks to it can die in gloo's
    # threads ("terminate called without an active exception", exit 134) after a successful run.
    dist.barrier()
    del model, optimizer
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    code = main()
    # Gloo's worker threads can still hold work while the interpreter finalizes, and their teardown then aborts
    # the process ("terminate called without an active exception", SIGABRT, exit 134) after a successful run:
    # pytorch/pytorch#179291 describes the mechanism, and the barrier and destroy_process_group above make it rarer
    # but not impossible (seen under load on a 2-core machine). Everything is written and flushed by now, so skip
    # the interpreter's teardown.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
