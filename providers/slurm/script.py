"""The batch script and `sbatch` arguments for one gpuplan run on a Slurm cluster (pure text; no I/O).

Kept apart from the provider so the rendering can be read, tested and shellchecked without a cluster.

Quoting rules (a job name, env value or command full of quotes, `$()`, backticks or newlines must come out
inert): every value that reaches the script goes through `shlex.quote`; the sbatch options are an argv list,
never a shell line and never `#SBATCH` directives; the human name of the run only ever appears quoted.
Secret *values* never appear here: they travel in the environment of the `sbatch` call (`--export=ALL`).

The environment a task sees (the same contract as the local and cloud providers, plus Slurm's own):

- GPUPLAN_RUN_ID, GPUPLAN_JOB_NAME, GPUPLAN_RUN_DIR, GPUPLAN_METRICS (metrics JSON lines),
  GPUPLAN_CHECKPOINT_DIR (when the spec has one), GPUPLAN_PROVIDER=slurm, GPUPLAN_SLURM_JOB_ID;
- torchrun's rendezvous variables: MASTER_ADDR (first host of SLURM_JOB_NODELIST via `scontrol show hostnames`),
  MASTER_PORT, NNODES, NODE_RANK (= SLURM_NODEID), NPROC_PER_NODE, WORLD_SIZE (= NNODES x NPROC_PER_NODE), each
  also as GPUPLAN_<NAME>; and, when each Slurm task is one rank, RANK (= SLURM_PROCID), LOCAL_RANK
  (= SLURM_LOCALID) and LOCAL_WORLD_SIZE (also as GPUPLAN_RANK, GPUPLAN_LOCAL_RANK).

By default Slurm starts one task per node, as the local and cloud providers start one process per node: with
GPUs, the command typically runs `torchrun --nproc-per-node $NPROC_PER_NODE ...` (NPROC_PER_NODE = GPUs per
node), which sets RANK itself; without GPUs (or with one) the task *is* the rank and gets RANK/LOCAL_RANK. With
the option `tasks_per_node: N` Slurm starts N tasks per node itself (one per GPU, no torchrun needed),
NPROC_PER_NODE is N and every task gets its RANK/LOCAL_RANK.

Logs: like every provider, node N's output is RUN_DIR/node-N/job.log (the batch script's own lines go to
node-0's); with several tasks per node srun prefixes each line with the task number. RUN_DIR must be on a
filesystem the compute nodes share with the submitting machine, as on any Slurm cluster.
"""

from __future__ import annotations

import math
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gpuplan.jobs.exec_form import exec_script

JOB_NAME_PREFIX = "gpuplan-"
LOG_NAME = "job.log"
METRICS_NAME = "metrics.jsonl"
SCRIPT_NAME = "slurm-job.sh"
DEFAULT_MASTER_PORT = 29500

# Container runtimes gpuplan knows how to drive on a Slurm cluster.
RUNTIME_NONE = "none"
RUNTIME_APPTAINER = "apptainer"
RUNTIME_SINGULARITY = "singularity"
RUNTIME_PYXIS = "pyxis"  # enroot through the pyxis SPANK plugin: `srun --container-image`
CONTAINER_RUNTIMES = (RUNTIME_APPTAINER, RUNTIME_SINGULARITY, RUNTIME_PYXIS)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# Variables the script sets itself: a spec may not override the rendezvous contract.
RESERVED_ENV = frozenset({
    "MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "NPROC_PER_NODE", "RANK", "LOCAL_RANK", "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
})


class ScriptError(ValueError):
    """The request cannot be turned into a safe batch script (bad variable name, impossible shape)."""


def node_log(run_dir: str, node_rank: int | str) -> str:
    """RUN_DIR/node-N/job.log: where node N's output lands (the layout `gpuplan logs --node N` reads)."""
    # `%` starts a Slurm filename pattern (`%n` = node number): a literal one in the folder is written `%%`.
    folder = run_dir.rstrip("/").replace("%", "%%")
    return f"{folder}/node-{node_rank}/{LOG_NAME}"


