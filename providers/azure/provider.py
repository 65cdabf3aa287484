"""Azure Virtual Machines for gpuplan runs: the provider's declaration.

What the rest of gpuplan reads from the class (its billing rule, storage scheme, the catalog's clouds, spot
semantics) is declared here; the prices come from `AzurePricing` (providers/azure/pricing.py), and the machines'
lifecycle (launch, describe, terminate, list_tagged through the Azure SDK) lives in its own modules. The SDK is the
`azure` extra and is imported inside methods only (never at CLI start-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from gpuplan.providers.attach_base import Attach, AttachTarget
from gpuplan.providers.azure.pricing import AzurePricing
from gpuplan.providers.base import Attachable, Instance, LaunchRequest, Provider, ProviderError

NOT_YET = "the azure provider cannot start machines in this gpuplan yet (prices and plans work)"


class AzureProvider(Attachable, AzurePricing, Provider):
    """Azure GPU VMs (the N-series) for gpuplan runs."""

    name: ClassVar[str] = "azure"
    cloud: ClassVar[str] = "azure"
    # Pay-as-you-go and Spot VMs are billed per second with a one-minute minimum (Azure's VM pricing FAQ,
    # https://azure.microsoft.com/pricing/details/virtual-machines/linux/; restated with the Spot details in
    # https://vunvulearadu.blogspot.com/2025/12/azure-spot-vm-billing-pricing-and.html).
    min_billed_seconds: ClassVar[int] = 60
    # Spot, as the cost model sees it (https://learn.microsoft.com/azure/virtual-machines/spot-vms): Azure evicts
    # a Spot VM whenever it needs the capacity (or the price passes the max price), with at most 30 s of notice
    # through Scheduled Events (a `Preempt` event, best effort:
    # https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events) -- too short to save a
    # checkpoint of a large model, so an eviction loses the work since the last one, as the planner assumes.
    # gpuplan's VMs use the `Delete` eviction policy (the default, Deallocate, keeps billing the disks and counting
    # against the quota), so an evicted VM is gone and a relaunch starts a fresh one (the planner's restart time).
    # Eviction rates are published per size and region only to an account, as buckets of percent per hour (0-5,
    # 5-10, 10-15, 15-20, 20+: Azure Resource Graph `SpotResources`,
    # https://learn.microsoft.com/azure/architecture/guide/spot/spot-eviction); GPU sizes are scarce, so the
    # planner assumes 10 % per hour (the middle bucket's floor: a mean of 10 h between evictions), more
    # pessimistic than AWS (20 h) and GCP (12 h). `plan --interruption-rate` overrides it.
    spot_interruptions_per_hour: ClassVar[float | None] = 1 / 10
    # Spot prices vary with capacity and the Retail Prices API shows only the current one (the 90-day history is
    # in the portal, not a public API): a settled Spot VM is billed at the newest catalog Spot price
    # (gpuplan.supervise.spot_bill), as on GCP.
    spot_priced_by_catalog: ClassVar[bool] = True
    # Start-up before any run is measured (gpuplan.calibration.startup): an N-series VM from the create request to
    # a running Linux guest takes about as long as an EC2 or GCE GPU instance (~40 s; Hao et al., "An Empirical
    # Analysis of VM Startup Times in Public IaaS Clouds", arXiv:2107.03467, measured Azure among them), plus the
    # same 60 s allowance for the image pull and torch start; the first measured run replaces it.
    startup_seconds: ClassVar[float | None] = 100.0
    startup_why: ClassVar[str] = ("Azure VM boot ~40 s (arXiv:2107.03467) + 60 s image pull and torch start "
                                  "(allowance)")
    credential_hint: ClassVar[str] = ("run `az login` or set AZURE_CLIENT_ID, AZURE_TENANT_ID and "
                                      "AZURE_CLIENT_SECRET, and AZURE_SUBSCRIPTION_ID")

    def __init__(self) -> None:
        pass

    def launch(self, request: LaunchRequest) -> list[Instance]:
        raise ProviderError(NOT_YET)

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        raise ProviderError(NOT_YET)

    def terminate(self, instance_ids: Sequence[str]) -> None:
        raise ProviderError(NOT_YET)

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        raise ProviderError(NOT_YET)

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        raise ProviderError(NOT_YET)
