"""The boot script's durable checkpoints and its interruption watch (part of gpuplan.jobs.bootstrap).

A cloud machine's boot disk dies with the machine (EC2 DeleteOnTermination, GCE autoDelete), so checkpoints the
job writes to `$GPUPLAN_CHECKPOINT_DIR` only survive an interruption when they are copied to the run's storage:
`CKPT_URL` (`<storage>/<run id>/checkpoints`: s3://, gs:// or a shared folder path). The script

- restores them into `$GPUPLAN_CHECKPOINT_DIR` before the job starts (every launch and relaunch), together with
  the node's earlier metrics, so the loss curve of a resumed run continues in one file;
- copies them there every `checkpoint.interval` while the job runs, once more after an interruption notice
  (when the job has saved and exited), and at the job's end;
- watches for the interruption notice (the cloud's `interruption_notice` hook, gpuplan.jobs.boot_cloud):
  on AWS the IMDSv2 item `spot/instance-action` (a session token first;
  404 until EC2 schedules the interruption, then `{"action": "terminate", "time": ...}` two minutes ahead; AWS
  recommends checking every 5 seconds: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html
  and https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html), on GCE
  the metadata value `instance/preempted` (`TRUE` once the VM is being preempted, read with the header
  `Metadata-Flavor: Google`; a Spot VM gets about 30 seconds:
  https://cloud.google.com/compute/docs/instances/spot#preemption-process and
  https://cloud.google.com/compute/docs/instances/create-use-preemptible#detecting_if_an_instance_was_preempted).
  On a notice it records `interruption.json` (shipped with the outputs), sends the job SIGTERM so it can save,
  and lets the normal end (sync, ship, exit record with reason `interrupted`) follow. The machine is *not*
  powered off then: the cloud's own interruption is what tells gpuplan's watch that the run was preempted and
  may be relaunched (a power-off would read as the machine shutting itself down). Only if the cloud has not
  taken the machine after NOTICE_LINGER seconds does the script power it off itself.

The copy tools: a folder path needs `cp`; an object URL goes through the cloud's `cloud_sync` / `cloud_get` /
`cloud_put` hooks (AWS: the AWS CLI on the Deep Learning AMIs; GCP: curl against the Cloud Storage JSON API,
gpuplan.providers.gcp.boot_gcs_sync).
"""

from __future__ import annotations

import shlex

NOTICE_POLL_SECONDS = 5  # the shortest interval a cloud recommends for its notice (AWS's instance-action: 5 s)
NOTICE_LINGER_SECONDS = 300  # after a notice: how long to wait for the cloud to take the machine
DEFAULT_SYNC_SECONDS = 600  # checkpoint copies without a checkpoint.interval in the spec


def checkpoint_assignments(checkpoint_url: str | None, sync_seconds: float | None, watch: str | None,
                           notice_poll_seconds: int = NOTICE_POLL_SECONDS) -> list[str]:
    """The script's variables for storage and the watch, every value shell-quoted. `watch`: the word the notice
    is recorded under (the cloud's `notice_source`), or None for no watch."""
    q = shlex.quote
    seconds = max(int(sync_seconds or DEFAULT_SYNC_SECONDS), 1)
    return [f"CKPT_URL={q((checkpoint_url or '').rstrip('/'))}", f"CKPT_SYNC_SECONDS={seconds}",
            f"INTERRUPTION_WATCH={q(watch or '')}", f"NOTICE_POLL={max(int(notice_poll_seconds), 1)}",
            f"NOTICE_LINGER={NOTICE_LINGER_SECONDS}"]


