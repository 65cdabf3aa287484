"""The two custom roles an Azure subscription needs for gpuplan, least privilege, shipped as package data
(roles.json) so `gpuplan setup azure` and docs/providers/azure.md show one list.

- `gpuplan launcher`, for the user who launches: exactly the ARM calls providers/azure makes (a run's resource
  group, its NSG/VNet/public IP/NIC, the VM and its OS disk, polling their operations, attaching the machines'
  managed identity) and the Key Vault data actions for the run's secrets.
- `gpuplan machine`, for the user-assigned managed identity the VMs get (`[providers.azure] identity`): delete
  its own VM (and the NIC and disk that go with it), tag its run's group with its exit code, read secrets.
- `gpuplan machine storage`, for the same identity, assigned on the run storage's container only
  (`.../storageAccounts/ACCOUNT/blobServices/default/containers/CONTAINER`): read and write blobs there (Put Blob
  replaces a blob with write alone; List Blobs needs read), nothing in any other container, no delete. It is a
  role of its own because a role assignment has one scope: folded into `gpuplan machine` (assigned on the
  subscription) it would reach every storage account of the subscription.

The JSON is a custom role definition as `az role definition create --role-definition @FILE` takes it
(https://learn.microsoft.com/azure/role-based-access-control/custom-roles); `{subscriptionId}` is filled in.
Action names: https://learn.microsoft.com/azure/role-based-access-control/resource-provider-operations.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any


def custom_roles(subscription_id: str | None = None) -> dict[str, dict[str, Any]]:
    """{"launcher": ROLE, "machine": ROLE, "machine-storage": ROLE}, with the subscription in AssignableScopes
    when given."""
    text = resources.files("gpuplan.providers.azure").joinpath("roles.json").read_text()
    roles: dict[str, dict[str, Any]] = json.loads(text)
    if subscription_id:  # into the parsed values, never the JSON text: the ID stays one string whatever it holds
        for role in roles.values():
            role["AssignableScopes"] = [scope.replace("{subscriptionId}", subscription_id)
                                        for scope in role.get("AssignableScopes", [])]
    return roles
