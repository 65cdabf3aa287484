"""Run one node of a job on this machine — in a container (podman or docker) or as a plain process — and record
how it ended.

`python -m gpuplan.jobs.runner NODE_DIR` is the small wrapper the local provider starts detached (a new session),
so the job outlives the CLI that launched it. It reads NODE_DIR/launch.json (written by the provider; it holds
no secret values: those arrive in this process's environment and are handed on by name), runs the job with its
output appended to NODE_DIR/job.log, and writes NODE_DIR/exit.json (exit code, end time, reason) atomically
when the job ends. `gpuplan status` reads that file, so it tells the truth even if the CLI was killed.

Both ways of running get the same environment contract (see `job_environment`): GPUPLAN_RUN_ID,
GPUPLAN_RUN_DIR, GPUPLAN_METRICS, GPUPLAN_NODE_RANK/NNODES/NPROC_PER_NODE/MASTER_ADDR/MASTER_PORT and the
torchrun names MASTER_ADDR, MASTER_PORT, NODE_RANK, NNODES, NPROC_PER_NODE, torchrun's own PET_NNODES,
PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT, PET_NPROC_PER_NODE (TORCHRUN_VARIABLES), plus RANK, WORLD_SIZE
and LOCAL_RANK when each node runs one process, so `init_process_group("gloo")` works without torchrun.

The wrapper also enforces `max_hours` on its own, like the power-off timer of a cloud boot script: a fail-safe
that holds even when no gpuplan process is watching. Launch sets it to the tightest of the run's caps, not just
the spec's max_hours (gpuplan.launching.failsafe); the exit record's reason stays `max_hours` (the timer fired).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gpuplan.jobs import containment as contained
from gpuplan.jobs.exec_form import exec_argv, forwarding_argv
from gpuplan.jobs.failure_cause import OomWatch, failure_cause
from gpuplan.jobs.gpu_devices import gpu_run_args
from gpuplan.jobs.job_group import die_with_parent, kill_rest
from gpuplan.jobs.local_sync import CheckpointSync, is_folder
from gpuplan.jobs.processes import signal_group
from gpuplan.paths import make_private_dir

LAUNCH_FILE = "launch.json"
EXIT_FILE = "exit.json"
PID_FILE = "wrapper.pid"
LOG_FILE = "job.log"
CONTAINER_RUN_DIR = "/gpuplan/run"
STOP_GRACE_SECONDS = 10.0
BILLED_FROM_FILE = "started_at"  # the local provider's STARTED_FILE: the node is billed from this time
STOPPING_FILE = "stopping"


def failsafe_deadlines(started: float, hours: float) -> tuple[float, float]:
    """(SIGTERM at, SIGKILL at), as epoch seconds, for a node billed from `started` that may run `hours`.

    The kill lands just before the cap (a twentieth of it, at most two seconds: the time a busy machine takes
    to schedule the killer and reap the job), so the last process is gone by then; the stop begins one grace
    period earlier (at most a tenth of the time). The wrapper's own timer and the independent watchdog
    (gpuplan.jobs.watchdog) use the same two instants."""
    total = hours * 3600
    kill_at = started + total - min(2.0, total / 20)
    grace = min(STOP_GRACE_SECONDS, total / 10)
    return kill_at - grace, kill_at


@dataclass(frozen=True)
class NodeLaunch:
    """What the wrapper needs to run one node. Written to launch.json: never put a secret value in here."""

    run_id: str
    name: str
    argv: list[str]
    run_dir: str
    node_rank: int = 0
    nnodes: int = 1
    nproc_per_node: int = 1
    master_addr: str = "127.0.0.1"
    master_port: int = 29500
    runtime: str = "process"  # process | podman | docker | auto
    image: str | None = None
    workdir: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    secret_names: list[str] = field(default_factory=list)
    gpus: int = 0
    max_hours: float | None = None
    checkpoint_dir: str | None = None
    source_dir: str | None = None
    # The run's durable checkpoint storage (gpuplan.jobs.storage) and how often to copy there, in seconds.
    checkpoint_url: str | None = None
    checkpoint_sync_seconds: float | None = None
    code_url: str | None = None  # the job's folder packed in the run's storage (gpuplan.jobs.code_bundle)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2)

    @classmethod
    def from_json(cls, text: str) -> NodeLaunch:
        return cls(**json.loads(text))


# torchrun reads its options from the environment only under PET_<OPTION> (torch/distributed/argparse_util.py, the
# `env` action: "Get argument values from PET_{dest} before defaulting to the given default value"; torch/distributed/
# run.py declares --nnodes, --node-rank, --master-addr, --master-port and --nproc-per-node with it;
# https://pytorch.org/docs/stable/elastic/run.html). Without them a bare `torchrun --nnodes 2 train.py` makes every
# node rank 0 of a rendezvous on 127.0.0.1 and hangs. The plain names stay for `init_process_group("env://")`.
TORCHRUN_VARIABLES = ("PET_NNODES", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT", "PET_NPROC_PER_NODE")


def torchrun_variables(nnodes: int, node_rank: int, master_addr: str, master_port: int,
                       nproc_per_node: int) -> dict[str, str]:
    """torchrun's own environment variables for one node (see TORCHRUN_VARIABLES)."""
    return dict(zip(TORCHRUN_VARIABLES, (str(nnodes), str(node_rank), master_addr, str(master_port),
                                         str(nproc_per_node)), strict=True))


