"""The Compute Engine Instance resource both ways: the body gpuplan inserts for one node, and the Instance it
reads back. Split from providers/gcp/provider.py (the launch/describe/terminate flow) so each file keeps one job;
it sees the provider only through `VmSettings`, so it does not import the provider back.

The body carries what the provider's safety rules need: gpuplan's labels on the VM and its boot disk, the
startup script, guest attributes on (the exit code channel), OS Login with project SSH keys blocked, GPUs that
terminate on host maintenance, spot VMs deleted on preemption, `max_hours` as `maxRunDuration` with DELETE, and
a service account only where one is configured or a bucket or secrets need one (providers/gcp/outputs.py).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Protocol

from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.base import Instance, InstanceState, LaunchRequest
from gpuplan.providers.gcp.data_nics import DataNic, wants_gvnic
from gpuplan.providers.gcp.outputs import vm_service_account
from gpuplan.providers.gcp.rules import (
    GPU_NAMES,
    LABEL_RUN_ID,
    NETWORK_TAG,
    STATUS_MAP,
    boot_disk_type_for,
    has_fixed_gpus,
    instance_name,
    labels_for,
    last_segment,
    parse_time,
    region_of,
)
from gpuplan.providers.gcp.secrets import LABEL_SECRETS, LABEL_SECRETS_VALUE

log = logging.getLogger(__name__)


class VmSettings(Protocol):
    """What a VM body needs from the GCP provider: its settings and its storage and secret endpoints."""

    @property
    def name(self) -> str: ...

    @property
    def cloud(self) -> str: ...

    image: str | None
    image_project: str
    image_family: str
    boot_disk_gb: int
    boot_disk_type: str
    network: str
    subnetwork: str | None
    external_ip: bool
    service_account: str | None

    @property
    def scopes(self) -> Sequence[str] | None: ...

    @property
    def project(self) -> str: ...

    @property
    def bucket(self) -> str | None: ...

    def outputs_url(self, run_id: str) -> str | None: ...

    def outputs_endpoint(self) -> str | None: ...

    def secret_parameter(self, run_id: str, name: str) -> str: ...

    def secrets_endpoint(self) -> str | None: ...

    def boot_cloud(self) -> BootCloud: ...


def option(request: LaunchRequest, key: str, default: Any) -> Any:
    """A per-launch override from `request.options`, else the provider's setting."""
    value = request.options.get(key) if request.options else None
    return default if value is None else value


def image(provider: VmSettings, request: LaunchRequest) -> str:
    """The VM image: an explicit one (per launch `options["vm_image"]`), else the configured family."""
    explicit = option(request, "vm_image", provider.image)
    if explicit:
        return str(explicit)
    project = option(request, "image_project", provider.image_project)
    family = option(request, "image_family", provider.image_family)
    return f"projects/{project}/global/images/family/{family}"


def boot_disk_type(provider: VmSettings, request: LaunchRequest, machine_type: str) -> str:
    """The configured boot disk type, or hyperdisk-balanced where the machine series boots only from Hyperdisk
    (rules.boot_disk_type_for names the sources): GCE refuses a Persistent Disk boot disk on A4 / A3 Ultra."""
    configured = str(option(request, "boot_disk_type", provider.boot_disk_type))
    chosen = boot_disk_type_for(machine_type, configured)
    if chosen != configured:
        log.info("%s boots only from Hyperdisk: boot disk %s instead of %s", machine_type, chosen, configured)
    return chosen


