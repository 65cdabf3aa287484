"""`gpuplan exec/ssh` into a Slurm run: a job step inside the run's own allocation.

`srun --jobid=JOB --overlap` starts a step in a running job without waiting for its resources (the training step
holds them all); `--relative=N` puts it on the job's Nth node, `--pty` gives a shell a terminal. Slurm docs:
https://slurm.schedmd.com/srun.html (--jobid, --overlap, --relative, --pty, --chdir).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuplan.providers.attach_base import LOGIN_SHELL, Attach, AttachTarget


def slurm_attach(target: AttachTarget, command: Sequence[str] | None, *, interactive: bool, srun: str = "srun",
                 slurm_conf: str | None = None) -> Attach:
    """`srun --jobid JOB --overlap --nodes 1 --ntasks 1 --relative N [--pty] [--chdir RUN_DIR] CMD`, with the
    provider's own srun and SLURM_CONF."""
    argv = [srun, f"--jobid={target.instance_id}", "--overlap", "--nodes=1", "--ntasks=1",
            f"--relative={target.node_rank}", "--quiet"]
    if interactive or command is None:
        argv.append("--pty")
    if target.run_dir:
        argv.append(f"--chdir={target.run_dir}")
    env = {"SLURM_CONF": slurm_conf} if slurm_conf else {}
    return Attach([*argv, *(command or LOGIN_SHELL)],
                  f"a step in Slurm job {target.instance_id} on its node {target.node_rank}", env=env)
