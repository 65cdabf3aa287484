"""Multi-node: every node watches its peers and ends the job and itself when the group is broken (part of the boot
script, gpuplan.jobs.bootstrap).

Why: a data-parallel job cannot go on without one of its nodes, but the survivors do not know it — they block in a
collective or a rendezvous until a timeout, max_hours, or for ever — and keep billing. With `--detach` no gpuplan
is watching to end them. So each node ends itself once the group is broken; `gpuplan status`/`watch` then finds one
machine preempted and relaunches the whole group from the last checkpoint (gpuplan.supervise.relaunch).

How: through the run's storage, which every node already writes (no cloud API permission beyond it, no port
between nodes to open). A node that ends badly (a non-zero exit, max_hours, a lost peer) or receives the cloud's
interruption notice (AWS's two minutes, GCE's thirty seconds) writes one object, `<run>/group-broken` (its clock,
its rank, a fixed reason); a successful end writes nothing, so a node still saving its final checkpoint is left to
finish. Every PEER_POLL seconds each node writes `heartbeat` (its clock) to its own prefix and reads the marker, and
rank 0 reads every node's heartbeat while the others read rank 0's (one GET per peer on rank 0, two on the others):
a marker newer than this node's boot, or a heartbeat once seen and then older than PEER_STALE seconds (a machine
lost without notice), breaks the group. The node records `peer_lost`, sends the job SIGTERM so it saves, and the
script's normal end copies the checkpoints to the run's storage, records the exit (reason `peer_lost`) and ends
the machine. Clocks: cloud VMs keep NTP time (Amazon Time Sync, Google's metadata NTP), good to a second;
PEER_STALE is minutes.
"""

from __future__ import annotations

PEER_POLL_SECONDS = 30
PEER_STALE_SECONDS = 300


def peer_assignments(poll_seconds: int, stale_seconds: int) -> list[str]:
    return [f"PEER_POLL={max(int(poll_seconds), 1)}", f"PEER_STALE={max(int(stale_seconds), 1)}"]


# Shell functions (no user text; variables only inside double quotes). storage_file is boot_checkpoints'.
# Shell functions (no user text; variables only inside double quotes). storage_file is boot_checkpoints'.
PEER_FUNCTIONS = r"""group_broken() {
  # Tell the group this node is gone ($1: why, fixed words of this script): one object for every node to read.
  [ "${NNODES:-1}" -gt 1 ] && [ -n "$STORAGE_URL" ] || return 0
  printf '%s node %s: %s\n' "$(date +%s)" "$NODE_RANK_" "$1" >"$RUN_DIR/group-broken"
  storage_file "$RUN_DIR/group-broken" "$(run_storage)/group-broken" || true
}

run_storage() {
  # The run's storage prefix: this node's prefix without its `/node-<rank>`.
  printf '%s' "${STORAGE_URL%/node-"$NODE_RANK_"}"
}

peer_gone() {
  # Succeeds (saying why on stdout) when the group is broken: a node said so since this node booted, or a node
  # this one watches (every node for rank 0, rank 0 for the others) has been silent for PEER_STALE s.
  local stamp rank
  if storage_file "$(run_storage)/group-broken" "$RUN_DIR/.group"; then
    stamp=$(cut -d' ' -f1 "$RUN_DIR/.group" | tr -dc 0-9)
    if [ "${stamp:-0}" -ge "$BOOT_EPOCH" ]; then  # an earlier generation's marker is not this group's
      cut -d' ' -f2- "$RUN_DIR/.group" | tr -cd 'A-Za-z0-9 :_.-'
      return 0
    fi
  fi
  for rank in $(peers_watched); do
    storage_file "$(run_storage)/node-$rank/heartbeat" "$RUN_DIR/.peer" || continue
    stamp=$(tr -dc 0-9 <"$RUN_DIR/.peer")
    stamp=${stamp:-0}
    if [ "$stamp" -ge "$BOOT_EPOCH" ]; then
      : >"$RUN_DIR/.peer-$rank-seen"
    fi
    if [ -f "$RUN_DIR/.peer-$rank-seen" ] && [ "$(($(date +%s) - stamp))" -gt "$PEER_STALE" ]; then
      echo "node $rank has been silent for more than $PEER_STALE s"
      return 0
    fi
  done
  return 1
}

peers_watched() {
  local rank=1
  if [ "$NODE_RANK_" = 0 ]; then
    while [ "$rank" -lt "$NNODES" ]; do
      echo "$rank"
      rank=$((rank + 1))
    done
  else
    echo 0
  fi
}

peer_watch() {
  # Every PEER_POLL s: our heartbeat out, the group's state in; on a broken group, stop the job (it saves).
  local why
  while :; do
    date +%s >"$RUN_DIR/heartbeat"
    storage_file "$RUN_DIR/heartbeat" "$(run_storage)/node-$NODE_RANK_/heartbeat" || true
    if why=$(peer_gone); then
      printf '%s\n' "$why" >"$RUN_DIR/peer_lost"
      log "the group is broken ($why): stopping the job (it saves) and ending this node"
      stop_job
      return 0
    fi
    sleep "$PEER_POLL" &
    PEER_NAP=$!
    wait "$PEER_NAP"
  done
}
"""

# Started once the job runs (after job.pid is written), on multi-node runs with storage.
PEER_STEP = r"""PEER_WATCHER=
if [ "${NNODES:-1}" -gt 1 ] && [ -n "$STORAGE_URL" ]; then
  (
    trap 'kill "${PEER_NAP:-}" 2>/dev/null; exit 0' TERM
    peer_watch
  ) &
  PEER_WATCHER=$!
fi
"""