def instance_body(provider: VmSettings, request: LaunchRequest, zone: str, name: str, machine_type: str,
                   gpus: tuple[str | None, int], rank: int, data_nics: Sequence[DataNic] = ()) -> Any:
    """The Instance resource: labels, boot disk, GPUs, startup script, scheduling (spot, fail-safe), and the GPU
    data NICs of a multi-node A3 run (providers/gcp/data_nics.py: gVNIC, no external address)."""
    from google.cloud import compute_v1

    labels = {**labels_for(request), "gpuplan-node-rank": str(rank)}
    if request.secrets:  # a later process learns from the VM alone that the run's secrets must go at its end
        labels[LABEL_SECRETS] = LABEL_SECRETS_VALUE
    disk = compute_v1.AttachedDisk(
        boot=True, auto_delete=True,
        initialize_params=compute_v1.AttachedDiskInitializeParams(
            source_image=image(provider, request),
            disk_size_gb=int(option(request, "boot_disk_gb", provider.boot_disk_gb)),
            disk_type=f"zones/{zone}/diskTypes/{boot_disk_type(provider, request, machine_type)}",
            labels=labels,
        ),
    )
    nic = compute_v1.NetworkInterface(network=option(request, "network", provider.network))
    subnetwork = option(request, "subnetwork", provider.subnetwork)
    if subnetwork:
        nic.subnetwork = subnetwork
    if bool(option(request, "external_ip", provider.external_ip)):
        nic.access_configs = [compute_v1.AccessConfig(name="External NAT", type_="ONE_TO_ONE_NAT")]
    if wants_gvnic(machine_type):
        nic.nic_type = "GVNIC"
    nics = [nic, *(compute_v1.NetworkInterface(network=d.network, subnetwork=d.subnetwork, nic_type="GVNIC")
                   for d in data_nics)]
    metadata = [
        compute_v1.Items(key="startup-script", value=startup_script(provider, request, zone, rank)),
        compute_v1.Items(key="install-nvidia-driver", value="True"),
        compute_v1.Items(key="enable-oslogin", value="TRUE"),
        compute_v1.Items(key="block-project-ssh-keys", value="TRUE"),
        # The boot script writes its exit code here (no bucket or IAM needed); see fetch_outputs.
        compute_v1.Items(key="enable-guest-attributes", value="TRUE"),
    ]
    instance = compute_v1.Instance(
        name=name,
        machine_type=f"zones/{zone}/machineTypes/{machine_type}",
        labels=labels,
        disks=[disk],
        network_interfaces=nics,
        metadata=compute_v1.Metadata(items=metadata),
        scheduling=scheduling(request),
        tags=compute_v1.Tags(items=[NETWORK_TAG]),
    )
    acc, count = gpus
    if acc and count and not has_fixed_gpus(machine_type):
        instance.guest_accelerators = [compute_v1.AcceleratorConfig(
            accelerator_type=f"zones/{zone}/acceleratorTypes/{acc}", accelerator_count=count)]
    # The run's own gs:// storage (checkpoints, code) needs the same storage scope as the outputs bucket.
    storage = str(request.options.get("run_storage_url") or "")
    bucket = provider.bucket or (storage.removeprefix("gs://").split("/")[0] if storage.startswith("gs://") else None)
    account = vm_service_account(option(request, "service_account", provider.service_account), provider.scopes,
                                 bucket, secrets=bool(request.secrets))
    if account:
        instance.service_accounts = [compute_v1.ServiceAccount(email=account[0], scopes=account[1])]
        if account[0] == "default" and rank == 0:
            # The default Compute Engine account usually holds Editor on the project: with a storage (or the
            # cloud-platform) scope the VM could write to every bucket and read every secret. Say so once per
            # launch; docs/providers/gcp.md shows the narrow setup.
            if not request.secrets:
                log.warning("GCS outputs use the project's default service account (often Editor); set "
                            "service_account in [providers.gcp] to one allowed to write only to gs://%s",
                            provider.bucket)
            else:
                log.warning("secrets%s use the project's default service account (often Editor) with the "
                            "cloud-platform scope; set service_account in [providers.gcp] to a dedicated one "
                            "holding roles/secretmanager.secretAccessor on gpuplan's secrets only "
                            "(docs/providers/gcp.md)",
                            " and GCS outputs" if provider.bucket else "")
    return instance


