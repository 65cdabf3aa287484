"""Render the script a cloud machine runs at boot (AWS user-data, GCP startup-script, a Slurm batch body).

The script: checks the container runtime and the GPUs, exports the job's env, secrets and the multi-node
variables, runs the image with all GPUs (or the command as a process when there is no image), appends the job's
output to a log, ships the log and metrics to the run's storage every minute and at the end,
writes exit.json, and powers the machine off — at the end, and as a fail-safe at `max_hours` even if the job
hangs. Providers must create the machine so that a shutdown *terminates* it (AWS
InstanceInitiatedShutdownBehavior=terminate, GCP instanceTerminationAction=DELETE): power-off is what stops
the bill when gpuplan's own watch is not running.

Everything that comes from the user (name, image, command, workdir, env, secret values, storage URL) enters the
script only through `shlex.quote`, as one assignment per value; the rest of the script refers to those
variables inside double quotes, so no value is ever parsed as shell. Secret values are exported to the job's
environment and passed to the container by name (`-e NAME`), never echoed; the script never runs with `set -x`.

Everything the script says to a cloud is a hook the provider supplies (`cloud`, a gpuplan.jobs.boot_cloud.BootCloud:
providers/aws/boot.py, providers/gcp/boot.py): with a secret store the script carries only secret *names*
(`secret_params`: NAME -> the store's name) and reads each value at boot with `store_secret`, so the user data
(readable by anyone who may describe the instance) holds no secret. How a run's outcome gets back to gpuplan:
`storage_url` (a folder path, or an object URL the cloud's `cloud_put` copies to; one prefix per node) receives
job.log and metrics.jsonl every minute and exit.json at the end; `report_status` publishes the exit code and a
status where the provider reads them back (GCP guest attributes).

A node may learn its rank and the master's address from instance tags (AWS): gpuplan.jobs.boot_identity.

With the run's durable storage (`checkpoint_url`, `code_url`: gpuplan.jobs.storage) the script also unpacks the
job's code before the command, restores the checkpoints, copies them back every `checkpoint_sync_seconds` and at
the end, and watches the cloud's interruption notice (`interruption_watch`): gpuplan.jobs.boot_checkpoints. A
process job leads its own process group (setsid), so a stop or a notice reaches the program `sh -c` started.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuplan.jobs.boot_checkpoints import (
    CHECKPOINT_FUNCTIONS,
    CHECKPOINT_STEP,
    CODE_STEP,
    NOTICE_POLL_SECONDS,
    checkpoint_assignments,
)
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.jobs.boot_identity import (
    IDENTITY_FUNCTIONS,
    IDENTITY_POLL_SECONDS,
    IDENTITY_STEP,
    IDENTITY_WAIT_SECONDS,
    RANK_VARIABLES,
    identity_assignments,
)
from gpuplan.jobs.boot_node_ips import (
    NODE_IPS_FUNCTIONS,
    NODE_IPS_STEP,
    RESOLVE_WAIT_SECONDS,
    node_ips_assignments,
)
from gpuplan.jobs.boot_peers import (
    PEER_FUNCTIONS,
    PEER_POLL_SECONDS,
    PEER_STALE_SECONDS,
    PEER_STEP,
    peer_assignments,
)
from gpuplan.jobs.exec_form import exec_argv, forwarding_argv
from gpuplan.jobs.runner import CONTAINER_RUN_DIR, NodeLaunch, job_environment, refuse_options

SHIP_INTERVAL_SECONDS = 60
# The contract's names for rank 0's address: set once the script knows it (torchrun reads PET_MASTER_ADDR).
MASTER_VARIABLES = ("MASTER_ADDR", "GPUPLAN_MASTER_ADDR", "PET_MASTER_ADDR")
# Every node's address, rank 0 first (gpuplan.jobs.boot_node_ips): set once the script knows them.
NODE_IPS_VARIABLE = "GPUPLAN_NODE_IPS"


@dataclass(frozen=True)
class BootPlan:
    """What one machine's boot script needs. `secrets` holds values: never log or store a BootPlan."""

    run_id: str
    name: str
    argv: Sequence[str]
    image: str | None = None
    runtime: str = "auto"  # auto | docker | podman | process
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    node_rank: int = 0
    nnodes: int = 1
    nproc_per_node: int = 1
    master_addr: str | None = None  # None on rank 0: the script uses its own first address
    master_port: int = 29500
    gpus: int = 0
    max_hours: float | None = None
    # This node's storage prefix; with `rank_tag`, the run's prefix, to which the script adds `/node-<rank>`.
    storage_url: str | None = None
    checkpoint_dir: str | None = None
    base_dir: str = "/var/lib/gpuplan"
    poweroff: bool = True
    # The fail-safe counts from the machine's boot (where the cloud's bill starts) and leaves room to stop the
    # job and power off before max_hours; None: do so exactly when the script powers the machine off.
    count_from_boot: bool | None = None
    secret_params: Mapping[str, str] = field(default_factory=dict)  # NAME -> the name in the cloud's secret store
    # How this machine talks to its cloud (secrets, storage, status, interruption notice): the provider's hooks.
    cloud: BootCloud = field(default_factory=BootCloud)
    # Multi-node from one script (AWS): the instance tags holding this node's rank and rank 0's address
    # (both, or neither).
    rank_tag: str | None = None
    master_tag: str | None = None
    # Every node's address in rank order, for GPUPLAN_NODE_IPS (gpuplan.jobs.boot_node_ips): known before boot
    # (GCP's internal DNS names, Azure's NIC addresses: `node_addrs`), or read from an instance tag at boot (AWS:
    # `node_ips_tag`).
    node_addrs: Sequence[str] = ()
    node_ips_tag: str | None = None
    resolve_wait_seconds: int = RESOLVE_WAIT_SECONDS
    identity_wait_seconds: int = IDENTITY_WAIT_SECONDS
    identity_poll_seconds: int = IDENTITY_POLL_SECONDS
    # Durable checkpoints (gpuplan.jobs.boot_checkpoints): the run's checkpoint storage, how often to copy there,
    # and whether to watch for the cloud's interruption notice (the cloud's `interruption_notice` hook).
    checkpoint_url: str | None = None
    checkpoint_sync_seconds: float | None = None
    interruption_watch: bool = False
    notice_poll_seconds: int = NOTICE_POLL_SECONDS
    code_url: str | None = None  # the job's packed folder, unpacked before the command runs
    # Multi-node: how often a node checks its peers, and after how long a silent peer is gone (jobs.boot_peers).
    peer_poll_seconds: int = PEER_POLL_SECONDS
    peer_stale_seconds: int = PEER_STALE_SECONDS


