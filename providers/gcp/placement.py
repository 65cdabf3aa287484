"""A compact placement policy for a multi-node GCP run: its VMs close together, as EC2's cluster placement group.

Why: NCCL's all-reduce between nodes runs at the speed of the path between them; "compact placement policies
specify that your VMs should be physically placed close to each other, which reduces network latency"
(https://cloud.google.com/compute/docs/instances/placement-policies-overview#compact). GPU machine series with it:
"A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High, A3 Edge, A2, G4, G2"
(https://cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy, "Supported machine types");
not N1. A policy without a maximum distance, as gpuplan makes, holds at most 1,500 VMs: "About placement policies"
(https://cloud.google.com/compute/docs/instances/placement-policies-overview, its table of maximum distance values,
read in the zh-CN copy: unspecified - A2, A3, C2, C3, C4, C2D, C3D, G2, H3, N2 and N2D - 1500 VMs; 150 only with
maxDistance 2, 22 with 1) and the AI Hypercomputer page above ("Unspecified" - A4, A3 Ultra, A3 Mega, A3 High (8
GPUs) - 1500; last updated 2026-04-06). The 150 that gpuplan used before came from the older "define-instance-
placement" page's restrictions ("supports up to 150 VMs per policy"). A larger run goes without one, said in the log.

The policy is the run's own, `gpuplan-<run id>`, regional, COLLOCATED with vmCount = the run's nodes
(https://cloud.google.com/compute/docs/reference/rest/v1/resourcePolicies: groupPlacementPolicy.collocation,
vmCount); each VM names it in `resourcePolicies`. Resource policies take no labels, so the name and description
mark it as gpuplan's. It is deleted once the run has no VM left (a policy still in use is refused by GCE, and
costs nothing: the next teardown tries again).
"""

from __future__ import annotations

import logging
import re
from typing import Any

from gpuplan.providers.gcp.idempotent import create_once
from gpuplan.providers.gcp.rules import map_api_error

log = logging.getLogger(__name__)

COMPACT_FAMILIES = ("a2-", "a3-", "a4-", "a4x-", "g2-", "g4-")
MAX_COMPACT_VMS = 1500  # no maxDistance: placement-policies-overview (see above)
DESCRIPTION = "gpuplan: compact placement of one multi-node run; created-by gpuplan"


def wants_compact(machine_type: str, nodes: int) -> bool:
    if nodes > MAX_COMPACT_VMS and machine_type.startswith(COMPACT_FAMILIES):
        log.warning("%d VMs are more than a compact placement policy holds (%d): placed without one", nodes,
                    MAX_COMPACT_VMS)
        return False
    return nodes > 1 and machine_type.startswith(COMPACT_FAMILIES)


def policy_name(run_id: str) -> str:
    return re.sub(r"[^a-z0-9-]", "-", f"gpuplan-{run_id.lower()}")[:63].rstrip("-")


def policy_path(project: str, region: str, run_id: str) -> str:
    return f"projects/{project}/regions/{region}/resourcePolicies/{policy_name(run_id)}"


def ensure_compact_policy(provider: Any, region: str, run_id: str, nodes: int) -> str:
    """The run's compact placement policy in `region` (made once; a retried launch finds it); returns its path."""
    from google.cloud import compute_v1

    policy = compute_v1.ResourcePolicy(
        name=policy_name(run_id), region=region, description=DESCRIPTION,
        group_placement_policy=compute_v1.ResourcePolicyGroupPlacementPolicy(collocation="COLLOCATED",
                                                                              vm_count=nodes))

    def create() -> None:  # a retried launch of this run may have made it already
        operation = provider.client("ResourcePoliciesClient").insert(project=provider.project, region=region,
                                                                    resource_policy_resource=policy)
        provider.client("RegionOperationsClient").wait(project=provider.project, region=region,
                                                       operation=operation.name)

    create_once(create, lambda exc: map_api_error(exc, region=region))
    return policy_path(provider.project, region, run_id)


def delete_compact_policy(provider: Any, region: str, run_id: str) -> bool:
    """Delete the run's policy once its VMs are gone; True when it is gone (best effort, logged otherwise)."""
    from google.api_core import exceptions as gexc

    try:
        operation = provider.client("ResourcePoliciesClient").delete(project=provider.project, region=region,
                                                                    resource_policy=policy_name(run_id))
        provider.client("RegionOperationsClient").wait(project=provider.project, region=region,
                                                       operation=operation.name)
    except gexc.NotFound:
        return True
    except Exception as exc:
        log.info("placement policy %s not deleted: %s", policy_name(run_id), exc)
        return False
    return True