@dataclass(frozen=True)
class JobShape:
    """What the run asks of the cluster, already resolved from the request and the provider's options."""

    run_id: str
    name: str
    command: str
    run_dir: str
    nodes: int = 1
    tasks_per_node: int = 1
    gpus_per_node: int = 0
    max_hours: float | None = None
    image: str | None = None
    runtime: str = RUNTIME_NONE  # the container runtime actually used (RUNTIME_NONE: the command directly)
    workdir: str | None = None
    source_dir: str | None = None  # the spec's folder: where a plain command starts, and what workdir is under
    checkpoint_dir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    secret_names: Sequence[str] = ()
    master_port: int = DEFAULT_MASTER_PORT
    partition: str | None = None
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None
    gres_type: str | None = None
    cpus_per_task: int | None = None
    extra_sbatch_args: Sequence[str] = ()
    runtime_note: str | None = None  # printed into the job log, e.g. why the image is not used

    @property
    def job_name(self) -> str:
        return job_name_for(self.run_id)

    @property
    def nproc_per_node(self) -> int:
        return self.tasks_per_node if self.tasks_per_node > 1 else max(self.gpus_per_node, 1)

    @property
    def task_is_rank(self) -> bool:
        """Each Slurm task is one rank (no torchrun in between): it gets RANK and LOCAL_RANK."""
        return self.tasks_per_node > 1 or self.nproc_per_node <= 1

    @property
    def start_dir(self) -> str:
        """Where a plain-process job starts: workdir (under the spec's folder when relative), else that folder."""
        base = self.source_dir or self.run_dir
        if self.workdir:
            return self.workdir if self.workdir.startswith("/") else f"{base.rstrip('/')}/{self.workdir}"
        return base

    @property
    def checkpoint_path(self) -> str | None:
        if not self.checkpoint_dir:
            return None
        if self.checkpoint_dir.startswith("/"):
            return self.checkpoint_dir
        return f"{self.run_dir.rstrip('/')}/{self.checkpoint_dir}"


def job_name_for(run_id: str) -> str:
    """The Slurm job name of a run: how gpuplan (and reconcile) recognise their jobs on a shared cluster."""
    return f"{JOB_NAME_PREFIX}{run_id}"


def run_id_from_job_name(name: str) -> str | None:
    """The run id in a gpuplan job name, or None for someone else's job."""
    if not name.startswith(JOB_NAME_PREFIX):
        return None
    return name[len(JOB_NAME_PREFIX):] or None


def time_limit(max_hours: float) -> str:
    """`--time` in whole minutes, rounded up so the limit is never shorter than asked (at least 1 minute)."""
    if max_hours <= 0:
        raise ScriptError(f"max_hours must be positive, got {max_hours}")
    return str(max(1, math.ceil(max_hours * 60 - 1e-9)))


def _check_env_names(names: Sequence[str], what: str) -> None:
    for name in names:
        if not _ENV_NAME.match(name):
            raise ScriptError(f"{what} name {name!r} is not a valid environment variable name")
        if name in RESERVED_ENV:
            raise ScriptError(f"{what} {name} is set by gpuplan for the multi-node rendezvous; choose another name")


def sbatch_args(shape: JobShape, script_path: str) -> list[str]:
    """The argv after `sbatch`: every option explicit, one list element each (no shell in between)."""
    if shape.nodes < 1 or shape.tasks_per_node < 1:
        raise ScriptError("nodes and tasks_per_node must be at least 1")
    args = [
        "--parsable",
        f"--job-name={shape.job_name}",
        f"--comment={shape.run_id}",
        f"--nodes={shape.nodes}",
        f"--ntasks-per-node={shape.tasks_per_node}",
        f"--output={node_log(shape.run_dir, 0)}",
        "--open-mode=append",
        # The caller's environment, plus the secrets gpuplan put into the sbatch process's environment.
        "--export=ALL",
    ]
    if shape.gpus_per_node > 0:
        gres = f"gpu:{shape.gres_type}:{shape.gpus_per_node}" if shape.gres_type else f"gpu:{shape.gpus_per_node}"
        args.append(f"--gres={gres}")
    if shape.max_hours is not None:
        args.append(f"--time={time_limit(shape.max_hours)}")
    for option, value in (("partition", shape.partition), ("account", shape.account), ("qos", shape.qos),
                          ("constraint", shape.constraint)):
        if value:
            args.append(f"--{option}={value}")
    if shape.cpus_per_task:
        args.append(f"--cpus-per-task={shape.cpus_per_task}")
    args.extend(shape.extra_sbatch_args)
    args.append(script_path)
    return args


