"""The Azure SDK clients one provider uses, built once, on one endpoint, with one credential.

- Credentials: `DefaultAzureCredential` (azure-identity): environment variables, workload identity, a managed
  identity, the Azure CLI's `az login`, ... in that order.
  https://learn.microsoft.com/python/api/overview/azure/identity-readme#defaultazurecredential
- Subscription: the `subscription_id` setting, else AZURE_SUBSCRIPTION_ID (the variable Azure's own samples and
  tools read).
- Endpoint: Azure Resource Manager, https://management.azure.com, unless the `arm_endpoint` setting or
  GPUPLAN_AZURE_ARM_ENDPOINT moves it (a sovereign cloud, a private proxy; the tests' loopback fake). The SDK sends
  bearer tokens over TLS only (azure-core's BearerTokenCredentialPolicy refuses http URLs:
  Azure/azure-sdk-for-python#8887), so a moved endpoint is https too; its certificate authority comes from
  REQUESTS_CA_BUNDLE like any other requests-based client.

The SDK (the `azure` extra) costs seconds to import and is imported here, inside methods, never at CLI start-up.
"""

from __future__ import annotations

import os
from typing import Any

from gpuplan.errors import UserError
from gpuplan.providers.base import AuthError

DEFAULT_ARM_ENDPOINT = "https://management.azure.com"
ENDPOINT_ENV = "GPUPLAN_AZURE_ARM_ENDPOINT"
SUBSCRIPTION_ENV = "AZURE_SUBSCRIPTION_ID"
EXTRA_HINT = "the azure provider needs the Azure SDK: pip install 'gpuplan[azure]'"
SDK_MODULES = ("azure.identity", "azure.mgmt.resource", "azure.mgmt.network", "azure.mgmt.compute")


def require_sdk() -> None:
    """UserError (one line, exit 2) when the `azure` extra is not installed: asked before a launch records
    anything, where the lazy imports below would only fail mid-launch, as a provider error. Finds the modules
    without importing them (seconds)."""
    import importlib.util

    for name in SDK_MODULES:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):  # a parent package missing, or a half-installed one
            found = False
        if not found:
            raise UserError(EXTRA_HINT)


class ArmSession:
    """Lazily built SDK clients (resource, network, compute) sharing a credential, a subscription and an endpoint."""

    def __init__(self, *, subscription_id: str | None, endpoint: str | None, credential: object | None) -> None:
        self.endpoint = (endpoint or os.environ.get(ENDPOINT_ENV) or DEFAULT_ARM_ENDPOINT).rstrip("/")
        if not self.endpoint.startswith("https://"):
            raise UserError(f"azure: the Resource Manager endpoint must be https (tokens never go over plain http): "
                            f"{self.endpoint}")
        self._subscription_id = subscription_id
        self._credential = credential
        self._clients: dict[str, Any] = {}

    @property
    def subscription_id(self) -> str:
        sub = self._subscription_id or os.environ.get(SUBSCRIPTION_ENV)
        if not sub:
            raise AuthError("no Azure subscription: set AZURE_SUBSCRIPTION_ID or [providers.azure] subscription_id",
                            code="NoSubscription")
        self._subscription_id = sub
        return sub

    def credential(self) -> object:
        if self._credential is None:
            try:
                from azure.identity import DefaultAzureCredential
            except ImportError as exc:
                raise UserError(EXTRA_HINT) from exc
            self._credential = DefaultAzureCredential()
        return self._credential

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            try:
                if kind == "resource":
                    from azure.mgmt.resource.resources import ResourceManagementClient

                    cls: Any = ResourceManagementClient
                elif kind == "network":
                    from azure.mgmt.network import NetworkManagementClient

                    cls = NetworkManagementClient
                else:
                    from azure.mgmt.compute import ComputeManagementClient

                    cls = ComputeManagementClient
            except ImportError as exc:
                raise UserError(EXTRA_HINT) from exc
            self._clients[kind] = cls(self.credential(), self.subscription_id, base_url=self.endpoint)
        return self._clients[kind]

    @property
    def resource(self) -> Any:
        return self._client("resource")

    @property
    def network(self) -> Any:
        return self._client("network")

    @property
    def compute(self) -> Any:
        return self._client("compute")
