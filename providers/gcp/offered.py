"""Does a zone offer the VM's machine type and GPU? Asked before the insert, so failover learns "not offered here"
as a capacity refusal (try the next zone) rather than from the insert's 400 (split from providers/gcp/provider.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuplan.providers.base import CapacityError, LaunchRequest, ProviderError
from gpuplan.providers.gcp.rules import accelerator_type, has_fixed_gpus, map_api_error, region_of


def offered_gpus(client: Callable[[str], Any], project: str, retry: Any, zone: str, machine_type: str,
                 request: LaunchRequest) -> tuple[str | None, int]:
    """(accelerator type, count) the VM will have; CapacityError if the zone does not offer the type or GPU.

    GCE would refuse the insert with a 400 too, but a typed "not offered here" lets failover move on.
    """
    from google.api_core import exceptions as gexc

    try:
        mt = client("MachineTypesClient").get(project=project, zone=zone, machine_type=machine_type, retry=retry)
    except gexc.NotFound as exc:
        raise CapacityError(f"machine type {machine_type} is not offered in {zone}", code="NOT_OFFERED_IN_ZONE",
                            zone=zone, region=region_of(zone)) from exc
    except Exception as exc:
        raise map_api_error(exc, zone=zone) from exc
    if mt.accelerators:
        fixed = mt.accelerators[0]
        return fixed.guest_accelerator_type, int(fixed.guest_accelerator_count)
    if not request.gpu or not request.gpus_per_node:
        return None, 0
    if has_fixed_gpus(machine_type):
        raise ProviderError(f"{machine_type} reports no GPUs; cannot attach {request.gpu} to it",
                            code="NoMachineType", zone=zone)
    acc = accelerator_type(request.gpu)
    try:
        client("AcceleratorTypesClient").get(project=project, zone=zone, accelerator_type=acc,
                                                  retry=retry)
    except gexc.NotFound as exc:
        raise CapacityError(f"GPU {acc} is not offered in {zone}", code="NOT_OFFERED_IN_ZONE", zone=zone,
                            region=region_of(zone)) from exc
    except Exception as exc:
        raise map_api_error(exc, zone=zone) from exc
    return acc, int(request.gpus_per_node)
