"""Run gpuplan jobs on an existing Slurm cluster: one run = one batch job submitted with `sbatch`.

Where a team has a cluster rather than rented machines, the "instance" is a Slurm allocation: gpuplan submits
a generated batch script (providers/slurm_script.py), follows it with `squeue` (then `sacct` once the
controller has forgotten it), cancels it with `scancel`, and prices it from a configured internal charge-back
rate so reports and budgets treat it like any cloud machine.

Configuration (keyword arguments; each falls back to an environment variable so the CLI needs no flags):

| argument | env | meaning |
| --- | --- | --- |
| partition, account, qos | GPUPLAN_SLURM_PARTITION / _ACCOUNT / _QOS | sbatch's -p/-A/-q |
| price_per_gpu_hour | GPUPLAN_SLURM_PRICE_PER_GPU_HOUR | charge-back per allocated GPU-hour (default 0) |
| price_per_node_hour | GPUPLAN_SLURM_PRICE_PER_NODE_HOUR | charge-back per node-hour of jobs without GPUs |
| container_runtime | GPUPLAN_SLURM_RUNTIME | auto (default) / apptainer / singularity / pyxis / none |
| bin_dir | GPUPLAN_SLURM_BIN | folder holding sbatch, squeue, sacct, scontrol, scancel, srun |
| slurm_conf | SLURM_CONF | which cluster (Slurm's own variable, passed to every command) |
| status_format | - | auto (squeue --json, else the parsable form), json, parsable |

A run's spec can refine per job through `LaunchRequest.options`: partition, account, qos, constraint,
tasks_per_node, cpus_per_task, gres_type, master_port, sbatch_args, container_runtime.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, ClassVar

from gpuplan.errors import UserError
from gpuplan.paths import make_private_dir
from gpuplan.providers.attach_base import Attach, AttachTarget
from gpuplan.providers.base import (
    CREATED_BY,
    TAG_CREATED_BY,
    TAG_NAME,
    TAG_RUN_ID,
    Attachable,
    Instance,
    InstanceState,
    LaunchCheck,
    LaunchRequest,
    Provider,
    ProviderError,
    QuotaError,
)
from gpuplan.providers.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FORMAT,
    JobRecord,
    SlurmReportedError,
    parse_sacct_parsable,
    parse_sbatch_job_id,
    parse_scontrol_job,
    parse_squeue_json,
    parse_squeue_parsable,
)
from gpuplan.providers.slurm.script import (
    CONTAINER_RUNTIMES,
    DEFAULT_MASTER_PORT,
    JOB_NAME_PREFIX,
    RUNTIME_APPTAINER,
    RUNTIME_NONE,
    RUNTIME_PYXIS,
    RUNTIME_SINGULARITY,
    SCRIPT_NAME,
    JobShape,
    ScriptError,
    job_name_for,
    node_log,
    render_script,
    run_id_from_job_name,
    sbatch_args,
)

COMMANDS = ("sbatch", "squeue", "sacct", "scontrol", "scancel", "srun")
_UNREACHABLE_HINTS = ("unable to contact slurm controller", "connection refused", "zero bytes were transmitted",
                      "communication connection failure", "slurm_load_jobs error: unable to contact")
_QUOTA_HINTS = ("qosmaxgres", "assocmaxjobs", "qosmaxjobs", "assocgrp", "qosgrp", "job violates accounting",
                "invalid account", "invalid qos")
_OPTION_KEYS = frozenset({"partition", "account", "qos", "constraint", "tasks_per_node", "cpus_per_task",
                          "gres_type", "master_port", "sbatch_args", "container_runtime"})


def _env_default(value: Any, var: str) -> Any:
    return value if value is not None else (os.environ.get(var) or None)


def _decimal(value: Any, what: str, env: str) -> Decimal:
    """A charge-back rate from the config file or `env`. A bad one is a ValueError, which gpuplan.config turns
    into bad input (one line, exit 2) as for the local provider's price; a ProviderError read as a failure
    (exit 1) though the user typed the value."""
    where = f"{env} or [providers.slurm] {what}"
    try:
        result = Decimal(str(value)) if value not in (None, "") else Decimal(0)
    except InvalidOperation as exc:
        raise ValueError(f"slurm: {what} must be a number, got {value!r} ({where})") from exc
    if not result.is_finite():  # `nan` would also crash the comparison below with InvalidOperation
        raise ValueError(f"slurm: {what} must be a finite number, got {value!r} ({where})")
    if result < 0:
        raise ValueError(f"slurm: {what} must not be negative, got {value!r} ({where})")
    return result


class SlurmProvider(Attachable, Provider):
    """A Slurm cluster reached through its command-line tools on this (login) machine."""

    name: ClassVar[str] = "slurm"
    cloud: ClassVar[str] = "slurm"
    min_billed_seconds: ClassVar[int] = 0  # internal charge-back: exactly the seconds allocated
    shares_run_folder: ClassVar[bool] = True  # the cluster's nodes see the run folder on the shared file system
    priced_by_catalog: ClassVar[bool] = False  # the cluster's own charge-back rate
    storage_schemes: ClassVar[tuple[str, ...]] = ("path",)
    one_step_for_all_nodes: ClassVar[bool] = True  # one batch job holds every node: srun --relative picks one
    # Start-up before any run is measured (gpuplan.calibration.startup): started_at is the allocation start, the
    # node is already booted, so what remains is the same process + torch start as on this machine.
    startup_seconds: ClassVar[float | None] = 2.1
    startup_why: ClassVar[str] = "as local: the allocated node is already up (process + torch start)"

    def __init__(self, *, partition: str | None = None, account: str | None = None, qos: str | None = None,
                 price_per_gpu_hour: Any = None, price_per_node_hour: Any = None,
                 container_runtime: str | None = None, bin_dir: str | None = None, slurm_conf: str | None = None,
                 commands: Mapping[str, str] | None = None, command_timeout: float = 60.0,
                 status_format: str = "auto", **_ignored: Any) -> None:
        self.partition = _env_default(partition, "GPUPLAN_SLURM_PARTITION")
        self.account = _env_default(account, "GPUPLAN_SLURM_ACCOUNT")
        self.qos = _env_default(qos, "GPUPLAN_SLURM_QOS")
        self.price_per_gpu_hour = _decimal(_env_default(price_per_gpu_hour, "GPUPLAN_SLURM_PRICE_PER_GPU_HOUR"),
                                           "price_per_gpu_hour", "GPUPLAN_SLURM_PRICE_PER_GPU_HOUR")
        self.price_per_node_hour = _decimal(
            _env_default(price_per_node_hour, "GPUPLAN_SLURM_PRICE_PER_NODE_HOUR"), "price_per_node_hour",
            "GPUPLAN_SLURM_PRICE_PER_NODE_HOUR")
        self.container_runtime = (_env_default(container_runtime, "GPUPLAN_SLURM_RUNTIME") or "auto").lower()
        if self.container_runtime not in ("auto", RUNTIME_NONE, "process", *CONTAINER_RUNTIMES):
            # a ValueError: the user's setting, so bad input (exit 2) through gpuplan.config, like the rates above
            raise ValueError(f"slurm: unknown container runtime {self.container_runtime!r} (GPUPLAN_SLURM_RUNTIME "
                             f"or [providers.slurm] container_runtime); use auto, none, "
                             f"{', '.join(CONTAINER_RUNTIMES)}")
        self.bin_dir = _env_default(bin_dir, "GPUPLAN_SLURM_BIN")
        self.slurm_conf = slurm_conf
        self.commands = dict(commands or {})
        self.command_timeout = command_timeout
        if status_format not in ("auto", "json", "parsable"):
            # a ValueError: the user's setting, so bad input (exit 2) through gpuplan.config, like the rates above
            raise ValueError(f"slurm: status_format must be auto, json or parsable, got {status_format!r} "
                             "([providers.slurm] status_format)")
        # auto: learnt on first use (does this squeue speak --json?); parsable: never try JSON.
        self._squeue_json: bool | None = {"auto": None, "json": True, "parsable": False}[status_format]

    # ---- running Slurm's commands ------------------------------------------------------------------------
    def _binary(self, tool: str) -> str:
        """The path of one Slurm command: explicit `commands`, then `bin_dir`, then PATH."""
        if tool in self.commands:
            return self.commands[tool]
        if self.bin_dir:
            return str(Path(self.bin_dir) / tool)
        return shutil.which(tool) or tool

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        env = dict(os.environ)
        if self.slurm_conf:
            env["SLURM_CONF"] = self.slurm_conf
        if extra:
            env.update(extra)
        return env

    def _run(self, tool: str, args: Sequence[str], *, env_extra: Mapping[str, str] | None = None,
             secrets: Sequence[str] = (), check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a Slurm command; a missing binary or an unreachable controller is a clear ProviderError."""
        argv = [self._binary(tool), *args]
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, env=self._env(env_extra),
                                  timeout=self.command_timeout, stdin=subprocess.DEVNULL)
        except FileNotFoundError as exc:
            raise ProviderError(f"slurm: {argv[0]} not found: is Slurm installed on this machine? (set "
                                f"GPUPLAN_SLURM_BIN to the folder of its commands)", code="SlurmNotInstalled") from exc
        except subprocess.TimeoutExpired as exc:
            raise ProviderError(f"slurm: {tool} did not answer within {self.command_timeout:.0f} s: is slurmctld "
                                "reachable from here?", code="SlurmUnreachable") from exc
        if check and proc.returncode != 0:
            raise self._error(tool, proc, secrets)
        return proc

    def _error(self, tool: str, proc: subprocess.CompletedProcess[str], secrets: Sequence[str]) -> ProviderError:
        message = (proc.stderr or proc.stdout or "").strip().replace("\n", " ")[:500]
        for value in secrets:  # never echo a secret back, even if a tool did
            if value:
                message = message.replace(value, "***")
        lowered = message.lower()
        if any(h in lowered for h in _UNREACHABLE_HINTS):
            return ProviderError(f"slurm: cannot reach the Slurm controller ({tool}: {message})",
                                 code="SlurmUnreachable")
        if any(h in lowered for h in _QUOTA_HINTS):
            return QuotaError(f"slurm: {tool} refused the job: {message}", code="SlurmLimit")
        return ProviderError(f"slurm: {tool} failed (exit {proc.returncode}): {message}", code="SlurmError")

    # ---- pricing -----------------------------------------------------------------------------------------
    def quoted_price_per_hour(self, gpus_per_node: float, nodes: int = 1) -> Decimal | None:
        """The cluster's internal charge-back for the allocation (`charge_per_hour`)."""
        return self.charge_per_hour(gpus_per_node, nodes)

    def charge_per_hour(self, gpus_per_node: float, nodes: int) -> Decimal:
        """The internal charge-back rate of an allocation: GPUs x rate, or nodes x node rate without GPUs."""
        gpus = Decimal(str(gpus_per_node)) * nodes
        if gpus > 0:
            return self.price_per_gpu_hour * gpus
        return self.price_per_node_hour * nodes

    def missing_gpus(self, gpus_per_node: int) -> str | None:
        """The configured partition's GPU GRES against the job's GPUs per node (gpuplan.providers.slurm.gres);
        None when it has them, or when sinfo cannot be asked (the submission then says what is wrong)."""
        from gpuplan.providers.slurm.gres import missing_gpus

        if gpus_per_node <= 0:
            return None
        args = ["-h", "-o", "%G", *(["-p", self.partition] if self.partition else [])]
        try:
            listed = self._run("sinfo", args).stdout
        except ProviderError:
            return None
        return missing_gpus(listed, gpus_per_node, self.partition)

    # ---- launch ------------------------------------------------------------------------------------------
    def _runtime_for(self, request: LaunchRequest, options: Mapping[str, Any]) -> tuple[str, str | None]:
        """(runtime to use, a note for the job log): the image runs in the cluster's runtime if it has one."""
        wanted = str(options.get("container_runtime") or self.container_runtime).lower()
        if not request.image or (request.runtime or "").lower() in ("process", "none") or wanted in (
                RUNTIME_NONE, "process"):
            return RUNTIME_NONE, None
        if wanted in CONTAINER_RUNTIMES:
            return wanted, None
        detected = self.detect_container_runtime()
        if detected is None:
            return RUNTIME_NONE, (f"the cluster has no container runtime (apptainer, singularity, pyxis): "
                                  f"running the command directly instead of in {request.image}")
        return detected, None

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        """An image means a container: refuse (one line, exit 2, nothing recorded) when the cluster has no
        runtime for it, rather than run the command outside its image; say which runtime will run it."""
        runtime, problem = self._runtime_for(request, request.options)
        if problem is not None:
            raise UserError(f"image {request.image}: {problem.split(':')[0]}; install one on the cluster, set "
                            "GPUPLAN_SLURM_RUNTIME (or [providers.slurm] container_runtime), or set "
                            "`runtime: process` in the spec to run the command without a container")
        if runtime == RUNTIME_NONE:
            return LaunchCheck()
        return LaunchCheck(notes=(f"container: {request.image} with {runtime}",),
                           details={"container_runtime": runtime})

    def detect_container_runtime(self) -> str | None:
        """pyxis if srun knows --container-image, else apptainer or singularity on PATH, else None."""
        try:
            help_text = self._run("srun", ["--help"], check=False).stdout
        except ProviderError:
            help_text = ""
        if "--container-image" in help_text:
            return RUNTIME_PYXIS
        for runtime in (RUNTIME_APPTAINER, RUNTIME_SINGULARITY):
            if shutil.which(runtime, path=self._env().get("PATH")):
                return runtime
        return None

    def shape(self, request: LaunchRequest) -> JobShape:
        """Resolve a request and this provider's configuration into what the batch job asks for."""
        options = {k: v for k, v in dict(request.options).items() if k in _OPTION_KEYS}
        runtime, note = self._runtime_for(request, options)
        gpus = request.gpus_per_node or 0
        if gpus and int(gpus) != gpus:
            raise ProviderError(f"slurm: gpus_per_node must be a whole number on Slurm, got {gpus}")
        extra = options.get("sbatch_args") or ()
        if isinstance(extra, str):
            extra = (extra,)
        return JobShape(
            run_id=request.run_id, name=request.name, command=request.command, run_dir=request.run_dir,
            nodes=int(request.nodes or 1), tasks_per_node=int(options.get("tasks_per_node") or 1),
            gpus_per_node=int(gpus), max_hours=request.max_hours, image=request.image, runtime=runtime,
            workdir=request.workdir, source_dir=request.options.get("source_dir"),
            checkpoint_dir=slurm_checkpoint_dir(request.options), env=dict(request.env),
            secret_names=sorted(request.secrets),
            master_port=int(options.get("master_port") or DEFAULT_MASTER_PORT),
            partition=options.get("partition") or self.partition, account=options.get("account") or self.account,
            qos=options.get("qos") or self.qos, constraint=options.get("constraint"),
            gres_type=options.get("gres_type"), cpus_per_task=options.get("cpus_per_task"),
            extra_sbatch_args=tuple(str(a) for a in extra), runtime_note=note,
        )

    def launch(self, request: LaunchRequest) -> list[Instance]:
        """Submit the run's batch job; idempotent: a job already named for this run id is returned instead."""
        existing = self._jobs_named(job_name_for(request.run_id))
        if existing:
            return [self._instance(record, request.run_id, request) for record in existing]
        try:
            shape = self.shape(request)
            script = render_script(shape)
        except ScriptError as exc:
            raise ProviderError(f"slurm: {exc}", code="BadRequest") from exc
        run_dir = Path(request.run_dir)
        # Owner only (job output); sbatch opens node-0/job.log before the script runs.
        make_private_dir(run_dir / "node-0")
        script_path = run_dir / SCRIPT_NAME
        script_path.write_text(script)
        script_path.chmod(0o700)
        try:
            args = sbatch_args(shape, str(script_path))
        except ScriptError as exc:
            raise ProviderError(f"slurm: {exc}", code="BadRequest") from exc
        # Secrets ride in sbatch's environment (exported to the job by --export=ALL), never in a file or argv.
        # gpuplan's interpreter comes first on PATH, so `python train.py` uses the environment gpuplan runs in,
        # as with the local provider.
        path = os.pathsep.join([str(Path(sys.executable).parent), self._env().get("PATH", os.defpath)])
        proc = self._run("sbatch", args, env_extra={**dict(request.secrets), "PATH": path},
                         secrets=list(request.secrets.values()))
        try:
            job_id = parse_sbatch_job_id(proc.stdout)
        except ValueError as exc:
            raise ProviderError(f"slurm: {exc}") from exc
        now = dt.datetime.now(dt.timezone.utc)
        record = JobRecord(job_id=job_id, name=shape.job_name, slurm_state="PENDING", partition=shape.partition,
                           nodes=shape.nodes, comment=request.run_id)
        with contextlib.suppress(ProviderError):  # one look back, for the partition the cluster chose
            record = next((r for r in self._squeue([job_id])), record)
        instance = self._instance(record, request.run_id, request)
        instance.launched_at = instance.launched_at or now
        instance.created_at = instance.created_at or now
        return [instance]

    # ---- status ------------------------------------------------------------------------------------------
    def _squeue(self, job_ids: Sequence[str] | None = None) -> list[JobRecord]:
        """Jobs the controller still knows (running, pending, and finished within MinJobAge)."""
        if self._squeue_json is not False:
            proc = self._run("squeue", ["--json"], check=False)
            if proc.returncode == 0:
                try:
                    records = parse_squeue_json(proc.stdout)
                except SlurmReportedError:
                    pass  # e.g. the controller is unreachable: the parsable form below says so precisely
                except ValueError as exc:
                    if self._squeue_json:
                        raise ProviderError(f"slurm: {exc}") from exc
                    self._squeue_json = False
                else:
                    self._squeue_json = True
                    return [r for r in records if job_ids is None or r.job_id in job_ids]
            else:
                error = self._error("squeue", proc, ())
                if self._squeue_json or error.code == "SlurmUnreachable":
                    raise error
                self._squeue_json = False  # this squeue has no JSON plugin: the parsable form from now on
        args = ["-h", "-t", "all", "-o", SQUEUE_FORMAT]
        if job_ids is not None:
            if not job_ids:
                return []
            args += ["-j", ",".join(job_ids)]
        proc = self._run("squeue", args, check=False)
        if proc.returncode != 0:
            if "invalid job id" in proc.stderr.lower():
                return []
            raise self._error("squeue", proc, ())
        records = parse_squeue_parsable(proc.stdout)
        return [self._with_scontrol_exit_code(r) if r.finished else r for r in records]

    def _with_scontrol_exit_code(self, record: JobRecord) -> JobRecord:
        """The parsable squeue has no exit code: ask `scontrol show job` (known up to MinJobAge)."""
        proc = self._run("scontrol", ["show", "job", "-o", record.job_id], check=False)
        if proc.returncode != 0:
            return record
        from gpuplan.providers.slurm.parse import exit_code_from_pair

        fields = parse_scontrol_job(proc.stdout)
        return JobRecord(**{**record.__dict__, "exit_code": exit_code_from_pair(fields.get("ExitCode", ""))})

    def _sacct(self, job_ids: Sequence[str] = (), name: str | None = None) -> list[JobRecord]:
        """Finished jobs from the accounting database; [] when the cluster keeps no accounting."""
        args = ["-X", "-P", "-n", f"--format={SACCT_FIELDS}"]
        if job_ids:
            args += ["-j", ",".join(job_ids)]
        if name:
            args += [f"--name={name}", "-S", "now-30days"]
        proc = self._run("sacct", args, check=False)
        if proc.returncode != 0:
            return []  # e.g. "Slurm accounting storage is disabled": squeue was all there is
        return parse_sacct_parsable(proc.stdout)

    def _jobs_named(self, name: str) -> list[JobRecord]:
        records = [r for r in self._squeue() if r.name == name]
        if not records:
            records = [r for r in self._sacct(name=name) if r.name == name]
        return records

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        """The state of these jobs; a job Slurm no longer knows at all comes back TERMINATED."""
        ids = [str(i) for i in instance_ids]
        found = {r.job_id: r for r in self._squeue(ids)}
        missing = [i for i in ids if i not in found]
        if missing:
            found.update({r.job_id: r for r in self._sacct(missing) if r.job_id in missing})
        result = []
        for job_id in ids:
            record = found.get(job_id)
            if record is None:
                result.append(Instance(provider=self.name, instance_id=job_id, state=InstanceState.TERMINATED,
                                       cloud=self.cloud, state_reason="Slurm no longer knows this job"))
            else:
                result.append(self._instance(record, run_id_from_job_name(record.name), None))
        return result

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """scancel the jobs (cancelling a finished or unknown job is not an error)."""
        ids = [str(i) for i in instance_ids]
        if not ids:
            return
        proc = self._run("scancel", ids, check=False)
        if proc.returncode != 0:
            lowered = proc.stderr.lower()
            if "invalid job id" in lowered or "already completing or completed" in lowered:
                return
            raise self._error("scancel", proc, ())

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        """A job step inside the run's own allocation (gpuplan.providers.slurm.attach)."""
        from gpuplan.providers.slurm.attach import slurm_attach

        return slurm_attach(target, command, interactive=interactive, srun=self._binary("srun"),
                            slurm_conf=str(self.slurm_conf) if self.slurm_conf else None)

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        """Jobs named gpuplan-* on the cluster (optionally of one run): what reconcile compares; finished ones
        too with `include_ended`, as long as squeue still lists them."""
        wanted = job_name_for(run_id) if run_id else None
        result = []
        for record in self._squeue():
            if not record.name.startswith(JOB_NAME_PREFIX) or (wanted and record.name != wanted):
                continue
            if record.finished and not include_ended:
                continue
            result.append(self._instance(record, run_id_from_job_name(record.name), None))
        return result

    def logs(self, instance: Instance, run_dir: str) -> str | None:
        """The first node's log (RUN_DIR/node-0/job.log): the batch script's lines and rank 0's output."""
        return node_log(run_dir, instance.node_rank)

    # ---- records -> instances ----------------------------------------------------------------------------
    def _instance(self, record: JobRecord, run_id: str | None, request: LaunchRequest | None) -> Instance:
        gpus_per_node = float(request.gpus_per_node) if request else float(record.gpus_per_node)
        nodes = record.nodes or (request.nodes if request else 1)
        tags = {TAG_CREATED_BY: CREATED_BY, "slurm:job-name": record.name}
        if run_id:
            tags[TAG_RUN_ID] = run_id
        if request:
            tags[TAG_NAME] = request.name
        reason = record.reason if record.reason and record.reason != "None" else None
        base_state = record.slurm_state.split()[0].rstrip("+").upper() if record.slurm_state.strip() else ""
        # The reasons gpuplan.supervise.watch understands, as the local provider reports them: Slurm's time limit is the
        # max_hours fail-safe (the run ends capped); a cancel gpuplan did not ask for is a stop.
        if base_state in ("TIMEOUT", "DEADLINE"):
            reason = "max_hours"
        elif base_state == "CANCELLED":
            reason = "stopped"
        return Instance(
            provider=self.name, instance_id=record.job_id, state=record.state, run_id=run_id, cloud=self.cloud,
            region=None, zone=record.partition, instance_type=f"slurm:{nodes}x{record.partition or 'default'}",
            gpu=request.gpu if request else None, gpu_count=gpus_per_node * nodes,
            price_per_hour=self.charge_per_hour(gpus_per_node, nodes),
            launched_at=record.start, ended_at=record.end, exit_code=record.exit_code, created_at=record.submit,
            state_reason=reason or (record.slurm_state if record.finished else None), tags=tags,
        )


def slurm_checkpoint_dir(options: Mapping[str, Any]) -> str | None:
    """The job's checkpoint folder: on a cluster the run's folder storage is on the shared file system every node
    mounts, so the job writes its checkpoints straight there (`<storage>/<run id>/checkpoints`: durable, listed
    by `gpuplan checkpoints`, found again by a requeued or relaunched job); else the spec's `checkpoint.dir`."""
    url = options.get("checkpoint_url")
    if url and str(url).startswith("/") and options.get("checkpoint_dir"):
        return str(url)
    return options.get("checkpoint_dir")
