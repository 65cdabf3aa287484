"""Multi-node: every node watches its peers and ends the job and itself when the group is broken (part of the boot
script, gpuplan.jobs.bootstrap).

Why: a data-parallel job cannot go on without one of its nodes, but the survivors do not know it — they block in a
collective or a rendezvous until a timeout, max_hours, or for ever — and keep billing. With `--detach` no gpuplan
is watching to end them. So each node ends itself once the group is broken; `gpuplan status`/`watch` then finds one
machine preempted and relaunches the whole group from the last checkpoint (gpuplan.supervise.relaunch).

How: through the run's storage, which every node already writes (no cloud API permission beyond it, no port
between nodes to open). Each node writes `heartbeat` (its clock, epoch seconds) to its own prefix
`<run>/node-<rank>/` every PEER_POLL seconds and reads its peers': a peer is gone when its prefix holds an
`interruption.json` (the cloud's notice: AWS's two minutes, GCE's thirty seconds) or an `exit.json` written after
this node booted, or when its heartbeat, once seen, is older than PEER_STALE seconds (a machine lost without
notice). The node then records `peer_lost`, sends the job SIGTERM so it saves, and the script's normal end copies
the checkpoints to the run's storage, records the exit (reason `peer_lost`) and powers the machine off.
Clocks: cloud VMs keep NTP time (Amazon Time Sync, Google's metadata NTP), so comparing a peer's stamp with ours is
good to a second; PEER_STALE is minutes.
"""

from __future__ import annotations

PEER_POLL_SECONDS = 30
PEER_STALE_SECONDS = 300


def peer_assignments(poll_seconds: int, stale_seconds: int) -> list[str]:
    return [f"PEER_POLL={max(int(poll_seconds), 1)}", f"PEER_STALE={max(int(stale_seconds), 1)}"]


# Shell functions (no user text; variables only inside double quotes). storage_file is boot_checkpoints'.
PEER_FUNCTIONS = r"""peer_gone() {
  # Succeeds (and says why on stdout) when node $1 of the run has ended, been interrupted, or gone silent.
  local prefix="${RUN_STORAGE%/}/node-$1" stamp when
  if storage_file "$prefix/interruption.json" "$RUN_DIR/.peer-$1"; then
    echo "node $1 was interrupted by the cloud"
    return 0
  fi
  if storage_file "$prefix/exit.json" "$RUN_DIR/.peer-$1"; then
    stamp=$(sed -n 's/.*"ended_at": *"\([^"]*\)".*/\1/p' "$RUN_DIR/.peer-$1")
    when=$(date -u -d "$stamp" +%s 2>/dev/null || echo 0)
    if [ "$when" -ge "$BOOT_EPOCH" ]; then  # an earlier generation's record is not this group's
      echo "node $1 ended"
      return 0
    fi
  fi
  if storage_file "$prefix/heartbeat" "$RUN_DIR/.peer-$1"; then
    stamp=$(tr -dc 0-9 <"$RUN_DIR/.peer-$1")
    stamp=${stamp:-0}
    if [ "$stamp" -ge "$BOOT_EPOCH" ]; then
      : >"$RUN_DIR/.peer-$1-seen"
    fi
    if [ -f "$RUN_DIR/.peer-$1-seen" ] && [ "$(($(date +%s) - stamp))" -gt "$PEER_STALE" ]; then
      echo "node $1 has been silent for more than $PEER_STALE s"
      return 0
    fi
  fi
  return 1
}

peer_watch() {
  # Every PEER_POLL s: our heartbeat out, our peers' state in; on a broken group, stop the job (it saves).
  local rank why
  while :; do
    date +%s >"$RUN_DIR/heartbeat"
    storage_file "$RUN_DIR/heartbeat" "${RUN_STORAGE%/}/node-$NODE_RANK_/heartbeat" || true
    rank=0
    while [ "$rank" -lt "$NNODES" ]; do
      if [ "$rank" != "$NODE_RANK_" ] && why=$(peer_gone "$rank"); then
        printf '%s\n' "$why" >"$RUN_DIR/peer_lost"
        log "$why: the group cannot go on; stopping the job (it saves) and ending this node"
        stop_job
        return 0
      fi
      rank=$((rank + 1))
    done
    sleep "$PEER_POLL" &
    PEER_NAP=$!
    wait "$PEER_NAP"
  done
}
"""

# Started once the job runs (after job.pid is written), on multi-node runs with storage.
PEER_STEP = r"""PEER_WATCHER=
if [ "${NNODES:-1}" -gt 1 ] && [ -n "$STORAGE_URL" ]; then
  RUN_STORAGE=${STORAGE_URL%/node-"$NODE_RANK_"}
  (
    trap 'kill "${PEER_NAP:-}" 2>/dev/null; exit 0' TERM
    peer_watch
  ) &
  PEER_WATCHER=$!
fi
"""
