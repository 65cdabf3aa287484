"""Azure Virtual Machines for gpuplan runs: the provider's declaration.

What the rest of gpuplan reads from the class (its billing rule, storage scheme, the catalog's clouds, spot
semantics) is declared here; the prices come from `AzurePricing` (providers/azure/pricing.py), and the machines'
lifecycle (launch, describe, terminate, list_tagged through the Azure SDK) lives in its own modules
(providers/azure/lifecycle.py, compute.py, network.py; the boot script's hooks in boot.py). The SDK is the
`azure` extra and is imported inside methods only (never at CLI start-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from typing import Any, ClassVar

from gpuplan.errors import UserError
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost
from gpuplan.providers.azure.pricing import AzurePricing
from gpuplan.providers.base import (
    Attachable,
    Instance,
    LaunchCheck,
    LaunchRequest,
    Provider,
)


class AzureProvider(Attachable, AzurePricing, Provider):
    """Azure GPU VMs (the N-series) for gpuplan runs.

    Settings (`[providers.azure]`): `subscription_id` (else AZURE_SUBSCRIPTION_ID), `region` (when a launch names
    none), `arm_endpoint` (else GPUPLAN_AZURE_ARM_ENDPOINT, else Azure Resource Manager), `image` (a marketplace
    URN or an image id; default Ubuntu-HPC 22.04: providers/azure/compute.py), `identity` (the resource id of the
    user-assigned managed identity the VMs get: what they read secrets and write storage with, and delete
    themselves with: providers/azure/boot.py), `ssh_public_key` (else GPUPLAN_AZURE_SSH_PUBLIC_KEY), `ssh_from`
    (an address to open port 22 to),
    `public_ip` (default on: the VMs' way out), `spot_max_price` (USD/hour; default -1, up to the on-demand
    price), `os_disk_gb`, `key_vault` (providers/azure/boot.py), `blob_endpoint` (else
    GPUPLAN_AZURE_BLOB_ENDPOINT: Blob storage moved, path style; tests), `credential` (tests).

    Run storage is a spec's `storage:` (or `[defaults] storage`) of the form `az://ACCOUNT/CONTAINER/PREFIX`
    (providers/azure_blob.py says why that form): the machines write `<storage>/<run id>/` with their managed
    identity (checkpoints/, node-N/ outputs, code.tar.gz), and the run's resource group carries the URL as a tag
    (`gpuplan:storage`), so `fetch_outputs` finds it again from any process, with the user's credential.
    """

    name: ClassVar[str] = "azure"
    cloud: ClassVar[str] = "azure"
    boots_from_script: ClassVar[bool] = True  # each node runs jobs.bootstrap's script from its custom data
    secrets_by_reference: ClassVar[bool] = True  # Key Vault: the custom data names secrets, holds no value
    storage_schemes: ClassVar[tuple[str, ...]] = ("az",)  # Blob, az://ACCOUNT/CONTAINER/PREFIX: azure_blob.py
    fetches_run_storage: ClassVar[bool] = True  # outputs come back from the run's storage (outputs.py)
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

    def __init__(self, *, subscription_id: str | None = None, region: str | None = None,
                 arm_endpoint: str | None = None, image: str | None = None, identity: str | None = None,
                 ssh_public_key: str | None = None, ssh_from: str | None = None, public_ip: bool = True,
                 spot_max_price: Decimal | None = None, os_disk_gb: int | None = None,
                 key_vault: str | None = None, blob_endpoint: str | None = None,
                 credential: Any = None) -> None:
        from gpuplan.providers.azure.arm import ArmSession
        from gpuplan.providers.azure.compute import DEFAULT_IMAGE, DEFAULT_OS_DISK_GB, image_reference

        self.session = ArmSession(subscription_id=subscription_id, endpoint=arm_endpoint, credential=credential)
        self.region = region
        self.image = image or DEFAULT_IMAGE
        image_reference(self.image)  # a malformed URN is the user's setting: ValueError -> exit 2
        self.identity = identity
        self.ssh_public_key = ssh_public_key
        self.ssh_from = ssh_from
        self.public_ip = public_ip
        self.spot_max_price = Decimal(str(spot_max_price)) if spot_max_price is not None else None
        self.os_disk_gb = os_disk_gb or DEFAULT_OS_DISK_GB
        self.key_vault = key_vault
        self.blob_endpoint = blob_endpoint
        self._machines: Any = None
        self._outputs: Any = None

    @property
    def machines(self) -> Any:
        """The lifecycle (providers/azure/lifecycle.py), built on first use."""
        if self._machines is None:
            from gpuplan.providers.azure.lifecycle import AzureMachines
            from gpuplan.providers.azure.settings import ssh_public_key, ssh_source

            key: list[str] = []

            def the_key() -> str:
                if not key:
                    key.append(ssh_public_key(self.ssh_public_key))
                return key[0]

            self._machines = AzureMachines(
                self.session, provider=self.name, image=self.image, identity_id=self.identity, ssh_key=the_key,
                ssh_from=lambda: ssh_source(self.ssh_from), public_ip=self.public_ip,
                spot_max_price=self.spot_max_price, os_disk_gb=self.os_disk_gb, vault=self.vault())
        return self._machines

    def vault(self) -> Any:
        """The Key Vault a run's secrets are kept in (providers/azure/secrets.py), or None without `key_vault`."""
        if not self.key_vault:
            return None
        from gpuplan.providers.azure.secrets import KeyVault, vault_url

        return KeyVault(vault_url(self.key_vault), self.session.credential)

    def secret_parameter(self, run_id: str, name: str) -> str:
        from gpuplan.providers.azure.secrets import secret_name, vault_url

        return f"{vault_url(self.key_vault or 'no-key-vault')}/secrets/{secret_name(run_id, name)}"

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        """Refuse, before anything is recorded, what cannot work on Azure: no SDK installed, storage or secrets
        without the identity or vault they need, a boot script bigger than Azure's custom data limit."""
        from gpuplan.providers.azure.arm import require_sdk
        from gpuplan.providers.azure.compute import MAX_CUSTOM_DATA_BYTES

        require_sdk()

        storage = request.options.get("run_storage_url")
        if storage and len(str(storage)) > 256:  # it rides as a tag value (Azure: at most 256 characters)
            raise UserError(f"the run's storage folder {storage} is over 256 characters; Azure tags hold 256")
        if storage and not self.identity:
            raise UserError(f"the run keeps its storage in {storage}, which the VMs write with their managed "
                            "identity: set [providers.azure] identity (docs/providers/azure.md)")
        if request.secrets and not self.key_vault:
            raise UserError("the job has secrets, and the azure provider keeps them in Key Vault: set "
                            "[providers.azure] key_vault (the vault's name) in the config file")
        script = self._largest_script(request)
        if len(script.encode()) > MAX_CUSTOM_DATA_BYTES:
            raise UserError(f"the boot script is {len(script.encode())} bytes; Azure's custom data holds at most "
                            f"{MAX_CUSTOM_DATA_BYTES} (ship the code through storage instead of inline)")
        return LaunchCheck(notes=(f"image {self.image}",), details={"image": self.image})

    @staticmethod
    def _largest_script(request: LaunchRequest) -> str:
        """The boot script as a node of a multi-node run gets it: with every node's address (a NIC's, at most
        15 characters, or the VM's name: providers/azure/lifecycle.py), which the planned script has not."""
        from gpuplan.providers.azure.naming import vm_name

        per_node = request.options.get("boot_script_for")
        if request.nodes > 1 and callable(per_node):
            addrs = [max(vm_name(request.run_id, rank, int(request.options.get("generation") or 0)),
                         "255.255.255.255", key=len) for rank in range(request.nodes)]
            return str(per_node(request.nodes - 1, addrs[0], node_addrs=addrs))
        return request.boot_script or ""

    def named_zones(self, region: str, named: Sequence[str]) -> list[str]:
        """Azure's zones are numbers inside a region; a spec names them `<region>-<n>` (`eastus-2`)."""
        return [z for z in named if z.startswith(region + "-") and z[len(region) + 1:].isdigit()]

    def instance_family(self, instance_type: str | None) -> str | None:
        from gpuplan.providers.azure.naming import quota_family

        return quota_family(instance_type)

    def launch(self, request: LaunchRequest) -> list[Instance]:
        if not request.region and self.region:
            import dataclasses

            request = dataclasses.replace(request, region=self.region)
        return list(self.machines.launch(request))

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        return list(self.machines.describe(instance_ids))

    def terminate(self, instance_ids: Sequence[str]) -> None:
        self.machines.terminate(instance_ids)

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        return list(self.machines.list_tagged(run_id, include_ended=include_ended))

    def boot_cloud(self) -> BootCloud:
        from gpuplan.providers.azure.boot import azure_boot_cloud

        return azure_boot_cloud(arm_endpoint=self.session.endpoint, blob_endpoint=self.outputs.blob.endpoint)

    @property
    def outputs(self) -> Any:
        """The run outputs in Blob storage (providers/azure/outputs.py), built on first use."""
        if self._outputs is None:
            from gpuplan.providers.azure.outputs import BlobOutputs
            from gpuplan.providers.azure_blob import BlobClient

            self._outputs = BlobOutputs(BlobClient(_LazyCredential(self.session), self.blob_endpoint),
                                        self.machines.run_storage)
        return self._outputs

    def fetch_outputs(self, instance: Instance, run_dir: str) -> None:
        """Copy what the node shipped to `<storage>/<run id>/node-<rank>/` into the run folder."""
        if run_dir:
            self.outputs.fetch(instance, run_dir)

    def outcome_hint(self) -> str | None:
        from gpuplan.providers.azure.outputs import HINT

        return HINT

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        """ssh to the node's public IP (providers/azure/attach.py); port 22 must have been opened at launch."""
        from gpuplan.providers.azure.attach import azure_attach

        return azure_attach(self.session, target, command, interactive=interactive)

    def ssh_host(self, target: AttachTarget) -> SshHost | None:
        from gpuplan.providers.azure.attach import azure_ssh_host

        return azure_ssh_host(self.session, target)


class _LazyCredential:
    """The session's credential, built when Blob first asks for a token (not when the provider is built)."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def get_token(self, *scopes: str, **kwargs: Any) -> Any:
        return self._session.credential().get_token(*scopes, **kwargs)