# Shell functions (defined with the others; refer to variables only inside double quotes; no user text).
CHECKPOINT_FUNCTIONS = r"""stop_job() {
  # SIGTERM to the job: a process job leads its own process group (started with setsid), so the signal reaches
  # the program `sh -c` started too, not only the shell. A container gets it through its runtime (`kill
  # --signal`: to its PID 1, the --init that forwards it), not through the client's sig-proxy, which drops a
  # signal that comes before its proxy is installed (containers/podman#16901); the client only when that fails.
  # The watchers that call this started before the runtime was chosen: the job's start wrote it to job.runtime.
  local pid runtime=
  [ -f "$RUN_DIR/job.runtime" ] && runtime=$(cat "$RUN_DIR/job.runtime")
  case "$runtime" in
    docker|podman)
      if "$runtime" kill --signal TERM "gpuplan-$RUN_ID-$NODE_RANK_" >/dev/null 2>&1; then
        return 0
      fi
      ;;
  esac
  [ -f "$RUN_DIR/job.pid" ] || return 0
  pid=$(cat "$RUN_DIR/job.pid")
  kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
}

host_checkpoint_dir() {
  # The checkpoint folder as this machine sees it: the job's view under @RUN_DIR@ (a container's mount of the run
  # folder, and the name a process job gets too) maps to the run folder here; another absolute path is itself.
  local dir=${GPUPLAN_CHECKPOINT_DIR:-}
  case "$dir" in
    '') ;;
    @RUN_DIR@) dir=$RUN_DIR ;;
    @RUN_DIR@/*) dir="$RUN_DIR/${dir#@RUN_DIR@/}" ;;
    /*) ;;
    *) dir="$RUN_DIR/$dir" ;;
  esac
  printf '%s' "$dir"
}

storage_copy() {
  # Copy folder $1 into folder $2 (one of them local, the other the run's storage), adding and replacing files.
  local from=$1 to=$2
  case "$from$to" in
    *://*) cloud_sync "$from" "$to" ;;  # the cloud's object storage
    *)
      [ -d "$from" ] || return 0
      mkdir -p "$to" && cp -Rp "$from/." "$to/"
      ;;
  esac
}

storage_file() {
  # One file to or from the run's storage ($1 -> $2); fails quietly when there is none.
  case "$1" in
    *://*) cloud_get "$1" "$2" ;;
    *)
      case "$2" in
        *://*) cloud_put "$1" "$2" >/dev/null 2>&1; return ;;
        *) ;;
      esac
      [ -f "$1" ] || return 1
      mkdir -p "$(dirname "$2")" && cp -p "$1" "$2.tmp" && mv -f "$2.tmp" "$2"
      ;;
  esac
}

metrics_copy() {
  # The node's metrics kept beside the checkpoints (`<run>/node-<rank>/metrics.jsonl`): a resumed run appends to
  # them, so its loss curve is one file across machines.
  printf '%s/node-%s/metrics.jsonl' "${CKPT_URL%/*}" "$NODE_RANK_"
}

checkpoint_push() {
  # The job's checkpoints to the run's storage (best effort: a failed copy never stops the job).
  [ -n "$CKPT_URL" ] && [ -n "${CKPT_DIR:-}" ] && [ -d "$CKPT_DIR" ] || return 0
  if [ -f "$RUN_DIR/metrics.jsonl" ]; then
    storage_file "$RUN_DIR/metrics.jsonl" "$(metrics_copy)" || true
  fi
  if storage_copy "$CKPT_DIR" "$CKPT_URL"; then
    log "checkpoints copied to the run's storage"
  else
    log "could not copy the checkpoints to the run's storage"
  fi
}

checkpoint_restore() {
  # Before the job starts: the run's checkpoints (from an earlier machine) and this node's metrics so far.
  [ -n "$CKPT_URL" ] && [ -n "${CKPT_DIR:-}" ] || return 0
  mkdir -p "$CKPT_DIR"
  if [ ! -s "$RUN_DIR/metrics.jsonl" ]; then
    storage_file "$(metrics_copy)" "$RUN_DIR/metrics.jsonl" || true
  fi
  if storage_copy "$CKPT_URL" "$CKPT_DIR"; then
    if [ -n "$(ls -A "$CKPT_DIR" 2>/dev/null)" ]; then
      log "restored checkpoints from the run's storage"
    fi
  else
    log "could not restore checkpoints from the run's storage (starting without them)"
  fi
}

fetch_code() {
  # The job's folder, packed at launch (gpuplan.jobs.code_bundle), unpacked into $BASE_DIR/code.
  local archive="$BASE_DIR/code.tar.gz"
  rm -rf "$BASE_DIR/code" && mkdir -p "$BASE_DIR/code" || return 1
  if ! storage_file "$CODE_URL" "$archive"; then
    log "no code in the run's storage: the command runs without it"
    return 1
  fi
  if ! tar -xzf "$archive" -C "$BASE_DIR/code" --no-same-owner; then
    log "cannot unpack the job's code"
    return 1
  fi
  log "unpacked the job's code"
}

on_interruption() {
  # Record the notice (the cloud's own words are JSON from its metadata server, kept apart as `notice`), ask the
  # job to save and stop, and leave the copy of its last checkpoint to the script's normal end.
  local notice=$1 action=unknown
  case "$notice" in
    *'"terminate"'*) action=terminate ;;
    *'"stop"'*) action=stop ;;
    *'"hibernate"'*) action=hibernate ;;
    *'"preempted"'*) action=preempted ;;
    *) ;;
  esac
  printf '{"cloud": "%s", "action": "%s", "noticed_at": "%s"}\n' "$INTERRUPTION_WATCH" "$action" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" >"$RUN_DIR/interruption.json.tmp"
  mv "$RUN_DIR/interruption.json.tmp" "$RUN_DIR/interruption.json"
  log "interruption notice from the cloud ($action): asking the job to save its checkpoint and stop"
  group_broken "interrupted by the cloud"  # a multi-node group ends with it (gpuplan.jobs.boot_peers)
  stop_job
  ship
  # A job that does not stop in time (it ignores SIGTERM, or saves slowly) still gets what it has saved copied
  # before the cloud takes the machine (NOTICE_BUDGET: how much of its notice the cloud's hooks leave the job).
  local pid waited=0 budget=60
  budget=${NOTICE_BUDGET:-60}  # how long the cloud's notice leaves the job to save (its hooks say)
  pid=$(cat "$RUN_DIR/job.pid" 2>/dev/null || true)
  while [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && [ "$waited" -lt "$budget" ]; do
    sleep 1
    waited=$((waited + 1))
  done
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    log "the job is still running $budget s after the notice: copying the checkpoints it has"
    checkpoint_push
  fi
}
"""