def q(value: object) -> str:
    """Shell-quote anything for a bash script (the one way user values enter it)."""
    return shlex.quote(str(value))


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_COMMENT_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _assign(name: str, value: object) -> str:
    return f"{name}={q(value)}"


def _array(name: str, values: Sequence[str]) -> str:
    return f"{name}=({' '.join(q(v) for v in values)})" if values else f"{name}=()"


def render_boot_script(plan: BootPlan) -> str:
    """The complete bash script for one node of a run."""
    refuse_options(image=plan.image, workdir=plan.workdir)
    contract = job_environment(
        NodeLaunch(run_id=plan.run_id, name=plan.name, argv=list(plan.argv), run_dir=CONTAINER_RUN_DIR,
                   node_rank=plan.node_rank, nnodes=plan.nnodes, nproc_per_node=plan.nproc_per_node,
                   master_addr="", master_port=plan.master_port, checkpoint_dir=plan.checkpoint_dir),
        run_dir=CONTAINER_RUN_DIR,
    )
    # The master address may only be known on the machine itself (rank 0): filled in at boot, below.
    contract = {k: v for k, v in contract.items() if k not in (*MASTER_VARIABLES, NODE_IPS_VARIABLE)}
    user_env = {k: v for k, v in plan.env.items() if k not in contract}
    max_seconds = int(plan.max_hours * 3600) if plan.max_hours else ""
    by_reference = {k: v for k, v in plan.secret_params.items() if k not in plan.secrets}
    bad = [k for k in [*plan.secrets, *by_reference] if not _ENV_NAME.fullmatch(k)]
    if bad:
        raise ValueError(f"secret names must be environment variable names: {bad!r}")
    names = [*user_env, *contract, *MASTER_VARIABLES, NODE_IPS_VARIABLE, *plan.secrets, *by_reference]
    if bool(plan.rank_tag) != bool(plan.master_tag):
        raise ValueError("rank_tag and master_tag go together: a node needs both its rank and the master's address")
    from_tags = bool(plan.rank_tag)
    # With the rank from tags, the rank variables are exported once the script knows it (names stay in ENV_NAMES).
    rank_names = [k for k in RANK_VARIABLES if k in contract] if from_tags else []
    exported = {k: v for k, v in contract.items() if k not in rank_names}
    node = "(from instance tags)" if from_tags else str(plan.node_rank + 0)

    lines = [
        "#!/bin/bash",
        # A comment ends at a newline: only the run id's safe characters go here (RUN_ID below has all of it).
        f"# gpuplan boot script: run {_COMMENT_UNSAFE.sub('_', plan.run_id)}, node {node} of "
        f"{plan.nnodes + 0}.",
        "# Generated by gpuplan.jobs.bootstrap; every user-supplied value is a single shell-quoted assignment.",
        "# User values are single-quoted on purpose: nothing in them may expand.",
        "# shellcheck disable=SC2016",
        "set -uo pipefail",
        "umask 077",
        _assign("RUN_ID", plan.run_id),
        _assign("JOB_NAME", plan.name),
        _assign("BASE_DIR", plan.base_dir),
        _assign("IMAGE", plan.image or ""),
        _assign("RUNTIME_PREF", plan.runtime),
        _assign("WORKDIR", plan.workdir or ""),
        _assign("STORAGE_URL", plan.storage_url or ""),
        _assign("EXPECTED_GPUS", int(plan.gpus)),
        _assign("MAX_SECONDS", max_seconds),
        _assign("POWEROFF", 1 if plan.poweroff else 0),
        _assign("COUNT_FROM_BOOT", 1 if (plan.poweroff if plan.count_from_boot is None else plan.count_from_boot)
                else 0),
        _assign("NODE_RANK_", int(plan.node_rank)),
        _assign("MASTER_ADDR_", plan.master_addr or ""),
        # The command in exec form, and under the signal forwarder in a container (gpuplan.jobs.exec_form).
        _array("JOB_ARGV", exec_argv(plan.argv)),
        _array("CONTAINER_ARGV", forwarding_argv(exec_argv(plan.argv))),
        _array("ENV_NAMES", names),
        _array("SECRET_NAMES", list(by_reference)),
        _array("SECRET_PARAMS", list(by_reference.values())),
        *(_assign(k, v) for k, v in plan.cloud.assignments.items() if _ENV_NAME.fullmatch(k)),
        *checkpoint_assignments(plan.checkpoint_url, plan.checkpoint_sync_seconds,
                                plan.cloud.notice_source if plan.interruption_watch else None,
                                plan.notice_poll_seconds),
        _assign("CODE_URL", plan.code_url or ""),
        *peer_assignments(plan.peer_poll_seconds, plan.peer_stale_seconds),
        *node_ips_assignments(plan.node_addrs, plan.node_ips_tag, plan.resolve_wait_seconds),
        *(identity_assignments(plan.rank_tag, plan.master_tag, plan.identity_wait_seconds,
                               plan.identity_poll_seconds, rank_names) if from_tags else []),
        "",
        "# --- the job's environment (values quoted; secrets are exported, never printed)",
        *(f"export {_assign(k, v)}" for k, v in user_env.items()),
        *(f"export {_assign(k, v)}" for k, v in exported.items()),
        *(f"export {_assign(k, v)}" for k, v in plan.secrets.items()),
        "",
        _BODY.replace("@CLOUD_HOOKS@", plan.cloud.hooks()).replace("@CHECKPOINT_FUNCTIONS@\n", CHECKPOINT_FUNCTIONS)
        .replace("@CHECKPOINT_STEP@\n", CHECKPOINT_STEP)
        .replace("@CODE_STEP@\n", CODE_STEP)
        .replace("@SHIP_INTERVAL@", str(SHIP_INTERVAL_SECONDS)).replace("@RUN_DIR@", CONTAINER_RUN_DIR)
        .replace("@IDENTITY_FUNCTIONS@\n", IDENTITY_FUNCTIONS + "\n" if from_tags else "")
        .replace("@IDENTITY_STEP@", IDENTITY_STEP if from_tags else "")
        .replace("@PEER_FUNCTIONS@\n", PEER_FUNCTIONS).replace("@PEER_STEP@\n", PEER_STEP)
        .replace("@NODE_IPS_FUNCTIONS@\n", NODE_IPS_FUNCTIONS).replace("@NODE_IPS_STEP@\n", NODE_IPS_STEP),
    ]
    return "\n".join(lines).rstrip() + "\n"


