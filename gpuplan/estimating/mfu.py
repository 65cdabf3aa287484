"""The default MFU prior: what fraction of a GPU's peak a well-run PyTorch/Megatron-style job achieves.

MFU here is model-FLOPs utilisation as in PaLM (Chowdhery et al. 2022, App. B): model FLOPs per second /
peak dense FLOP/s for the precision. The prior is a product of factors, each from published measurements:

    mfu = base[generation] x size(N) x precision x recompute x cluster(nodes)

- base[generation]: the MFU of a multi-billion-parameter model on one well-connected node.
    ampere 0.50: Megatron-LM on A100 sustains 44-52% of peak (Narayanan et al. 2021, Table 1: 135-163 TFLOP/s
      of 312); MosaicML's llm-foundry A100-80GB table reports 0.48-0.55 MFU for 7B-70B at seq 2048;
      TinyLlama (Zhang et al. 2024) reports 56% on A100-40GB with FlashAttention-2.
    hopper 0.42: Llama 3 (Dubey et al. 2024, Table 4) 38-43% BF16 MFU on H100; MosaicML's H100 table ~0.35-0.45;
      the H100's peak grew 3.2x over A100 while memory bandwidth grew 1.6x, so a smaller share of peak.
    blackwell 0.38: no published end-to-end LLM MFU yet; extrapolated from the hopper trend (peak 2.3x,
      bandwidth 2.3x -> slightly below hopper). cdna3 (MI300X) 0.30: AMD/MosaicML reports ~30-35% on MI300X.
    ada / consumer 0.40, turing 0.35, volta 0.30 (Megatron-LM 2019 on V100: 39 TFLOP/s of 125 on one GPU,
      Shoeybi et al. 2019, section 5.1), pascal 0.25 (no tensor cores; FP16 on shader cores).
- size(N) = 1 / (1 + (N0/N)^alpha): small models lose efficiency to memory-bound layers (norms, softmax,
  embeddings, optimizer step) and kernel launch overhead. Fitted to the Pythia suite (Biderman et al. 2023,
  Table: 70M..12B on A100-40GB, same code): see tests/data/published_runs.csv and the README accuracy table.
- precision: fp8 reaches ~1.3-1.5x the bf16 throughput with 2x the peak (NVIDIA Transformer Engine / NeMo
  results), so 0.7 of the bf16 MFU; fp32 on CUDA cores runs closer to its low peak (x1.2); tf32 x0.9.
- recompute: full activation checkpointing spends 8N instead of 6N per token (Korthikanti et al. 2022), so the
  *model* FLOPs utilisation is the hardware utilisation x model/hardware FLOPs.
- cluster(nodes) = 1 / (1 + c·log2(nodes)): stragglers, synchronisation, checkpoint writes and restarts cost
  more as the cluster grows (Llama 3 paper, sec. 3.3.4: 90% effective training time at 16K GPUs; MFU 43% at
  8K vs 41% at 16K GPUs, Table 4). Data-parallel communication is modelled separately (comms.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuplan.gpus import GpuSpec

BASE_MFU = {
    "blackwell": 0.38,
    "hopper": 0.42,
    "cdna3": 0.30,
    "ampere": 0.50,
    "ada": 0.40,
    "turing": 0.35,
    "volta": 0.30,
    "pascal": 0.25,
}
FALLBACK_BASE = 0.30
SIZE_N0 = 3.0e8  # matmul parameters at which the size factor is 0.5
SIZE_ALPHA = 0.6
PRECISION_FACTOR = {"bf16": 1.0, "fp16": 1.0, "fp8": 0.7, "tf32": 0.9, "fp32": 1.2}
CLUSTER_C = 0.02
MFU_CAP = 0.75


@dataclass(frozen=True)
class MfuPrior:
    """The prior and its factors (shown by `gpuplan estimate` so a user can see why)."""

    mfu: float
    base: float
    size: float
    precision: float
    recompute: float
    cluster: float

    def detail(self) -> str:
        return (f"default prior: base {self.base:.2f} x size {self.size:.2f} x precision {self.precision:.2f}"
                f" x recompute {self.recompute:.2f} x cluster {self.cluster:.2f}")


def mfu_prior(gpu: GpuSpec, *, matmul_params: float, precision: str = "bf16", nodes: int = 1,
              recompute_ratio: float = 1.0) -> MfuPrior:
    """The default MFU and its factors; `recompute_ratio` = model FLOPs / hardware FLOPs (1 without recompute)."""
    base = BASE_MFU.get(gpu.generation, FALLBACK_BASE)
    size = 1.0 / (1.0 + (SIZE_N0 / max(matmul_params, 1.0)) ** SIZE_ALPHA)
    prec = PRECISION_FACTOR.get(precision, 1.0)
    cluster = 1.0 / (1.0 + CLUSTER_C * math.log2(max(nodes, 1)))
    mfu = min(MFU_CAP, base * size * prec * recompute_ratio * cluster)
    return MfuPrior(mfu, base, size, prec, recompute_ratio, cluster)


def default_mfu(gpu: GpuSpec, *, matmul_params: float, precision: str = "bf16", nodes: int = 1,
                recompute_ratio: float = 1.0) -> float:
    """The default MFU prior for training on `gpu` (see the module docstring for every factor's source)."""
    return mfu_prior(gpu, matmul_params=matmul_params, precision=precision, nodes=nodes,
                     recompute_ratio=recompute_ratio).mfu
