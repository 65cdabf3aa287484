"""What the real `torchrun` would read from an environment: torch's own argument parser, nothing re-implemented.

torchrun's options take their defaults from `PET_<OPTION>` when the parser is *built*
(torch/distributed/argparse_util.py, the `env` action reads os.environ in its constructor), so the parser is built
inside the patched environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from unittest import mock


def torchrun_sees(env: Mapping[str, str]) -> dict[str, str]:
    """nnodes, node_rank, master_addr, master_port, nproc_per_node as `torchrun train.py` parses them under `env`."""
    from torch.distributed.run import get_args_parser

    clean = {k: v for k, v in os.environ.items() if not k.startswith("PET_")}
    clean.update({k: v for k, v in env.items() if k.startswith("PET_")})
    with mock.patch.dict(os.environ, clean, clear=True):
        args = get_args_parser().parse_args(["train.py"])
    return {"nnodes": str(args.nnodes), "node_rank": str(args.node_rank), "master_addr": str(args.master_addr),
            "master_port": str(args.master_port), "nproc_per_node": str(args.nproc_per_node)}