def job_environment(launch: NodeLaunch, *, run_dir: str) -> dict[str, str]:
    """The variables every job sees, whatever runs it. `run_dir` is the run folder as the job sees it."""
    world = launch.nnodes * max(launch.nproc_per_node, 1)
    env = {
        "GPUPLAN_RUN_ID": launch.run_id,
        "GPUPLAN_JOB_NAME": launch.name,
        "GPUPLAN_RUN_DIR": run_dir,
        "GPUPLAN_METRICS": f"{run_dir}/metrics.jsonl",
        "GPUPLAN_NODE_RANK": str(launch.node_rank),
        "GPUPLAN_NNODES": str(launch.nnodes),
        "GPUPLAN_NPROC_PER_NODE": str(launch.nproc_per_node),
        "GPUPLAN_MASTER_ADDR": launch.master_addr,
        "GPUPLAN_MASTER_PORT": str(launch.master_port),
        "GPUPLAN_WORLD_SIZE": str(world),
        "MASTER_ADDR": launch.master_addr,
        "MASTER_PORT": str(launch.master_port),
        "NODE_RANK": str(launch.node_rank),
        "NNODES": str(launch.nnodes),
        "NPROC_PER_NODE": str(launch.nproc_per_node),
        **torchrun_variables(launch.nnodes, launch.node_rank, launch.master_addr, launch.master_port,
                             launch.nproc_per_node),
    }
    if launch.master_addr in ("127.0.0.1", "localhost", "::1"):
        # Every node on this machine: the address list SkyPilot/dstack scripts read (one a line, rank 0 first)
        env["GPUPLAN_NODE_IPS"] = "\n".join([launch.master_addr] * max(launch.nnodes, 1))
    if launch.nproc_per_node <= 1:
        # One process per node: it *is* the global rank, so plain `init_process_group` works without torchrun.
        env.update({"RANK": str(launch.node_rank), "WORLD_SIZE": str(world), "LOCAL_RANK": "0"})
    if launch.checkpoint_dir:
        # A relative checkpoint dir lives in the run folder, which outlives the job (and is shipped on clouds).
        ckpt = launch.checkpoint_dir
        env["GPUPLAN_CHECKPOINT_DIR"] = ckpt if ckpt.startswith("/") else f"{run_dir.rstrip('/')}/{ckpt}"
    return env


# ------------------------------------------------------------------------------------------- runtimes


