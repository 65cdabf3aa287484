"""`gpuplan setup azure`'s launcher role covers every ARM call a launch and its teardown make (recorded by the
fake ARM), and nothing is granted that gpuplan never calls (every action names a resource type it touches)."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from gpuplan.providers.azure.provider import AzureProvider
from gpuplan.providers.azure.roles import custom_roles
from gpuplan.providers.base import LaunchRequest

from support.clihelp import run_cli
from support.fake_arm.fixture import RunningArm, StaticToken

_TYPED = re.compile(r"/providers/([^/]+)/([^/]+)(?:/[^/]+)?$", re.I)
_VERB = {"GET": "read", "PUT": "write", "DELETE": "delete", "PATCH": "write"}


def needed_action(method: str, path: str) -> str | None:
    """The RBAC action a recorded ARM request needs (None for the fake's own operation-status URLs, which map to
    the provider's `locations/operations/read`, granted in the role as such)."""
    if "/providers/Microsoft.Fake/" in path or "/operationresults/" in path:
        return None
    if m := _TYPED.search(path):
        return f"{m.group(1)}/{m.group(2)}/{_VERB[method]}"
    if re.search(r"/resourcegroups(/[^/]+)?$", path, re.I):
        return f"Microsoft.Resources/subscriptions/resourceGroups/{_VERB[method]}"
    raise AssertionError(f"unmapped request {method} {path}")


def test_the_launcher_role_covers_a_launch_and_teardown(arm: RunningArm) -> None:
    p = AzureProvider(credential=StaticToken(), ssh_from="198.51.100.7")
    [inst] = p.launch(LaunchRequest(run_id="r-roles", name="j", command="true", run_dir="/tmp/x", region="eastus",
                                    instance_type="Standard_NC4as_T4_v3", price_per_hour=Decimal("0.5"),
                                    boot_script="#!/bin/bash\n"))
    p.describe([inst.instance_id])
    p.list_tagged()
    p.terminate([inst.instance_id])
    granted = {a.lower() for a in custom_roles("sub")["launcher"]["Actions"]}
    needed = {a for a in (needed_action(m, path) for m, path in arm.state.requests if path != "/msi/token") if a}
    assert needed and {a for a in needed if a.lower() not in granted} == set()


def test_setup_azure_prints_the_roles_for_the_subscription() -> None:
    sub = "0b1f6471-1bf0-4dda-aec3-cb9272f09590"
    result = run_cli("setup", "azure", "--json", "--subscription", sub)  # a unit test: in-process
    assert result.exit_code == 0, result.stderr
    roles = result.json()
    assert set(roles) == {"launcher", "machine", "machine-storage"}
    assert roles["machine"]["AssignableScopes"] == [f"/subscriptions/{sub}"]
    assert "Microsoft.Compute/virtualMachines/delete" in roles["machine"]["Actions"]
    assert not any(a.endswith("/write") and "virtualMachines" in a for a in roles["machine"]["Actions"])


def test_the_machine_reaches_blob_only_through_the_container_scoped_role() -> None:
    """Blob data access is its own role, assigned on the run storage's container: the subscription-wide machine
    role grants none (it would reach every storage account), and the storage role grants read and write only."""
    roles = custom_roles("sub")
    assert not [a for a in roles["machine"]["DataActions"] if "Microsoft.Storage" in a]
    storage = roles["machine-storage"]
    assert storage["Actions"] == [] and sorted(storage["DataActions"]) == [
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/read",
        "Microsoft.Storage/storageAccounts/blobServices/containers/blobs/write"]


@pytest.mark.parametrize("value", ["1234", '"], "Actions": ["*"', "\x1b[2J\x1b]0;t\x07"])
def test_a_subscription_that_is_not_a_guid_is_one_line_exit_2(value: str) -> None:
    """The ID lands in the role's AssignableScopes: a quote or a control character once broke the JSON (an
    "unexpected JSONDecodeError", exit 1); anything but a GUID is refused before a role is printed."""
    result = run_cli("setup", "azure", "--json", "--subscription", value)
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "is not a subscription ID" in result.stderr and len(result.stderr.strip().splitlines()) == 1