def startup_script(provider: VmSettings, request: LaunchRequest, zone: str, rank: int) -> str:
    """This node's startup script: orchestration's per-node renderer (`options["boot_script_for"]`), else the
    request's one script, else jobs.bootstrap's for this node; rank 0's zonal DNS name is the master address.

    GCE gives every VM the internal DNS name `NAME.ZONE.c.PROJECT.internal`, and the names are deterministic,
    so every rank knows the master's address before rank 0 has booted.
    """
    generation = int(option(request, "generation", 0))
    names = [f"{instance_name(request.run_id, r, generation)}.{zone}.c.{provider.project}.internal"
             for r in range(max(request.nodes, 1))]
    master = names[0]
    # Every node's name, for GPUPLAN_NODE_IPS (gpuplan.jobs.boot_node_ips resolves them at boot); one node: its own
    # address, as the script finds it.
    node_addrs = names if request.nodes > 1 else []
    per_node = request.options.get("boot_script_for")
    if callable(per_node):  # orchestration's renderer: (rank, master address or None on rank 0) -> script
        return str(per_node(rank, master if rank else None, node_addrs=node_addrs))
    if request.boot_script is not None:
        return request.boot_script
    from gpuplan.jobs.bootstrap import boot_plan_for, render_boot_script
    from gpuplan.jobs.runner import NodeLaunch
    from gpuplan.jobs.storage import node_storage_fields

    node = NodeLaunch(
        run_id=request.run_id, name=request.name,
        argv=list(request.options.get("argv") or ["/bin/sh", "-c", request.command]),
        run_dir=request.run_dir, node_rank=rank, nnodes=request.nodes,
        nproc_per_node=max(int(request.gpus_per_node or 1), 1), master_addr=master,
        master_port=int(request.options.get("master_port") or 29500), runtime=request.runtime or "auto",
        image=request.image, workdir=request.workdir, env=dict(request.env),
        secret_names=sorted(request.secrets), gpus=int(request.gpus_per_node or 0), max_hours=request.max_hours,
        checkpoint_dir=request.options.get("checkpoint_dir"), **node_storage_fields(request.options),
    )
    bucket_url = provider.outputs_url(request.run_id)
    storage_url = request.options.get("storage_url") or (f"{bucket_url}/node-{rank}" if bucket_url else None)
    # Secrets by reference: the script names each Secret Manager secret; the values never enter the metadata.
    params = {name: provider.secret_parameter(request.run_id, name) for name in sorted(request.secrets)}
    plan = boot_plan_for(node, secrets={}, storage_url=storage_url, master_addr=master if rank else None,
                         secret_params=params, cloud=provider.boot_cloud(),
                         interruption_watch=bool(request.options.get("interruption_watch")), node_addrs=node_addrs)
    return render_boot_script(plan)


def scheduling(request: LaunchRequest) -> Any:
    """GPUs cannot live-migrate; spot VMs are deleted on preemption; max_hours becomes maxRunDuration."""
    from google.cloud import compute_v1

    policy = compute_v1.Scheduling(on_host_maintenance="TERMINATE", automatic_restart=False)
    if request.spot:
        policy.provisioning_model = "SPOT"
        policy.instance_termination_action = "DELETE"
    else:
        policy.provisioning_model = "STANDARD"
    if request.max_hours:
        # GCE's own fail-safe: the VM is deleted when the run exceeds its limit, even if gpuplan is gone.
        policy.max_run_duration = compute_v1.Duration(seconds=max(int(request.max_hours * 3600), 30))
        policy.instance_termination_action = "DELETE"
    return policy


def to_instance(provider: VmSettings, raw: Any) -> Instance:
    """gpuplan's view of a Compute API Instance (state, GPUs, spot, node rank from its labels)."""
    zone = last_segment(raw.zone)
    labels = dict(raw.labels)
    machine_type = last_segment(raw.machine_type)
    gpu, count = None, 0.0
    if raw.guest_accelerators:
        acc = raw.guest_accelerators[0]
        gpu_type = last_segment(acc.accelerator_type)
        gpu, count = GPU_NAMES.get(gpu_type, gpu_type), float(acc.accelerator_count)
    status = str(raw.status or "")
    spot = str(raw.scheduling.provisioning_model or "") == "SPOT" or bool(raw.scheduling.preemptible)
    try:
        rank = int(labels.get("gpuplan-node-rank", "0"))
    except ValueError:
        rank = 0
    return Instance(
        provider=provider.name, instance_id=f"{zone}/{raw.name}",
        state=STATUS_MAP.get(status, InstanceState.UNKNOWN),
        run_id=labels.get(LABEL_RUN_ID), cloud=provider.cloud, zone=zone, region=region_of(zone),
        instance_type=machine_type, gpu=gpu, gpu_count=count, spot=spot, node_rank=rank,
        launched_at=parse_time(raw.creation_timestamp), created_at=parse_time(raw.creation_timestamp),
        ended_at=parse_time(raw.last_stop_timestamp) if status == "TERMINATED" else None,
        state_reason=(raw.status_message or None) if status != "TERMINATED"
        else "stopped; its disk bills until the VM is deleted",
        tags=labels,
    )
