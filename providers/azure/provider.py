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