def resolve_runtime(requested: str, image: str | None) -> str:
    """Pick how to run: `process` when asked or when there is no image; else podman, else docker. An image with
    no working runtime is a RuntimeError naming what was tried: an image job never runs on the host."""
    from gpuplan.jobs.container_runtime import find_runtime, no_runtime_message

    if requested == "process" or not image:
        return "process"
    choice = find_runtime(requested)
    if choice.runtime is not None:
        return choice.runtime
    if requested in ("podman", "docker"):
        raise RuntimeError(f"runtime {requested} was requested but does not work on this machine "
                           f"({choice.probes[0].detail})")
    raise RuntimeError(no_runtime_message(image, choice))


def container_name(launch: NodeLaunch) -> str:
    return f"gpuplan-{launch.run_id}-{launch.node_rank}"


def refuse_options(**values: str | None) -> None:
    """Raise ValueError when a value that lands on a command line by position (image, workdir) starts with `-`.

    Quoting keeps such a value one word, but `podman run ... --privileged` would still read it as an option;
    job specs refuse these already (jobs/spec.py), this guards the renderers used without a spec.
    """
    for what, value in values.items():
        if value and value.startswith("-"):
            raise ValueError(f"{what} {value!r} starts with '-': it would be read as an option")


def container_argv(launch: NodeLaunch, runtime: str, env: Mapping[str, str]) -> list[str]:
    """`podman run ...` / `docker run ...` for this node. Values of `env` go on the command line; secrets are
    passed as bare `-e NAME`, so the runtime copies them from its own environment and no value shows in `ps`."""
    assert launch.image
    refuse_options(image=launch.image, workdir=launch.workdir)
    # --init: an init is PID 1 and forwards the stop to the job (gpuplan.jobs.exec_form says why and cites the docs).
    argv = [runtime, "run", "--rm", "--init", "--name", container_name(launch), "--network", "host",
            "--label", f"gpuplan.run-id={launch.run_id}",
            "-v", f"{launch.run_dir}:{CONTAINER_RUN_DIR}"]
    if launch.source_dir:
        argv += ["-v", f"{launch.source_dir}:/gpuplan/src:ro"]
    if launch.workdir:
        argv += ["-w", launch.workdir]
    argv += gpu_run_args(runtime, launch.gpus)
    for key, value in env.items():
        argv += ["-e", f"{key}={value}"]
    for key in launch.secret_names:
        argv += ["-e", key]
    return [*argv, launch.image, *forwarding_argv(exec_argv(launch.argv))]


def process_environment(launch: NodeLaunch, base: Mapping[str, str]) -> dict[str, str]:
    """Environment of a plain-process job: ours (secrets included), the spec's env, then the contract.

    The interpreter that runs gpuplan comes first on PATH, so `python train.py` in a spec uses the environment
    gpuplan is installed in (and can import gpuplan.jobs.metrics).
    """
    env = dict(base)
    env.update(launch.env)
    env.update(job_environment(launch, run_dir=launch.run_dir))
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", os.defpath)])
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def process_workdir(launch: NodeLaunch) -> str:
    """Where a plain-process job starts: `workdir` (relative to the spec's folder), else the spec's folder, so
    `command: python train.py` next to the spec works as it does in a shell there."""
    base = launch.source_dir or launch.run_dir
    if launch.workdir:
        return str(Path(base) / launch.workdir)
    return base


# ------------------------------------------------------------------------------------------- the wrapper


def _leads_group() -> bool:
    """This process leads its own process group, so the group is the job's alone: true for the detached wrapper
    (the local provider starts it in a new session), false when NodeRunner runs inside another program, whose
    group holds processes that are not the job's and must never be signalled."""
    return os.getpgrp() == os.getpid()