def boot_plan_for(launch: NodeLaunch, *, secrets: Mapping[str, str], storage_url: str | None = None,
                  master_addr: str | None = None, poweroff: bool = True,
                  base_dir: str = "/var/lib/gpuplan", secret_params: Mapping[str, str] | None = None,
                  cloud: BootCloud | None = None, rank_tag: str | None = None, master_tag: str | None = None,
                  interruption_watch: bool = False, node_addrs: Sequence[str] = (),
                  node_ips_tag: str | None = None) -> BootPlan:
    """A BootPlan from the same NodeLaunch the local runner uses, so clouds and local share one contract."""
    return BootPlan(run_id=launch.run_id, name=launch.name, argv=list(launch.argv), image=launch.image,
                    runtime=launch.runtime, workdir=launch.workdir, env=dict(launch.env), secrets=dict(secrets),
                    node_rank=launch.node_rank, nnodes=launch.nnodes, nproc_per_node=launch.nproc_per_node,
                    master_addr=master_addr, master_port=launch.master_port, gpus=launch.gpus,
                    max_hours=launch.max_hours, storage_url=storage_url, checkpoint_dir=launch.checkpoint_dir,
                    poweroff=poweroff, base_dir=base_dir, secret_params=dict(secret_params or {}),
                    cloud=cloud or BootCloud(), rank_tag=rank_tag, master_tag=master_tag,
                    checkpoint_url=launch.checkpoint_url, checkpoint_sync_seconds=launch.checkpoint_sync_seconds,
                    interruption_watch=interruption_watch, code_url=launch.code_url,
                    node_addrs=tuple(node_addrs), node_ips_tag=node_ips_tag)


