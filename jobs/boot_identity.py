"""Multi-node AWS: a node learns its rank and rank 0's address at boot, from instance tags (part of the boot script).

All nodes of a run start in one RunInstances call (a cluster placement group wants one request), so each boots
the same script; gpuplan then tags each machine with its rank and rank 0's private address
(gpuplan.providers.aws.ranks). The script (gpuplan.jobs.bootstrap, with `rank_tag`/`master_tag`) waits, bounded by
`identity_wait_seconds`, until both tags appear in the instance metadata: IMDSv2, `PUT /latest/api/token` then
`GET /latest/meta-data/tags/instance/<key>` with the token (instance tags in metadata are enabled at launch;
https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/work-with-tags-in-IMDS.html). It checks them (a number below
NNODES, a dotted IPv4 address: a tag value is never run, only compared and then used inside double quotes), then
sets NODE_RANK/GPUPLAN_NODE_RANK (and RANK with one process per node) and MASTER_ADDR, and adds `/node-<rank>` to
the run's storage prefix. Without them it records `no node identity from instance tags` (exit 5), ships its log
under its launch index (where gpuplan looks for an untagged node) and powers off.

A script without tags (one node, or a provider that renders one script per node) has none of this.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

IDENTITY_WAIT_SECONDS = 600  # how long a node waits for its rank and master-address tags
IDENTITY_POLL_SECONDS = 5
# The job contract's variables that hold the node's rank (gpuplan.jobs.runner.job_environment): set at boot.
RANK_VARIABLES = ("NODE_RANK", "GPUPLAN_NODE_RANK", "PET_NODE_RANK", "RANK")


def identity_assignments(rank_tag: str | None, master_tag: str | None, wait_seconds: int, poll_seconds: int,
                         rank_names: Sequence[str]) -> list[str]:
    """The script's variables for the wait, every value shell-quoted."""
    q = shlex.quote
    names = " ".join(q(n) for n in rank_names)
    return [f"RANK_TAG={q(rank_tag or '')}", f"MASTER_TAG={q(master_tag or '')}",
            f"IDENTITY_WAIT={int(wait_seconds)}", f"IDENTITY_POLL={max(int(poll_seconds), 1)}",
            f"RANK_NAMES=({names})"]


# Shell functions (defined with the others; refer to variables only inside double quotes; no user text).
IDENTITY_FUNCTIONS = r"""node_identity() {
  # Multi-node from one script: every node boots it; gpuplan tags each machine with its rank and rank 0's
  # private address right after starting them all. Wait (bounded) for both tags, then check them.
  local waited=0 rank='' master=''
  while :; do
    rank=$(instance_tag "$RANK_TAG" || true)
    master=$(instance_tag "$MASTER_TAG" || true)
    if [ -n "$rank" ] && [ -n "$master" ]; then
      break
    fi
    if [ "$waited" -ge "$IDENTITY_WAIT" ]; then
      log "no instance tags $RANK_TAG and $MASTER_TAG after $IDENTITY_WAIT s"
      return 1
    fi
    sleep "$IDENTITY_POLL"
    waited=$((waited + IDENTITY_POLL))
  done
  case "$rank" in
    ''|*[!0-9]*) log "the instance tag $RANK_TAG is not a node rank"; return 1 ;;
    *) ;;
  esac
  case "$master" in
    ''|*[!0-9.]*) log "the instance tag $MASTER_TAG is not an IPv4 address"; return 1 ;;
    *) ;;
  esac
  if [ "$rank" -ge "${NNODES:-1}" ]; then
    log "the instance tag $RANK_TAG says node $rank, but the run has ${NNODES:-1} nodes"
    return 1
  fi
  NODE_RANK_=$rank
  MASTER_ADDR_=$master
  for name in "${RANK_NAMES[@]}"; do
    export "$name=$rank"
  done
}
"""

# The first step of the script's main part: before the secrets, the job, or anything that names the rank.
IDENTITY_STEP = r"""if ! node_identity; then
  # Outputs go where gpuplan looks for a node it could not tag: its launch index, as the provider falls back to.
  INDEX=$(launch_index || true)
  case "$INDEX" in ''|*[!0-9]*) STORAGE_URL='' ;; *) STORAGE_URL=${STORAGE_URL:+${STORAGE_URL%/}/node-$INDEX} ;; esac
  finish 5 "no node identity from instance tags"
fi
STORAGE_URL=${STORAGE_URL:+${STORAGE_URL%/}/node-$NODE_RANK_}
"""