def _container_image_ref(image: str, runtime: str) -> str:
    """Apptainer needs a URI (`docker://...`) unless the image is a local .sif file or a sandbox folder."""
    if runtime in (RUNTIME_APPTAINER, RUNTIME_SINGULARITY):
        if "://" in image or image.startswith(("/", "./")) or image.endswith(".sif"):
            return image
        return f"docker://{image}"
    return image


def _task_command(shape: JobShape) -> tuple[list[str], str]:
    """(srun options, the shell text each task runs): per-task rank variables, then the job's command."""
    per_task = 'export NODE_RANK="$SLURM_NODEID" GPUPLAN_NODE_RANK="$SLURM_NODEID" PET_NODE_RANK="$SLURM_NODEID"\n'
    if shape.task_is_rank:
        per_task += ('export RANK="$SLURM_PROCID" LOCAL_RANK="$SLURM_LOCALID" GPUPLAN_RANK="$SLURM_PROCID"'
                     ' GPUPLAN_LOCAL_RANK="$SLURM_LOCALID"\n')
    srun_opts: list[str] = []
    if shape.runtime in (RUNTIME_APPTAINER, RUNTIME_SINGULARITY) and shape.image:
        runner = [shape.runtime, "exec", "--bind", shape.run_dir]
        if shape.source_dir:
            runner += ["--bind", f"{shape.source_dir}:{shape.source_dir}:ro"]
        if shape.gpus_per_node > 0:
            runner.append("--nv")
        if shape.workdir:
            runner += ["--pwd", shape.workdir]
        runner += [_container_image_ref(shape.image, shape.runtime), "/bin/sh", "-c", shape.command]
        body = "exec " + shlex.join(runner)
    elif shape.runtime == RUNTIME_PYXIS and shape.image:
        srun_opts += [f"--container-image={shape.image}", f"--container-mounts={shape.run_dir}:{shape.run_dir}"]
        if shape.workdir:
            srun_opts.append(f"--container-workdir={shape.workdir}")
        body = "exec /bin/sh -c " + shlex.quote(exec_script(shape.command))
    else:  # the command exec'd where it is one program, so Slurm's SIGTERM reaches it (gpuplan.jobs.exec_form)
        command = shlex.quote(exec_script(shape.command))
        body = f"cd {shlex.quote(shape.start_dir)} || exit 1\nexec /bin/sh -c {command}"
    return srun_opts, per_task + body


