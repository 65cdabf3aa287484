"""The firewall rule a multi-node run needs between its VMs on any VPC network but the auto-created `default` one.

Why: every VPC network denies all ingress by its implied rule (https://cloud.google.com/firewall/docs/firewalls
#default_firewall_rules); only the auto-created `default` network comes with `default-allow-internal`, which lets its
instances reach each other on every protocol and port (#more_rules_default_vpc). On a network of the user's own,
rank 1 cannot reach rank 0's rendezvous port and torchrun waits until the fail-safe powers the machines off.

So before the VMs of a multi-node run start on such a network, gpuplan makes sure of one rule per network,
`gpuplan-internal-<network>`: INGRESS, all protocols, from instances tagged `gpuplan` to instances tagged `gpuplan`
(every gpuplan VM carries that network tag, gpuplan.providers.gcp.instance), so it opens nothing to anything else.
Firewall rules take no labels; the rule is marked by its name and description. An existing rule of that name is
reused (a second run, another gpuplan); one that exists but allows less is refused with the rule to add. Without
permission to create it (compute.firewalls.create, in roles/compute.securityAdmin), the launch ends before any VM
starts, with the exact `gcloud` command that adds it.
https://cloud.google.com/compute/docs/reference/rest/v1/firewalls/insert
"""

from __future__ import annotations

import re
from typing import Any

from gpuplan.providers.base import AuthError, ProviderError
from gpuplan.providers.gcp.idempotent import create_once, read_existing
from gpuplan.providers.gcp.rules import NETWORK_TAG, last_segment

RULE_PREFIX = "gpuplan-internal-"
DESCRIPTION = "gpuplan: all traffic between gpuplan VMs (network tag gpuplan) of this network; created-by gpuplan"


def is_default(network: str) -> bool:
    return last_segment(network) == "default"


def rule_name(network: str) -> str:
    """`gpuplan-internal-<network>`, cut to GCE's 63 characters (names: [a-z]([-a-z0-9]*[a-z0-9])?)."""
    name = re.sub(r"[^a-z0-9-]", "-", f"{RULE_PREFIX}{last_segment(network).lower()}")[:63]
    return name.rstrip("-")


def network_path(network: str, project: str) -> str:
    """A `global/networks/N` reference as the project-qualified path a firewall rule names."""
    if network.startswith(("projects/", "https://")):
        return network
    return f"projects/{project}/global/networks/{last_segment(network)}"


def command(network: str) -> str:
    """The gcloud command that adds the same rule by hand."""
    return (f"gcloud compute firewall-rules create {rule_name(network)} --network={last_segment(network)} "
            f"--direction=INGRESS --allow=all --source-tags={NETWORK_TAG} --target-tags={NETWORK_TAG}")


def allows_nodes(rule: Any) -> bool:
    """Whether an existing rule lets gpuplan's VMs reach each other on every port."""
    protocols = {str(getattr(a, "I_p_protocol", "") or "") for a in rule.allowed}
    return (rule.direction in ("INGRESS", "") and not rule.disabled and "all" in protocols
            and NETWORK_TAG in rule.source_tags and (not rule.target_tags or NETWORK_TAG in rule.target_tags))


def ensure_internal_rule(provider: Any, network: str) -> str | None:
    """Make sure the run's nodes can reach each other on `network`; returns the rule's name (None: `default`)."""
    from google.cloud import compute_v1

    if is_default(network):
        return None
    name = rule_name(network)
    firewalls = provider.client("FirewallsClient")

    def refused(exc: Exception) -> ProviderError:
        return _refused(exc, network)

    found = read_existing(lambda: firewalls.get(project=provider.project, firewall=name), refused)
    if found is not None:
        if not allows_nodes(found):
            raise ProviderError(f"firewall rule {name} exists but does not let gpuplan's VMs reach each other; "
                                f"replace it with: {command(network)}", code="FirewallRuleMismatch")
        return name
    rule = compute_v1.Firewall(
        name=name, network=network_path(network, provider.project), direction="INGRESS", priority=1000,
        description=DESCRIPTION, allowed=[compute_v1.Allowed(I_p_protocol="all")], source_tags=[NETWORK_TAG],
        target_tags=[NETWORK_TAG])

    def create() -> None:
        operation = firewalls.insert(project=provider.project, firewall_resource=rule)
        provider.client("GlobalOperationsClient").wait(project=provider.project, operation=operation.name)

    create_once(create, refused)
    return name


def _refused(exc: Exception, network: str) -> ProviderError:
    from google.api_core import exceptions as gexc

    if isinstance(exc, (gexc.Forbidden, gexc.PermissionDenied, gexc.Unauthorized)):
        return AuthError(f"a multi-node run on network {last_segment(network)} needs a firewall rule between its VMs, "
                         f"and this account may not create it ({exc.message}); add it with: {command(network)}",
                         code="FirewallRuleMissing")
    from gpuplan.providers.gcp.rules import map_api_error

    return map_api_error(exc)