# The fixed part: refers to the variables above only inside double quotes; contains no user text.
_BODY = r"""BOOT_EPOCH=$(date +%s)
RUN_DIR="$BASE_DIR/run"
LOG="$RUN_DIR/job.log"
mkdir -p "$RUN_DIR"
exec >>"$BASE_DIR/boot.log" 2>&1

log() {
  printf '[gpuplan %s] %s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$*" >>"$LOG"
}

ship() {
  # Copy the log, metrics and exit record to this node's prefix of the run's storage (best effort: a failed
  # copy never stops the job). The exit record goes last, so a reader that sees it also sees the final log.
  local f
  [ -n "$STORAGE_URL" ] || return 0
  for f in job.log metrics.jsonl interruption.json exit.json; do
    [ -f "$RUN_DIR/$f" ] || continue
    case "$STORAGE_URL" in
      /*)  # a shared folder (Slurm, local): replaced whole, so a reader never sees half a file
        { mkdir -p "$STORAGE_URL" && cp -p "$RUN_DIR/$f" "${STORAGE_URL%/}/.$f.tmp" \
          && mv -f "${STORAGE_URL%/}/.$f.tmp" "${STORAGE_URL%/}/$f"; } || true
        ;;
      *) cloud_put "$RUN_DIR/$f" "${STORAGE_URL%/}/$f" || true ;;  # the cloud's object storage
    esac
  done
}

@CLOUD_HOOKS@
@IDENTITY_FUNCTIONS@
@CHECKPOINT_FUNCTIONS@
@PEER_FUNCTIONS@
@NODE_IPS_FUNCTIONS@
fetch_secrets() {
  # Secret values live in the cloud's secret store; the script only knows their names (the cloud's
  # `store_secret` reads one). Values are exported to the job's environment, never printed or written.
  local i name value
  for i in "${!SECRET_NAMES[@]}"; do
    name=${SECRET_NAMES[$i]}
    if ! value=$(store_secret "${SECRET_PARAMS[$i]}"); then
      log "cannot read the secret $name from the cloud's secret store"
      return 1
    fi
    # store_secret ends the value with a guard character, so trailing newlines of the value survive $(...).
    export "$name=${value%x}"
  done
}

power_off() {
  # $1: `max_hours` when the fail-safe fired. machine_end: the cloud's hook (power off, or its own end).
  ship
  if [ "$POWEROFF" = 1 ]; then
    log "ending the machine"
    machine_end "${1:-}"
  else
    log "would power off now (power-off disabled)"
  fi
}

record_exit() {
  # The exit record (reasons are fixed words of this script, never user text), then the cloud's status report.
  local code=$1 reason=$2 status=failed
  printf '{"exit_code": %d, "ended_at": "%s", "reason": "%s"}\n' "$code" \
    "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$reason" >"$RUN_DIR/exit.json.tmp"
  mv "$RUN_DIR/exit.json.tmp" "$RUN_DIR/exit.json"
  if [ "$code" = 0 ] && [ -z "$reason" ]; then
    status=succeeded
  fi
  report_status reason "$reason"
  report_status exit_code "$code"
  report_status status "$status"
}

finish() {
  local code=$1 reason=$2
  # The periodic shipper must not outlive the job (where power_off is off, nothing else would end it).
  local helper
  for helper in "${SHIPPER:-}" "${CKPT_SYNCER:-}" "${NOTICE_WATCHER:-}" "${PEER_WATCHER:-}"; do
    [ -n "$helper" ] && kill "$helper" 2>/dev/null
  done
  checkpoint_push
  if [ "$code" != 0 ] || [ -n "$reason" ]; then group_broken "${reason:-exit code $code}"; fi  # boot_peers
  record_exit "$code" "$reason"
  log "job ended with exit code $code${reason:+ ($reason)}"
  if [ "$reason" = interrupted ] && [ "$POWEROFF" = 1 ]; then
    # The cloud takes the machine (that is what marks the run preempted): power off only if it does not.
    ship
    log "waiting up to $NOTICE_LINGER s for the cloud to interrupt the machine"
    sleep "$NOTICE_LINGER"
  fi
  power_off
  exit "$code"
}

@IDENTITY_STEP@log "boot script for run $RUN_ID (job $JOB_NAME), node $NODE_RANK_"
report_status status running
if ! fetch_secrets; then
  finish 4 "cannot read secrets"
fi

# --- fail-safe: at max_hours stop the job and power off, even if the job (or an image pull) hangs.
# On a cloud machine the bill runs from its boot, not from this script, and stopping takes up to STOP_GRACE s
# more plus the shutdown: so the timer counts from the boot (/proc/uptime) and stops the job early enough for
# the machine to be off by max_hours (gpuplan makes max_hours the tightest of the run's caps, budgets included).
WATCHDOG=
STOP_GRACE=30
SHUTDOWN_ALLOWANCE=15
if [ -n "$MAX_SECONDS" ]; then
  NAP_SECONDS=$MAX_SECONDS
  if [ "$COUNT_FROM_BOOT" = 1 ]; then
    UP_SECONDS=$(cut -d. -f1 /proc/uptime 2>/dev/null || true)
    case "$UP_SECONDS" in ''|*[!0-9]*) UP_SECONDS=0 ;; esac
    NAP_SECONDS=$((MAX_SECONDS - UP_SECONDS - STOP_GRACE - SHUTDOWN_ALLOWANCE))
    if [ "$NAP_SECONDS" -lt 0 ]; then
      NAP_SECONDS=0
    fi
    log "fail-safe: the machine booted $UP_SECONDS s ago; the job is stopped in $NAP_SECONDS s" \
      "so the machine is off by max_hours ($MAX_SECONDS s)"
  fi
  (
    trap 'kill "$NAP" 2>/dev/null; exit 0' TERM
    sleep "$NAP_SECONDS" &
    NAP=$!
    wait "$NAP"
    log "max_hours reached (fail-safe of $MAX_SECONDS s): stopping the job"
    : >"$RUN_DIR/max_hours_reached"
    stop_job
    sleep "$STOP_GRACE" &
    NAP=$!
    wait "$NAP"
    if [ ! -f "$RUN_DIR/exit.json" ]; then
      record_exit 124 max_hours
    fi
    power_off max_hours
  ) &
  WATCHDOG=$!
fi

# --- ship the log and metrics while the job runs
SHIPPER=
if [ -n "$STORAGE_URL" ]; then
  (
    trap 'kill "${SHIP_NAP:-}" 2>/dev/null; exit 0' TERM
    while :; do
      sleep @SHIP_INTERVAL@ &
      SHIP_NAP=$!
      wait "$SHIP_NAP"
      ship
    done
  ) &
  SHIPPER=$!
fi

@CHECKPOINT_STEP@
# --- the master address: given, or this machine's own first address on rank 0
if [ -z "$MASTER_ADDR_" ]; then
  if [ "$NODE_RANK_" = 0 ]; then
    MASTER_ADDR_=$(hostname -I 2>/dev/null | awk '{print $1}')
  fi
  MASTER_ADDR_=${MASTER_ADDR_:-127.0.0.1}
fi
export MASTER_ADDR="$MASTER_ADDR_" GPUPLAN_MASTER_ADDR="$MASTER_ADDR_" PET_MASTER_ADDR="$MASTER_ADDR_"
@NODE_IPS_STEP@

# --- the container runtime
RUNTIME=process
if [ -n "$IMAGE" ] && [ "$RUNTIME_PREF" != process ]; then
  for candidate in docker podman; do
    if [ "$RUNTIME_PREF" != auto ] && [ "$RUNTIME_PREF" != "$candidate" ]; then
      continue
    fi
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" info >/dev/null 2>&1; then
      RUNTIME=$candidate
      break
    fi
  done
  if [ "$RUNTIME" = process ]; then
    log "no working container runtime (wanted $RUNTIME_PREF) for image $IMAGE"
    finish 127 "no container runtime"
  fi
fi
log "runtime: $RUNTIME"

# --- the GPUs
if [ "$EXPECTED_GPUS" -gt 0 ]; then
  FOUND_GPUS=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
  if [ "${FOUND_GPUS:-0}" -lt "$EXPECTED_GPUS" ]; then
    log "expected $EXPECTED_GPUS GPUs, found ${FOUND_GPUS:-0}"
    finish 3 "missing GPUs"
  fi
  log "GPUs: $FOUND_GPUS"
fi

@CODE_STEP@
# --- run the job
if [ "$RUNTIME" = process ]; then
  if [ -n "$WORKDIR" ]; then
    if ! mkdir -p "$WORKDIR" || ! cd "$WORKDIR"; then
      finish 126 "cannot enter workdir"
    fi
  fi
  if [ -n "$CKPT_DIR" ]; then
    # A process sees the machine's own folders: the run folder's checkpoints are under $RUN_DIR, not @RUN_DIR@.
    export GPUPLAN_CHECKPOINT_DIR="$CKPT_DIR"
  fi
  # Its own process group (setsid execs in place: the pid stays the job's), so a stop reaches all of it.
  GPUPLAN_RUN_DIR="$RUN_DIR" GPUPLAN_METRICS="$RUN_DIR/metrics.jsonl" setsid "${JOB_ARGV[@]}" >>"$LOG" 2>&1 &
else
  # --init: PID 1 is an init that forwards the stop to the job (gpuplan.jobs.exec_form, with the docs).
  RUN_ARGS=(run --rm --init --name "gpuplan-$RUN_ID-$NODE_RANK_" --network host --ipc host -v "$RUN_DIR:@RUN_DIR@"
    "${CODE_MOUNT[@]}")
  if [ -n "$WORKDIR" ]; then
    RUN_ARGS+=(-w "$WORKDIR")
  fi
  if [ "$EXPECTED_GPUS" -gt 0 ]; then
    if [ "$RUNTIME" = docker ]; then RUN_ARGS+=(--gpus all); else RUN_ARGS+=(--device nvidia.com/gpu=all); fi
  fi
  # The machine's fabric (a hook: its devices and limits, one argument a line); none on most machines.
  while IFS= read -r arg; do
    RUN_ARGS+=("$arg")
  done < <(fabric_run_args)
  for name in "${ENV_NAMES[@]}"; do
    RUN_ARGS+=(-e "$name")
  done
  if ! "$RUNTIME" image inspect "$IMAGE" >/dev/null 2>&1; then
    "$RUNTIME" pull "$IMAGE" >>"$LOG" 2>&1 || finish 125 "cannot pull the image"
  fi
  fabric_note "$RUNTIME" "$IMAGE" >>"$LOG" 2>&1 || true
  # Not detached: the client follows the container to its end; a stop goes to the container through the runtime
  # (stop_job reads job.runtime), the client's sig-proxy only as the fallback.
  printf '%s' "$RUNTIME" >"$RUN_DIR/job.runtime"
  "$RUNTIME" "${RUN_ARGS[@]}" "$IMAGE" "${CONTAINER_ARGV[@]}" >>"$LOG" 2>&1 &
fi
JOB_PID=$!
echo "$JOB_PID" >"$RUN_DIR/job.pid"
@PEER_STEP@
wait "$JOB_PID"
CODE=$?
REASON=
if [ -f "$RUN_DIR/max_hours_reached" ]; then
  REASON=max_hours
elif [ -f "$RUN_DIR/interruption.json" ]; then
  REASON=interrupted
elif [ -f "$RUN_DIR/peer_lost" ]; then
  REASON=peer_lost  # a node of the group is gone (jobs.boot_peers): status/watch relaunches the group
fi
if [ -n "$WATCHDOG" ]; then
  kill "$WATCHDOG" 2>/dev/null || true
fi
finish "$CODE" "$REASON"
"""