# The steps in the script's flow (after the shipper starts; before the job starts).
CHECKPOINT_STEP = r"""# --- checkpoints: restored before the job, copied every CKPT_SYNC_SECONDS; the notice watch
CKPT_DIR=$(host_checkpoint_dir)
checkpoint_restore
CKPT_SYNCER=
if [ -n "$CKPT_URL" ] && [ -n "$CKPT_DIR" ]; then
  (
    trap 'kill "${CKPT_NAP:-}" 2>/dev/null; exit 0' TERM
    while :; do
      sleep "$CKPT_SYNC_SECONDS" &
      CKPT_NAP=$!
      wait "$CKPT_NAP"
      checkpoint_push
    done
  ) &
  CKPT_SYNCER=$!
fi
NOTICE_WATCHER=
if [ -n "$INTERRUPTION_WATCH" ]; then
  (
    trap 'kill "${NOTICE_NAP:-}" 2>/dev/null; exit 0' TERM
    while :; do
      if NOTICE=$(interruption_notice); then
        on_interruption "$NOTICE"
        exit 0
      fi
      sleep "$NOTICE_POLL" &
      NOTICE_NAP=$!
      wait "$NOTICE_NAP"
    done
  ) &
  NOTICE_WATCHER=$!
fi
"""

# Before the job starts (the runtime is known): the code, and where the command starts in it. A relative (or no)
# workdir is inside the code: $BASE_DIR/code for a process, the mount /gpuplan/src in a container.
CODE_STEP = r"""# --- the job's code, packed at launch
CODE_MOUNT=()
if [ -n "$CODE_URL" ] && fetch_code; then
  case "$WORKDIR" in
    /*) ;;
    *)
      if [ "$RUNTIME" = process ]; then
        WORKDIR="$BASE_DIR/code${WORKDIR:+/$WORKDIR}"
      else
        WORKDIR="/gpuplan/src${WORKDIR:+/$WORKDIR}"
      fi
      ;;
  esac
  CODE_MOUNT=(-v "$BASE_DIR/code:/gpuplan/src")
fi
"""
