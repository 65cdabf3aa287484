"""Every node's address, rank 0 first, for the job: GPUPLAN_NODE_IPS (part of the boot script, gpuplan.jobs.bootstrap).

Why: SkyPilot's SKYPILOT_NODE_IPS and dstack's DSTACK_NODES_IPS list every node of the run, one address a line, in
rank order (https://docs.skypilot.co/en/latest/running-jobs/environment-variables.html), and task scripts use the
whole list (`wc -l`, a hostfile for mpirun/deepspeed), not only its head. A cloud node learns the other nodes the
same way it learns rank 0's address:

- AWS (`node_ips_tag`): all nodes start in one RunInstances call, whose answer has every private address; gpuplan
  tags each machine with the list (gpuplan.providers.aws.ranks, with its rank and rank 0's address) and the script
  reads it from the instance metadata (IMDSv2 tags, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/work-with-tags-in-IMDS.html).
  A tag value holds at most 256 characters (sixteen IPv4 addresses), so a longer list continues in `<tag>-1`,
  `<tag>-2`, ... Read once the rank tags are there (gpuplan writes all of a machine's tags in one CreateTags call).
- GCP (`node_addrs`): every VM has the internal DNS name `NAME.ZONE.c.PROJECT.internal` and the names are known
  before any VM boots (https://cloud.google.com/compute/docs/internal-dns); the script resolves each (getent,
  bounded wait) and keeps the name where it does not resolve in time.
- Azure (`node_addrs`): gpuplan makes every node's NIC before any VM, and a NIC has its private address from its
  create on (https://learn.microsoft.com/azure/virtual-network/ip-services/private-ip-addresses): the addresses
  themselves go into every script (gpuplan.providers.azure.lifecycle).
- One node: its own address (rank 0's), as SkyPilot gives a one-node cluster.

A tag value is never run: it must be dotted IPv4 addresses and commas, or the list is left out (with a log line).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

RESOLVE_WAIT_SECONDS = 120


def node_ips_assignments(node_addrs: Sequence[str], node_ips_tag: str | None, resolve_wait: int) -> list[str]:
    """The script's variables (every value shell-quoted)."""
    q = shlex.quote
    addrs = " ".join(q(a) for a in node_addrs)
    return [f"NODE_ADDRS=({addrs})", f"NODE_IPS_TAG={q(node_ips_tag or '')}",
            f"RESOLVE_WAIT={max(int(resolve_wait), 0)}"]


# Shell functions (no user text; variables only inside double quotes). instance_tag is the cloud's hook
# (AWS: IMDSv2 tags), only called when NODE_IPS_TAG is set.
NODE_IPS_FUNCTIONS = r"""resolve_addr() {
  # An address as is; a name: its first IPv4 address, waiting (bounded) for the DNS record; else the name.
  local waited=0 ip
  case "$1" in *[!0-9.]*) ;; *) printf '%s\n' "$1"; return 0 ;; esac
  while :; do
    ip=$(getent ahostsv4 "$1" 2>/dev/null | { read -r first _ && printf '%s' "$first"; })
    if [ -n "$ip" ]; then
      printf '%s\n' "$ip"
      return 0
    fi
    if [ "$waited" -ge "$RESOLVE_WAIT" ]; then
      log "node address $1 did not resolve in $RESOLVE_WAIT s: listed by name"
      printf '%s\n' "$1"
      return 0
    fi
    sleep 2
    waited=$((waited + 2))
  done
}

node_ips() {
  # Every node's address, one a line, rank 0 first; nothing when this node cannot know them.
  local addr chunk key part=0 list=''
  if [ "${#NODE_ADDRS[@]}" -gt 0 ]; then
    for addr in "${NODE_ADDRS[@]}"; do
      resolve_addr "$addr"
    done
    return 0
  fi
  if [ -n "$NODE_IPS_TAG" ]; then
    key=$NODE_IPS_TAG
    while chunk=$(instance_tag "$key" 2>/dev/null) && [ -n "$chunk" ]; do
      case "$chunk" in
        *[!0-9.,]*) log "the instance tag $key is not a list of IPv4 addresses"; return 0 ;;
        *) ;;
      esac
      list=${list:+$list,}$chunk
      part=$((part + 1))
      key="$NODE_IPS_TAG-$part"
    done
    if [ -n "$list" ]; then
      printf '%s\n' "$list" | tr ',' '\n'
      return 0
    fi
    log "no instance tag $NODE_IPS_TAG: GPUPLAN_NODE_IPS lists rank 0 only"
  fi
  if [ "${NNODES:-1}" -le 1 ] || [ -n "$NODE_IPS_TAG" ]; then
    printf '%s\n' "$MASTER_ADDR_"
  fi
}
"""

# After the master address is known (rank 0's own, a tag's, or given).
NODE_IPS_STEP = r"""GPUPLAN_NODE_IPS=$(node_ips)
export GPUPLAN_NODE_IPS
"""
