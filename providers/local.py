"""The embedded default provider: this machine.

Each node of a run is a detached wrapper process (`python -m gpuplan.jobs.runner NODE_DIR`, in a new session)
that runs the job — in podman/docker when the spec has an image, else as a plain process — and writes
NODE_DIR/exit.json when the job ends. A launch with an image and no runtime that can run a container here is
refused before anything is recorded (`check_launch`). Because the wrapper is not a child of the CLI's session,
killing the CLI (even with -9) leaves the job running, and `describe` reads the truth from the node folder.

A run with `nodes: N` starts N wrappers on 127.0.0.1 with the torchrun variables (rank 0 is the master, on a
free port), so torch.distributed jobs really run multi-node here.

The instance id is the node folder relative to the provider's root (`<run-id>/node-<rank>`), which lets
`describe` and `terminate` work from ids alone, in a new process, without the database.

Price: configurable (`price_per_hour`, default 0: this machine is already paid for); billed per second with no
minimum.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import ClassVar

from gpuplan.errors import UserError
from gpuplan.jobs import containment as contained
from gpuplan.jobs.job_group import end_orphans
from gpuplan.jobs.processes import command_line, pid_alive, working_dir
from gpuplan.jobs.runner import (
    EXIT_FILE,
    LAUNCH_FILE,
    LOG_FILE,
    PID_FILE,
    NodeLaunch,
    container_name,
    read_exit,
    record_stop,
    stop_before_start,
    write_atomic,
)
from gpuplan.jobs.storage import node_storage_fields
from gpuplan.paths import make_private_dir
from gpuplan.providers.attach_base import Attach, AttachTarget
from gpuplan.providers.base import (
    Attachable,
    Instance,
    InstanceState,
    LaunchCheck,
    LaunchRequest,
    Provider,
    ProviderError,
)

TAGS_FILE = "tags.json"
STARTED_FILE = "started_at"


def free_port() -> int:
    """A free TCP port on 127.0.0.1 for the rank-0 rendezvous (never a fixed port: tests run side by side)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _is_our_wrapper(pid: int, node_dir: Path) -> bool:
    """The pid still belongs to this node's wrapper (pids are reused: check whose it is now).

    Its command line names the node folder, except for an instant at its start: the pid is known (and written to
    the pid file) once exec has begun, but the kernel lays out the new command line a moment later, and until then
    /proc shows an empty one. Read as "not ours", that instant made a node just launched look like a wrapper that
    vanished (failed), and made `terminate` skip it. An empty command line is therefore decided by the working
    directory, which is the node folder from before the exec (`_spawn` starts the wrapper there); a process that
    merely reuses the pid has another one (a kernel thread, also without a command line, has /).
    """
    if not pid_alive(pid):
        return False
    cmdline = command_line(pid)
    if cmdline is None:
        return True  # no /proc (not Linux): trust the pid
    if str(node_dir).encode() in cmdline:
        return True
    if any(cmdline):  # a command line, and not the wrapper's: someone else's process now
        return False
    return working_dir(pid) == os.path.realpath(node_dir)


