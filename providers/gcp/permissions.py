"""The launching user's own GCP permissions: predefined roles, or the exact permissions for a custom role.

Shipped as package data (launch_roles.json) so `gpuplan setup gcp --print-policy` and docs/providers/gcp-permissions.md
show one list. The predefined roles are the coarse way (https://cloud.google.com/compute/docs/access/iam: Compute
Instance Admin (v1) creates and deletes VMs; Compute Network Admin makes the GPU data networks of a multi-node A3
run, providers/gcp/data_nics.py; Service Account User lets a VM run as a service account; Secret Manager
Admin creates and deletes the run's secrets; Storage Object User reads and writes the bucket); the permissions list
is what gpuplan's calls need, for a custom role (https://cloud.google.com/iam/docs/creating-custom-roles).
"""

from __future__ import annotations

import json
from importlib import resources


def launch_roles() -> dict[str, list[str]]:
    """{"roles": [...], "permissions": [...]}."""
    text = resources.files("gpuplan.providers.gcp").joinpath("launch_roles.json").read_text()
    data = json.loads(text)
    return {"roles": list(data["roles"]), "permissions": list(data["permissions"])}
