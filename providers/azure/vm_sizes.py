"""Azure GPU VM sizes: the GPU, how many, vCPUs and RAM of each size the catalog prices.

The Retail Prices API names a size (`armSkuName`) and its price but not what it holds, so this table says it, from
Microsoft's size pages (https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/, one page per
series, cited below) and, for the vCPU/RAM figures, the same numbers in microsoft/aspire's AksNodeVmSizes.cs
(https://github.com/microsoft/aspire/blob/main/src/Aspire.Hosting.Azure.Kubernetes/AksNodeVmSizes.cs).
Only the GPUs gpuplan plans for are listed (A100, H100, H200, MI300X, A10, T4, V100); a size the API prices but
this table lacks (M60, K80, Radeon MI25 and V620, FPGAs, confidential sizes) is left out of a refresh and named in
its notes. GPU names are the GPU table's (gpuplan/data/gpus.csv): the NC A100 v4 carries the 80 GB PCIe card
(A100-PCIe), the NC H100 v5 the 94 GB H100 NVL, the ND sizes the SXM parts.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VmSize:
    """What one Azure VM size holds: `gpus` may be a fraction (an NVads A10 v5 slice of one A10)."""

    gpu: str
    gpus: float
    vcpus: int
    memory_gib: float


_NCAS_T4_V3 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ncast4v3-series"
_NC_V3 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ncv3-series"
_ND_V2 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndv2-series"
_NC_A100_V4 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nca100v4-series"
_ND_A100_V4 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nda100v4-series"
_NDM_A100_V4 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndma100v4-series"
_NC_H100_V5 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ncadsh100v5-series"
_ND_H100_V5 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/ndh100v5-series"
_ND_H200_V5 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-h200-v5-series"
_ND_MI300X_V5 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nd-mi300x-v5-series"
_NVADS_A10_V5 = "https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/nvadsa10v5-series"

# armSkuName -> what it holds; the comment after each series is its size page.
VM_SIZES: dict[str, VmSize] = {
    # NCasT4_v3: NVIDIA T4 16 GB (_NCAS_T4_V3)
    "Standard_NC4as_T4_v3": VmSize("T4", 1, 4, 28),
    "Standard_NC8as_T4_v3": VmSize("T4", 1, 8, 56),
    "Standard_NC16as_T4_v3": VmSize("T4", 1, 16, 110),
    "Standard_NC64as_T4_v3": VmSize("T4", 4, 64, 440),
    # NCv3: NVIDIA V100 16 GB PCIe (_NC_V3)
    "Standard_NC6s_v3": VmSize("V100-16GB", 1, 6, 112),
    "Standard_NC12s_v3": VmSize("V100-16GB", 2, 12, 224),
    "Standard_NC24s_v3": VmSize("V100-16GB", 4, 24, 448),
    "Standard_NC24rs_v3": VmSize("V100-16GB", 4, 24, 448),
    # NDv2: 8 NVIDIA V100 32 GB SXM with NVLink (_ND_V2)
    "Standard_ND40rs_v2": VmSize("V100-32GB", 8, 40, 672),
    # NC A100 v4: NVIDIA A100 80 GB PCIe (_NC_A100_V4)
    "Standard_NC24ads_A100_v4": VmSize("A100-PCIe", 1, 24, 220),
    "Standard_NC48ads_A100_v4": VmSize("A100-PCIe", 2, 48, 440),
    "Standard_NC96ads_A100_v4": VmSize("A100-PCIe", 4, 96, 880),
    # ND A100 v4: 8 NVIDIA A100 40 GB SXM (_ND_A100_V4)
    "Standard_ND96asr_v4": VmSize("A100-40GB", 8, 96, 900),
    # NDm A100 v4: 8 NVIDIA A100 80 GB SXM (_NDM_A100_V4)
    "Standard_ND96amsr_A100_v4": VmSize("A100-80GB", 8, 96, 1900),
    # NCads H100 v5: NVIDIA H100 NVL 94 GB (_NC_H100_V5)
    "Standard_NC40ads_H100_v5": VmSize("H100-NVL", 1, 40, 320),
    "Standard_NC80adis_H100_v5": VmSize("H100-NVL", 2, 80, 640),
    # ND H100 v5: 8 NVIDIA H100 80 GB SXM (_ND_H100_V5)
    "Standard_ND96isr_H100_v5": VmSize("H100", 8, 96, 1900),
    # ND H200 v5: 8 NVIDIA H200 141 GB SXM (_ND_H200_V5)
    "Standard_ND96isr_H200_v5": VmSize("H200", 8, 96, 1850),
    # ND MI300X v5: 8 AMD Instinct MI300X 192 GB (_ND_MI300X_V5)
    "Standard_ND96isr_MI300X_v5": VmSize("MI300X", 8, 96, 1850),
    # NVads A10 v5: NVIDIA A10 24 GB, partitioned: 1/6, 1/3, 1/2, 1 or 2 GPUs (_NVADS_A10_V5)
    "Standard_NV6ads_A10_v5": VmSize("A10", 1 / 6, 6, 55),
    "Standard_NV12ads_A10_v5": VmSize("A10", 1 / 3, 12, 110),
    "Standard_NV18ads_A10_v5": VmSize("A10", 1 / 2, 18, 220),
    "Standard_NV36ads_A10_v5": VmSize("A10", 1, 36, 440),
    "Standard_NV36adms_A10_v5": VmSize("A10", 1, 36, 880),
    "Standard_NV72ads_A10_v5": VmSize("A10", 2, 72, 880),
}

SOURCES: tuple[str, ...] = (_NCAS_T4_V3, _NC_V3, _ND_V2, _NC_A100_V4, _ND_A100_V4, _NDM_A100_V4, _NC_H100_V5,
                            _ND_H100_V5, _ND_H200_V5, _ND_MI300X_V5, _NVADS_A10_V5)


def vm_size(sku: str) -> VmSize | None:
    """What the size `sku` (armSkuName, e.g. Standard_ND96isr_H100_v5) holds; None for one gpuplan does not plan."""
    return VM_SIZES.get(sku)