class LocalProvider(Attachable, Provider):
    """Runs jobs on this machine as detached processes or containers."""

    name: ClassVar[str] = "local"
    cloud: ClassVar[str] = "local"
    min_billed_seconds: ClassVar[int] = 0
    tries_placements: ClassVar[bool] = False  # one place: this machine
    shares_run_folder: ClassVar[bool] = True
    priced_by_catalog: ClassVar[bool] = False  # this machine's own configured price
    storage_schemes: ClassVar[tuple[str, ...]] = ("path",)
    runs_here: ClassVar[bool] = True
    # Start-up before any run is measured (gpuplan.calibration.startup), measured on this project's 2-core machine:
    # `gpuplan launch -y` of a job that only runs `python -c "import torch; torch.zeros(1)"` (runtime: process),
    # started_at -> ended_at, median of 5 runs 2.1 s (1.9-3.2 s) under load 4-8 from other work;
    # bench/measured_accuracy.py re-measures it ("no-op torch job"). A real script's own set-up: history wins.
    startup_seconds: ClassVar[float | None] = 2.1
    startup_why: ClassVar[str] = "a no-op torch job launched on this machine (bench/measured_accuracy.py)"

    def __init__(self, root: str | Path | None = None, price_per_hour: Decimal | float | str | None = None,
                 python: str | None = None) -> None:
        from gpuplan.paths import runs_dir

        self.root = Path(root) if root is not None else runs_dir()
        env_price = os.environ.get("GPUPLAN_LOCAL_PRICE_PER_HOUR")
        chosen = price_per_hour if price_per_hour is not None else env_price
        self.price_per_hour = _price(chosen) if chosen not in (None, "") else Decimal(0)
        self.python = python or sys.executable

    # ------------------------------------------------------------------------------------------ ids

    def quoted_price_per_hour(self, gpus_per_node: float, nodes: int = 1) -> Decimal | None:
        """This machine's configured price (GPUPLAN_LOCAL_PRICE_PER_HOUR), whatever the job asks for."""
        return self.price_per_hour

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        """An image means a container: refuse (one line, exit 2, nothing recorded) when no runtime can run one
        here, naming what was tried (gpuplan.jobs.container_runtime), or when podman could not be given the GPUs
        the job asks for (no CDI spec and no nvidia-ctk: gpuplan.jobs.gpu_devices); say which runtime will."""
        _check_exec_limits(request)  # what execve would refuse (E2BIG) is refused before the run is recorded
        if not request.image or request.runtime == "process":
            return LaunchCheck()
        from gpuplan.jobs.container_runtime import find_runtime, no_runtime_message

        choice = find_runtime(request.runtime or "auto")
        if choice.runtime is None:
            raise UserError(no_runtime_message(request.image, choice))
        if choice.runtime == "podman" and request.gpus_per_node:
            from gpuplan.jobs.gpu_devices import cdi_problem

            problem = cdi_problem()
            if problem:
                raise UserError(f"image {request.image} with GPUs: {problem}")
        return LaunchCheck(notes=(f"container: {request.image} in {choice.runtime}",),
                           details={"container_runtime": choice.runtime})

    def missing_gpus(self, gpus_per_node: int) -> str | None:
        """This machine's NVIDIA GPUs (/dev/nvidiaN) against what the job asks for."""
        from gpuplan.jobs.gpu_devices import nvidia_devices

        have = len(nvidia_devices())
        if gpus_per_node <= 0 or have >= gpus_per_node:
            return None
        if have == 0:
            return "this machine has no NVIDIA GPU (no /dev/nvidia0)"
        return f"this machine has {have} NVIDIA GPU(s), not {gpus_per_node}"

    def node_dir(self, instance_id: str) -> Path:
        path = Path(instance_id)
        return path if path.is_absolute() else self.root / path

    def _instance_id(self, node_dir: Path) -> str:
        try:
            return str(node_dir.relative_to(self.root))
        except ValueError:
            return str(node_dir)

    # ------------------------------------------------------------------------------------------ contract

    def launch(self, request: LaunchRequest) -> list[Instance]:
        """Start one wrapper per node; idempotent per run id (started nodes are returned, not started again)."""
        run_dir = Path(request.run_dir)
        make_private_dir(run_dir)  # job output may hold anything the job printed: owner only
        existing = {i.node_rank: i for i in self.list_tagged(request.run_id, include_ended=True)}
        if len(existing) == request.nodes:
            return [existing[r] for r in sorted(existing)]
        master_port = int(request.options.get("master_port") or free_port())
        argv = list(request.options.get("argv") or ["/bin/sh", "-c", request.command])
        instances = []
        for rank in range(request.nodes):
            if rank in existing:
                instances.append(existing[rank])
                continue
            node_dir = run_dir / f"node-{rank}"
            make_private_dir(node_dir)
            launch = NodeLaunch(
                run_id=request.run_id, name=request.name, argv=argv, run_dir=str(run_dir), node_rank=rank,
                nnodes=request.nodes, nproc_per_node=max(int(request.gpus_per_node or 1), 1),
                master_addr="127.0.0.1", master_port=master_port, runtime=request.runtime or "auto",
                image=request.image, workdir=request.workdir, env=dict(request.env),
                secret_names=sorted(request.secrets), gpus=int(request.gpus_per_node or 0),
                max_hours=request.max_hours, checkpoint_dir=request.options.get("checkpoint_dir"),
                source_dir=request.options.get("source_dir"), **node_storage_fields(request.options),
            )
            # launch.json marks the node as existing for every reader (status, watch, reconcile in other
            # processes), so its tags go first and both files appear whole: a reader never sees a node without
            # its tags (an untagged node reads as nobody's) or half a JSON document.
            write_atomic(node_dir / TAGS_FILE, json.dumps(request.tags()))
            write_atomic(node_dir / LAUNCH_FILE, launch.to_json())
            instances.append(self._spawn(node_dir, request, rank))
        return instances

    def _spawn(self, node_dir: Path, request: LaunchRequest, rank: int) -> Instance:
        # Secrets travel only in the wrapper's environment; launch.json holds their names.
        env = {**os.environ, **dict(request.secrets)}
        started = dt.datetime.now(dt.timezone.utc)
        # The start time goes down before the process exists: if this process dies right after Popen, the node
        # is still billed from (just before) its real start. The wrapper writes its own pid file first thing.
        write_atomic(node_dir / STARTED_FILE, started.isoformat())
        try:
            with open(node_dir / "wrapper.err", "ab", opener=_private) as wrapper_err:
                proc = subprocess.Popen(
                    [self.python, "-m", "gpuplan.jobs.runner", str(node_dir)],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=wrapper_err,
                    env=env, cwd=str(node_dir), start_new_session=True, close_fds=True, umask=0o077,
                )
        except OSError as exc:
            raise ProviderError(f"could not start the local job wrapper: {exc}") from exc
        write_atomic(node_dir / PID_FILE, str(proc.pid))  # the wrapper wrote it too, unless not yet started
        if request.max_hours:
            self._spawn_watchdog(node_dir)
        return self._instance(node_dir, InstanceState.RUNNING, run_id=request.run_id, rank=rank, launched=started,
                              gpus=float(request.gpus_per_node or 0), tags=request.tags())

    def _spawn_watchdog(self, node_dir: Path) -> None:
        """The cap's second enforcer, independent of the wrapper being scheduled (gpuplan.jobs.watchdog)."""
        try:
            with open(node_dir / "watchdog.err", "ab", opener=_private) as err:
                subprocess.Popen([self.python, "-m", "gpuplan.jobs.watchdog", str(node_dir)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                                 cwd=str(node_dir), start_new_session=True, close_fds=True, umask=0o077)
        except OSError as exc:
            raise ProviderError(f"could not start the local job's watchdog: {exc}") from exc

    def _instance(self, node_dir: Path, state: str, *, run_id: str | None, rank: int,
                  launched: dt.datetime | None, gpus: float = 0, tags: dict[str, str] | None = None,
                  ended: dt.datetime | None = None, exit_code: int | None = None,
                  reason: str | None = None, created: dt.datetime | None = None) -> Instance:
        return Instance(provider=self.name, instance_id=self._instance_id(node_dir), state=state, run_id=run_id,
                        cloud=self.cloud, region="local", zone=socket.gethostname(), instance_type="localhost",
                        gpu=None, gpu_count=gpus, node_rank=rank, price_per_hour=self.price_per_hour,
                        launched_at=launched, ended_at=ended, exit_code=exit_code, state_reason=reason,
                        tags=tags or {}, created_at=created or launched)

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        return [self._describe_one(self.node_dir(i)) for i in instance_ids]

    def _describe_one(self, node_dir: Path) -> Instance:
        if not (node_dir / LAUNCH_FILE).exists():
            return self._instance(node_dir, InstanceState.TERMINATED, run_id=None, rank=0, launched=None,
                                  reason="the node folder is gone")
        launch = NodeLaunch.from_json((node_dir / LAUNCH_FILE).read_text())
        tags = json.loads((node_dir / TAGS_FILE).read_text()) if (node_dir / TAGS_FILE).exists() else {}
        launched = _read_time(node_dir / STARTED_FILE)
        # A node whose process has not started yet was still created when its launch.json was written.
        common = {"run_id": launch.run_id, "rank": launch.node_rank, "launched": launched,
                  "gpus": float(launch.gpus), "tags": tags, "created": launched or _mtime(node_dir / LAUNCH_FILE)}
        ended = read_exit(node_dir)
        if ended is not None and contained.members(node_dir):
            # Recorded as ended, yet something of it runs (it left before the wrapper looked): it is ended now,
            # and the node is billed until then.
            contained.kill_all(node_dir)
            detail = "processes of the job outlived its recorded end; gpuplan ended them (billed until then)"
            ended = {**ended, "ended_at": dt.datetime.now(dt.timezone.utc).isoformat(),
                     "detail": f"{ended['detail']}; {detail}" if ended.get("detail") else detail}
            write_atomic(node_dir / EXIT_FILE, json.dumps(ended))
        if ended is not None:
            code = int(ended["exit_code"])
            state = InstanceState.SUCCEEDED if code == 0 and not ended.get("reason") else InstanceState.FAILED
            if ended.get("reason") in ("stopped", "max_hours"):
                state = InstanceState.TERMINATED
            instance = self._instance(node_dir, state, ended=_parse_time(ended.get("ended_at")), exit_code=code,
                                      reason=ended.get("reason"), **common)  # type: ignore[arg-type]
            instance.failure_cause = ended.get("cause")  # in the runtime's words (gpuplan.jobs.failure_cause)
            return instance  # type: ignore[arg-type]
        pid = _read_pid(node_dir / PID_FILE)
        if pid is not None and _is_our_wrapper(pid, node_dir):
            return self._instance(node_dir, InstanceState.RUNNING, **common)  # type: ignore[arg-type]
        if pid is None:
            return self._instance(node_dir, InstanceState.PENDING, **common)  # type: ignore[arg-type]
        # The wrapper died without recording an exit (killed -9, machine rebooted): the outcome is unknown. What
        # its job left running is ended now and billed until now (gpuplan.jobs.job_group).
        if _end_orphans(node_dir, pid, launch):
            return self._describe_one(node_dir)
        return self._instance(node_dir, InstanceState.FAILED, reason="the job wrapper vanished without an exit code",
                              ended=_mtime(node_dir / LOG_FILE), **common)  # type: ignore[arg-type]

    def terminate(self, instance_ids: Sequence[str], grace_seconds: float = 15.0) -> None:
        """SIGTERM each node's process group (the wrapper records `stopped`), SIGKILL what outlives the grace.

        A wrapper that ends without recording its exit (SIGTERM'd in the instant before it set up its stop
        handling, or SIGKILLed after the grace) gets its stop recorded here once it is gone, so the node reads
        as stopped by gpuplan rather than as a job that vanished.
        """
        groups = []
        for instance_id in instance_ids:
            node_dir = self.node_dir(instance_id)
            if read_exit(node_dir) is not None:
                continue
            pid = _read_pid(node_dir / PID_FILE)
            if pid is None:
                # Never started, or starting right now (its launcher may have died before recording the pid):
                # record the stop; a wrapper that starts later reads it and runs nothing.
                stop_before_start(node_dir)
                pid = _read_pid(node_dir / PID_FILE)  # it may have written its pid before seeing the stop
                if pid is None:
                    continue
            if not _is_our_wrapper(pid, node_dir):
                _end_orphans(node_dir, pid)  # its job may outlive it: end that too
                continue
            try:
                os.killpg(pid, signal.SIGTERM)  # the wrapper leads its own session: pgid == pid
                groups.append((pid, node_dir))
            except ProcessLookupError:
                continue
        signalled = list(groups)
        deadline = time.monotonic() + grace_seconds
        while groups and time.monotonic() < deadline:
            groups = [(pid, d) for pid, d in groups if read_exit(d) is None and _is_our_wrapper(pid, d)]
            time.sleep(0.1)
        killed = {pid for pid, _ in groups}
        for pid in killed:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
        for _, node_dir in signalled:  # what left the wrapper's group (gpuplan.jobs.containment)
            if node_dir.exists() and contained.members(node_dir):
                contained.kill_all(node_dir)
        self._record_unrecorded_stops(signalled, killed)

    @staticmethod
    def _record_unrecorded_stops(signalled: list[tuple[int, Path]], killed: set[int]) -> None:
        """Write the stop record of every signalled node whose wrapper is gone without one (see terminate)."""
        deadline = time.monotonic() + 5.0  # a SIGKILLed process is gone within milliseconds; don't hang on one
        for pid, node_dir in signalled:
            while _is_our_wrapper(pid, node_dir) and time.monotonic() < deadline:
                time.sleep(0.05)
            if read_exit(node_dir) is None and not _is_our_wrapper(pid, node_dir):
                how = "killed after the stop grace" if pid in killed else "ended before it could record its stop"
                record_stop(node_dir, f"stopped by gpuplan; the job wrapper {how}",
                            signal.SIGKILL if pid in killed else signal.SIGTERM)

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        """The job's container (`podman exec`), else its working folder with the job's variables."""
        from gpuplan.providers.local_attach import local_attach

        return local_attach(target, command, interactive=interactive, root=self.root)

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        """Every node folder under the root (of one run) whose wrapper is still live (or any, if include_ended)."""
        pattern = f"{run_id}/node-*" if run_id else "*/node-*"
        found = []
        for launch_file in sorted(self.root.glob(f"{pattern}/{LAUNCH_FILE}")):
            instance = self._describe_one(launch_file.parent)
            if include_ended or instance.state not in InstanceState.GONE:
                found.append(instance)
        return found

    def logs(self, instance: Instance, run_dir: str) -> str | None:
        return str(self.node_dir(instance.instance_id) / LOG_FILE)


def _end_orphans(node_dir: Path, pid: int, launch: NodeLaunch | None = None) -> bool:
    """End what a vanished wrapper (`pid`) left of its job: its processes, and its container when it had an image
    (gpuplan.jobs.job_group.end_orphans)."""
    if launch is None:
        try:
            launch = NodeLaunch.from_json((node_dir / LAUNCH_FILE).read_text())
        except (OSError, ValueError, TypeError):
            return False
    return end_orphans(node_dir, pid, node_dir / EXIT_FILE, launch.run_id,
                       container_name(launch) if launch.image else None, contained.members(node_dir))


MAX_ARG_STRLEN = 32 * 4096  # Linux: no single argument or environment string may be longer (man 2 execve)


def _check_exec_limits(request: LaunchRequest) -> None:
    """Refuse (UserError) a job whose command line or environment execve(2) would refuse with E2BIG ("Argument
    list too long"): each string under MAX_ARG_STRLEN, all of them under ARG_MAX. Found at exec, it left a
    recorded run that failed at once; found here, nothing is recorded."""
    argv = [str(a) for a in (request.options.get("argv") or ["/bin/sh", "-c", request.command])]
    env = {**os.environ, **dict(request.env), **dict(request.secrets)}
    strings = [("the command" if len(argv) == 3 and i == 2 else f"argument {i}", a) for i, a in enumerate(argv)]
    strings += [(f"environment variable {k}", f"{k}={v}") for k, v in env.items()]
    for what, text in strings:
        size = len(text.encode(errors="surrogateescape")) + 1
        if size > MAX_ARG_STRLEN:
            raise UserError(f"{what} is {size:,} bytes: Linux refuses any one argument or environment string over "
                            f"{MAX_ARG_STRLEN // 1024} KiB (execve: Argument list too long); put it in a script "
                            "file and run that")
    try:
        arg_max = os.sysconf("SC_ARG_MAX")
    except (ValueError, OSError):
        return
    total = sum(len(text.encode(errors="surrogateescape")) + 1 + 8 for _, text in strings)  # + the pointer
    if total > arg_max - 4096:  # a margin for what the wrapper adds (GPUPLAN_* variables, PATH)
        raise UserError(f"the job's command line and environment come to {total:,} bytes, over this machine's "
                        f"{arg_max:,} (ARG_MAX: execve would refuse them); put the command in a script file")


def _private(path: str, flags: int) -> int:
    """`open(..., opener=_private)`: a file the owner alone can read, whatever the umask."""
    return os.open(path, flags, 0o600)


def _read_pid(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None


def _parse_time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    value = dt.datetime.fromisoformat(text)
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _read_time(path: Path) -> dt.datetime | None:
    try:
        return _parse_time(path.read_text().strip())
    except FileNotFoundError:
        return None


def _mtime(path: Path) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc)
    except FileNotFoundError:
        return None


def _price(value: Decimal | float | str) -> Decimal:
    """The local rate in dollars per hour (GPUPLAN_LOCAL_PRICE_PER_HOUR or `price_per_hour` in the config file).

    A ValueError (bad input, exit 2) for anything but a finite amount of 0 or more: `nan` or `abc` would reach
    every cost figure of every local run, or crash the launch with a decimal error.
    """
    try:
        price = Decimal(str(value).strip().lstrip("$"))
    except ArithmeticError:
        price = None
    # Below a micro-dollar an hour (1e-400) is no price the books can hold (money is kept to 6 decimals).
    if price is None or not price.is_finite() or price < 0 or price >= 10**10 or 0 < price < Decimal("0.000001"):
        raise ValueError(f"the local price per hour (GPUPLAN_LOCAL_PRICE_PER_HOUR or [providers.local] "
                         f"price_per_hour) must be an amount of dollars, 0 or more, not {value!r}")
    return price