def _billed_from(node_dir: Path) -> dt.datetime | None:
    """The node's billed start, written by the local provider before it started this wrapper (its `started_at`)."""
    try:
        value = dt.datetime.fromisoformat((node_dir / BILLED_FROM_FILE).read_text().strip())
    except (OSError, ValueError):
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def write_atomic(path: Path, text: str) -> None:
    """Write via a temporary file and rename, so a reader never sees half a file; the file is private (0600,
    whatever the umask: run folders hold what the job printed and the spec's environment)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def record_stop(node_dir: Path, detail: str, signum: int = signal.SIGTERM) -> None:
    """Record that gpuplan stopped a node whose wrapper could not say so itself: exit.json with reason `stopped`,
    so the node reads as stopped (not failed) and a wrapper starting after this runs no job."""
    write_atomic(node_dir / EXIT_FILE, json.dumps(
        {"exit_code": -int(signum), "ended_at": _now(), "reason": "stopped", "detail": detail}))


def stop_before_start(node_dir: Path) -> None:
    """Record a stop for a node whose wrapper has not written its pid (never started, or starting)."""
    record_stop(node_dir, "stopped before its job started")


def read_exit(node_dir: Path) -> dict[str, Any] | None:
    """The recorded end of a node (exit_code, ended_at, reason), or None while it has not ended."""
    try:
        recorded = json.loads((node_dir / EXIT_FILE).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return recorded if isinstance(recorded, dict) else None  # the wrapper writes an object; anything else is no end


class NodeRunner:
    """Runs one node's job to completion, forwarding a stop and enforcing max_hours."""

    def __init__(self, node_dir: Path, launch: NodeLaunch) -> None:
        self.node_dir = node_dir
        self.launch = launch
        self.reason: str | None = None
        self.child: subprocess.Popen[bytes] | None = None
        self.runtime = "process"
        self._stopping = threading.Event()
        self.output_from = 0
        self.oom: OomWatch | None = None
        self.containment: contained.Containment | None = None

    def _enter(self) -> None:
        """`preexec_fn` of the job's first process: die with the wrapper, and be born into the node's cgroup
        (gpuplan.jobs.containment), which everything it starts inherits."""
        die_with_parent()
        if self.containment is not None:
            contained.enter(self.containment)

    def log(self, message: str) -> None:
        with open(self.node_dir / LOG_FILE, "a") as fh:
            fh.write(f"[gpuplan {_now()}] {message}\n")

    def start(self) -> subprocess.Popen[bytes]:
        launch = self.launch
        try:
            self.runtime = resolve_runtime(launch.runtime, launch.image)
        except RuntimeError as exc:
            self.log(str(exc))
            raise
        make_private_dir(launch.run_dir)
        log = open(self.node_dir / LOG_FILE, "ab")  # noqa: SIM115 - handed to the child, closed in run()
        if self.runtime == "process":
            argv = exec_argv(launch.argv)  # the program itself gets the stop (gpuplan.jobs.exec_form)
            env = process_environment(launch, os.environ)
            cwd = process_workdir(launch)
        else:
            contract = {**launch.env, **job_environment(launch, run_dir=CONTAINER_RUN_DIR)}
            argv = container_argv(launch, self.runtime, contract)
            env = dict(os.environ)
            cwd = launch.run_dir
        if self.runtime == "podman" and launch.gpus:
            from gpuplan.jobs.gpu_devices import ensure_cdi_spec

            self.log(ensure_cdi_spec().note)  # podman's --device nvidia.com/gpu=all needs a CDI spec
        self.log(f"node {launch.node_rank} of {launch.nnodes} starting ({self.runtime})")
        self.output_from = (self.node_dir / LOG_FILE).stat().st_size  # what the job and its runtime print next
        self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                      env=env, cwd=cwd, preexec_fn=self._enter)
        self.oom = OomWatch.start(self.child.pid)
        log.close()
        write_atomic(self.node_dir / "job.pid", str(self.child.pid))
        return self.child

    def stop(self, reason: str, grace: float = STOP_GRACE_SECONDS) -> None:
        """Ask the job to end (SIGTERM to it and every process it started; the container runtime forwards it),
        then force it after `grace` seconds."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        self.reason = reason
        self.log(f"stopping: {reason}")
        write_atomic(self.node_dir / STOPPING_FILE, reason)  # the watchdog's sign that the wrapper is at it
        threading.Thread(target=self._force_after_grace, args=(grace,), daemon=True).start()
        if self.child is not None and self.child.poll() is None:
            direct = self.runtime in ("podman", "docker") and self._signal_container("TERM")
            if not direct:
                self.child.terminate()
            if _leads_group():  # the runtime client, signalled directly above, is spared: one SIGTERM, not two
                signal_group(os.getpgrp(), signal.SIGTERM, sparing=os.getpid(),
                             also_sparing=frozenset({self.child.pid}) if direct else frozenset())
            if self.runtime == "process" and self.containment is not None:  # what left the group, too
                contained.signal_all(self.node_dir, signal.SIGTERM, self.containment)

    def _signal_container(self, signal_name: str) -> bool:
        """Send the signal to the container through the runtime (`podman kill` / `docker kill --signal`: "the main
        process inside each container specified is sent ... any signal specified with the --signal option",
        https://docs.podman.io/en/latest/markdown/podman-kill.1.html, https://docs.docker.com/reference/cli/docker/container/kill/),
        whose PID 1 is the --init that forwards it to the job. Not through the runtime client's --sig-proxy: a
        client that takes the signal before its proxy is installed drops it and the job never hears of the stop
        (podman before 4.4 installed the proxy after starting the container: containers/podman#16901, fixed by
        #17489; Debian 12 ships 4.3). False when the container does not exist yet (the client is then signalled)."""
        try:
            done = subprocess.run([self.runtime, "kill", "--signal", signal_name, container_name(self.launch)],
                                  capture_output=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return False
        return done.returncode == 0

    def _force_after_grace(self, grace: float) -> None:
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline:
            if self.child is None or self.child.poll() is not None:
                return
            time.sleep(0.1)
        if self.runtime in ("podman", "docker"):
            subprocess.run([self.runtime, "rm", "-f", container_name(self.launch)], capture_output=True)
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
        if _leads_group():
            kill_rest(os.getpgrp(), sparing=os.getpid())
        if self.containment is not None:
            contained.kill_all(self.node_dir, self.containment)

    def arm_failsafe(self, hours: float) -> None:
        """The machine's own timer: the job must be gone `hours` after the node's billed start (the provider
        writes it before starting this wrapper), so its stop begins one grace period earlier (at most a tenth
        of the time) and anything left is killed at the end: what the node can be billed is what was reserved
        for it (gpuplan.launching.reserve)."""
        started = _billed_from(self.node_dir) or dt.datetime.now(dt.timezone.utc)
        term_at, kill_at = failsafe_deadlines(started.timestamp(), hours)
        # The grace ends at kill_at whenever the stop begins (a wrapper that started late has less of it).
        timer = threading.Timer(max(term_at - time.time(), 0.0),
                                lambda: self.stop("max_hours", max(kill_at - time.time(), 0.0)))
        timer.daemon = True
        timer.start()

    def checkpoint_sync(self) -> CheckpointSync | None:
        """Rank 0's copies to and from a folder storage (gpuplan.jobs.local_sync), when the run has one."""
        launch = self.launch
        folder = job_environment(launch, run_dir=launch.run_dir).get("GPUPLAN_CHECKPOINT_DIR")
        if launch.node_rank != 0 or not folder or not is_folder(launch.checkpoint_url):
            return None
        return CheckpointSync(Path(folder), Path(str(launch.checkpoint_url)), launch.checkpoint_sync_seconds)

    def failure_cause(self, code: int) -> str | None:
        """Why the job failed, from the runtime's own words in the log and the OOM counts
        (gpuplan.jobs.failure_cause); None when the exit code is all there is to say."""
        try:
            with open(self.node_dir / LOG_FILE, "rb") as fh:
                fh.seek(max(self.output_from, fh.seek(0, os.SEEK_END) - 65536))
                output = fh.read().decode(errors="replace")
        except OSError:
            output = ""
        return failure_cause(code, runtime=self.runtime, image=self.launch.image, output=output,
                             oom=self.oom.kills() if self.oom is not None else None)

    def run(self) -> int:
        """Run the job and record how it ended; returns its exit code."""
        sync = self.checkpoint_sync()
        if sync is not None:
            self.log(f"restored {sync.restore()} checkpoint file(s) from {sync.storage}")
            sync.start()
        try:
            child = self.start()
        except (OSError, RuntimeError) as exc:
            self.log(f"could not start the job: {exc}")
            write_atomic(self.node_dir / EXIT_FILE, json.dumps(
                {"exit_code": 127, "ended_at": _now(), "reason": f"could not start: {exc}",
                 "cause": f"could not start: {exc}"}))
            return 127
        if self._stopping.is_set() and child.poll() is None:  # a stop that came while the job was starting
            child.terminate()
        if self.launch.max_hours:
            self.arm_failsafe(self.launch.max_hours)
        code = self._wait(child)
        gone_at = _now()  # the job's end, unless something it left runs on (then: when that is gone)
        rest = kill_rest(os.getpgrp(), sparing=os.getpid()) if _leads_group() else 0
        left = contained.kill_all(self.node_dir, self.containment) if self.containment is not None else 0
        if rest or left:
            gone_at = _now()
        if left:
            self.log(f"ended {left} process(es) the job left running (they had left its process group)")
        self.log(f"job exited with code {code}")
        if sync is not None:  # the machine works on while it copies the checkpoints: billed until done
            self.log(f"copied {sync.stop()} checkpoint file(s) to {sync.storage}")
            gone_at = _now()
        record: dict[str, Any] = {"exit_code": code, "ended_at": gone_at, "reason": self.reason,
                                  "runtime": self.runtime}
        cause = self.failure_cause(code) if self.reason is None else None
        if cause:
            record["cause"] = cause
            self.log(f"failed: {cause}")
        if read_exit(self.node_dir) is None:  # the watchdog records the end itself when this wrapper was frozen
            write_atomic(self.node_dir / EXIT_FILE, json.dumps(record))
        contained.remove(self.containment)
        return code

    def _wait(self, child: subprocess.Popen[bytes]) -> int:
        """Wait for the job; without a cgroup, keep a snapshot of its processes for whoever outlives this wrapper
        (gpuplan.jobs.containment, the group fallback)."""
        if self.containment is None or self.containment.kind == "cgroup":
            return child.wait()
        while True:
            contained.snapshot_members(self.node_dir, os.getpid())
            try:
                return child.wait(timeout=0.5)
            except subprocess.TimeoutExpired:
                continue


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the detached wrapper: `python -m gpuplan.jobs.runner NODE_DIR`."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        print("usage: python -m gpuplan.jobs.runner NODE_DIR", file=sys.stderr)
        return 2
    node_dir = Path(args[0])
    os.umask(0o077)  # every file the wrapper and the job create in the run folder is the user's alone
    # First, before anything that can fail or take time: the pid file, so the node can be found and stopped even
    # if the gpuplan that started this process dies before writing it (it writes the same pid).
    write_atomic(node_dir / PID_FILE, str(os.getpid()))
    launch = NodeLaunch.from_json((node_dir / LAUNCH_FILE).read_text())
    runner = NodeRunner(node_dir, launch)
    contained.become_subreaper()  # a setsid or double-forked process of the job re-parents here, not to init
    try:
        runner.containment = contained.create(node_dir)
    except OSError as exc:
        runner.log(f"could not record how the job is contained: {exc}")
    signal.signal(signal.SIGTERM, lambda *_: runner.stop("stopped"))
    signal.signal(signal.SIGINT, lambda *_: runner.stop("stopped"))
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    if read_exit(node_dir) is not None:  # stopped before it started (stop_before_start): run nothing
        return 0
    return runner.run()


if __name__ == "__main__":
    sys.exit(main())