def render_script(shape: JobShape) -> str:
    """The batch script sbatch runs on the first node of the allocation."""
    _check_env_names(list(shape.env), "env")
    _check_env_names(list(shape.secret_names), "secret")
    for what, value in (("image", shape.image), ("workdir", shape.workdir)):
        if value and value.startswith("-"):  # apptainer's `--pwd W IMAGE`: never read as an option
            raise ScriptError(f"{what} {value!r} starts with '-': it would be read as an option")
    q = shlex.quote
    run_dir = shape.run_dir.rstrip("/") or "/"
    lines = [
        "#!/bin/bash",
        "# Single quotes keep values literal and let each task expand its own $SLURM_* variables: deliberate.",
        "# shellcheck disable=SC2016",
        "# Generated by gpuplan: the batch script of one run, submitted with sbatch (options on its command line).",
        "# Secrets are not in this file: they reach the job through sbatch's environment.",
        "set -u",
        f"export GPUPLAN_RUN_ID={q(shape.run_id)}",
        f"export GPUPLAN_JOB_NAME={q(shape.name)}",
        f"export GPUPLAN_RUN_DIR={q(run_dir)}",
        f"export GPUPLAN_METRICS={q(run_dir + '/' + METRICS_NAME)}",
        "export GPUPLAN_PROVIDER=slurm",
        'export GPUPLAN_SLURM_JOB_ID="$SLURM_JOB_ID"',
        "export PYTHONUNBUFFERED=1",
    ]
    if shape.checkpoint_path:
        lines.append(f"export GPUPLAN_CHECKPOINT_DIR={q(shape.checkpoint_path)}")
    if shape.secret_names:
        # Names only, so a job can check what it was given; the values stay in the environment.
        lines.append(f"export GPUPLAN_SECRET_NAMES={q(','.join(shape.secret_names))}")
    lines += [f"export {key}={q(value)}" for key, value in shape.env.items()]
    lines += [
        "# torchrun's rendezvous: the first node of the allocation is the master.",
        'MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" 2>/dev/null | head -n 1)',
        'if [ -z "$MASTER_ADDR" ]; then MASTER_ADDR=$(hostname); fi',
        "export MASTER_ADDR",
        f"export MASTER_PORT={int(shape.master_port)}",
        'export NNODES="$SLURM_JOB_NUM_NODES"',
        f"export NPROC_PER_NODE={shape.nproc_per_node}",
        'export WORLD_SIZE=$((NNODES * NPROC_PER_NODE))',
        'export GPUPLAN_MASTER_ADDR="$MASTER_ADDR" GPUPLAN_MASTER_PORT="$MASTER_PORT" GPUPLAN_NNODES="$NNODES"',
        'export GPUPLAN_NPROC_PER_NODE="$NPROC_PER_NODE" GPUPLAN_WORLD_SIZE="$WORLD_SIZE"',
        "# torchrun reads its options only as PET_<OPTION> (torch/distributed/argparse_util.py `env` action;",
        "# https://pytorch.org/docs/stable/elastic/run.html): gpuplan.jobs.runner.TORCHRUN_VARIABLES.",
        'export PET_MASTER_ADDR="$MASTER_ADDR" PET_MASTER_PORT="$MASTER_PORT" PET_NNODES="$NNODES"',
        'export PET_NPROC_PER_NODE="$NPROC_PER_NODE"',
        "# Every node writes its own log, RUN_DIR/node-N/job.log, as with every gpuplan provider.",
        'i=0; while [ "$i" -lt "$NNODES" ]; do mkdir -p "$GPUPLAN_RUN_DIR/node-$i"; i=$((i + 1)); done',
        'echo "gpuplan: run $GPUPLAN_RUN_ID, Slurm job $SLURM_JOB_ID on $SLURM_JOB_NODELIST: $NNODES node(s) x'
        ' $NPROC_PER_NODE process(es), master $MASTER_ADDR:$MASTER_PORT" >&2',
    ]
    if shape.runtime_note:
        lines.append(f"echo {q('gpuplan: ' + shape.runtime_note)} >&2")
    srun_opts, task_text = _task_command(shape)
    if shape.task_is_rank:
        lines.append(f"export LOCAL_WORLD_SIZE={shape.tasks_per_node}")
    srun = ["srun", "--kill-on-bad-exit=1", "--open-mode=append", f"--output={node_log(run_dir, '%n')}"]
    if shape.nodes * shape.tasks_per_node > 1:
        srun.append("--label")  # prefix each line with its task number when several tasks share job.log
    srun += srun_opts
    lines += [
        shlex.join([*srun, "/bin/sh", "-c", task_text]),
        "status=$?",
        'echo "gpuplan: job exited with status $status" >&2',
        'exit "$status"',
        "",
    ]
    return "\n".join(lines)
