"""`gpuplan exec RUN -- CMD` and `gpuplan ssh RUN`: into a live run's machine, as its provider allows.

The command line comes from the provider's `attach` (an `Attachable` provider), built from the recorded instance
rows; this module picks the node, runs the line with the terminal handed over, and exits with the command's own status.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded_int
from gpuplan.cli.context import AppContext, pass_app

if TYPE_CHECKING:
    from gpuplan.providers.attach_base import Attach, AttachTarget

NODE_OPTION = click.option("--node", type=bounded_int("nodes", low=0), default=0, show_default=True,
                           help="Which node of a multi-node run (its rank).")
VIA_OPTION = click.option("--via", metavar="WAY",
                          help="Which way in, where the provider has several (its `ways_in`). AWS: Session Manager "
                               "(ssm, default), ssh tunnelled through it (ssh), or ssh to the public address with "
                               "port 22 opened to your address alone (ip).")
PRINT_OPTION = click.option("--print", "print_only", is_flag=True,
                            help="Print the command line instead of running it.")


@click.command("exec")
@click.argument("run_ref", metavar="RUN", shell_complete=complete.live_run_refs)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
@NODE_OPTION
@VIA_OPTION
@PRINT_OPTION
@pass_app
def exec_command(app: AppContext, run_ref: str, command: tuple[str, ...], node: int, via: str | None,
                 print_only: bool) -> None:
    """Run CMD on a live run's machine, in the job's container or its run folder (`--` before CMD).

    local: podman/docker exec, else the folder with the job's variables; slurm: srun --jobid --overlap;
    aws: Session Manager; gcp: gcloud compute ssh through IAP. Exits with CMD's status.
    """
    _run(app, run_ref, list(command), node=node, via=via, print_only=print_only)


@click.command("ssh")
@click.argument("run_ref", metavar="RUN", shell_complete=complete.live_run_refs)
@NODE_OPTION
@VIA_OPTION
@PRINT_OPTION
@click.option("--config", "write_config", is_flag=True,
              help="Write `Host gpuplan-RUN` entries (one per node) to a file ~/.ssh/config can Include, instead "
                   "of opening a shell; removed when the run ends.")
@pass_app
def ssh(app: AppContext, run_ref: str, node: int, via: str | None, print_only: bool, write_config: bool) -> None:
    """Open a shell on a live run's machine: in the job's container when it has one, else in its run folder.

    local: a shell there; slurm: srun --pty in the job's allocation; aws: Session Manager (or `--via ssh`);
    gcp: gcloud compute ssh --tunnel-through-iap. With --config: `ssh gpuplan-RUN`, scp and rsync work by name.
    """
    if write_config:
        _write_config(app, run_ref)
        return
    _run(app, run_ref, None, node=node, via=via, print_only=print_only)


def _write_config(app: AppContext, run_ref: str) -> None:
    """Every live node of the run as an ssh_config Host in GPUPLAN_HOME/ssh/gpuplan-RUN (gpuplan.runs.ssh_config);
    entries of runs that ended meanwhile are swept."""
    from gpuplan.cli.output import note
    from gpuplan.errors import UserError
    from gpuplan.providers.base import Attachable
    from gpuplan.providers.registry import make_provider
    from gpuplan.runs import ssh_config
    from gpuplan.runs.records import get_run
    from gpuplan.store.models import Run, RunState

    first = _target(app, run_ref, 0)  # a live run with a machine, or one clear line
    with app.store.session() as session:
        nodes = get_run(session, run_ref).nodes or 1
        for run_id in ssh_config.entries():
            run = session.get(Run, run_id)
            if run is None or run.state in RunState.FINAL:
                ssh_config.remove_entry(run_id)
    provider = make_provider(first.provider)
    targets = [first, *(_target(app, run_ref, rank) for rank in range(1, nodes))]
    hosts = [(t.node_rank, provider.ssh_host(t) if isinstance(provider, Attachable) else None) for t in targets]
    if any(host is None for _, host in hosts):
        raise UserError(f"the {first.provider} provider's machines take no ssh login: `gpuplan ssh "
                        f"{first.run_id}` opens a shell there")
    path = ssh_config.write_entry(first.run_id, [(rank, host) for rank, host in hosts if host is not None])
    aliases = ", ".join(ssh_config.host_alias(first.run_id, rank) for rank, _ in hosts)
    click.echo(str(path))
    note(f"wrote {aliases} to {path}; `ssh {ssh_config.host_alias(first.run_id, 0)}` works once "
         f"~/.ssh/config starts with this line (once, before any Host): {ssh_config.include_line()}")


def _run(app: AppContext, run_ref: str, command: list[str] | None, *, node: int, via: str | None,
         print_only: bool) -> None:
    import sys

    from gpuplan.cli.output import note
    from gpuplan.errors import UserError
    from gpuplan.providers.base import Attachable
    from gpuplan.providers.registry import make_provider

    target = _target(app, run_ref, node)
    provider = make_provider(target.provider)
    if not isinstance(provider, Attachable):
        raise UserError(f"the {target.provider} provider offers no way into its machines (exec/ssh)")
    ways = provider.ways_in
    if via is not None and via not in ways:
        raise UserError(f"--via {via}: the {target.provider} provider has " +
                        (", ".join(ways) if ways else "one way in (leave --via out)"))
    attach = provider.attach(target, command, interactive=sys.stdin.isatty(), via=via, prepare=not print_only)
    if print_only:
        click.echo(attach.shell_line())
        return
    note(f"{target.run_id} node {target.node_rank}: {attach.how}")
    click.get_current_context().exit(_spawn(attach))


def _target(app: AppContext, run_ref: str, node: int) -> AttachTarget:
    """The recorded machine of `node` of a live run; a run that ended, or a node it does not have, is bad input."""
    from gpuplan.errors import UserError
    from gpuplan.providers.attach_base import AttachTarget
    from gpuplan.runs.records import get_run
    from gpuplan.store.models import RunState

    with app.store.session() as session:
        run = get_run(session, run_ref)
        if run.state not in RunState.LIVE:
            where = f" (its files: {run.run_dir})" if run.run_dir else ""
            raise UserError(f"run {run.id} is {run.state}: there is no machine to get into{where}")
        live = [i for i in run.instances if i.terminated_at is None]
        if not live:
            raise UserError(f"run {run.id} is {run.state} but has no machine yet; try again when it runs")
        nodes = max(run.nodes or 1, 1)
        if node >= nodes:
            raise UserError(f"--node {node}: run {run.id} has {nodes} node{'s' if nodes > 1 else ''} "
                            f"(0..{nodes - 1})")
        if len(live) == 1 and nodes > 1 and _one_step_for_all_nodes(run.provider):
            row = live[0]  # one Slurm job holds every node: the step picks the node (--relative)
        else:
            found = [i for i in live if i.node_rank == node]
            if not found:
                raise UserError(f"run {run.id} has no live machine for node {node}")
            row = found[0]
        return AttachTarget(run_id=run.id, provider=run.provider, instance_id=row.provider_instance_id,
                            node_rank=node, nodes=nodes, region=row.region or run.region,
                            zone=row.zone or run.zone, run_dir=run.run_dir)


def _one_step_for_all_nodes(provider_name: str) -> bool:
    """Does one recorded machine of this provider hold every node of a run (a Slurm job)?"""
    from gpuplan.providers.base import Attachable
    from gpuplan.providers.registry import load_provider_class

    cls = load_provider_class(provider_name)
    return issubclass(cls, Attachable) and cls.one_step_for_all_nodes


def _spawn(attach: Attach) -> int:
    """Run the command with our terminal; Ctrl-C belongs to it while it runs (gpuplan waits, then exits with its
    status: 128+N when a signal N ended it, as a shell reports)."""
    import os
    import signal
    import subprocess
    import sys

    from gpuplan.errors import UserError

    env = {**os.environ, **attach.env}
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    reported: int | None = None
    try:
        proc = subprocess.Popen(attach.argv, cwd=attach.cwd, env=env,
                                stdout=subprocess.PIPE if attach.status_marker else None,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        if attach.status_marker and proc.stdout is not None:
            from gpuplan.cli.remote_status import forward_with_status

            reported = forward_with_status(proc.stdout, sys.stdout.buffer, attach.status_marker)
        code = proc.wait()
    except FileNotFoundError:
        hint = {"aws": " (the AWS CLI v2 with the Session Manager plugin)", "gcloud": " (the Google Cloud CLI)",
                "ssh": ""}.get(os.path.basename(attach.argv[0]), "")
        raise UserError(f"{attach.argv[0]} is not installed here{hint}; `--print` shows the command") from None
    finally:
        signal.signal(signal.SIGINT, previous)
    if attach.status_marker and code == 0:
        if reported is not None:
            return reported
        from gpuplan.cli.output import warn

        warn("the machine did not report the command's exit status (the session ended before it did)")
        return 255  # as ssh says a connection, not the command, failed
    return 128 - code if code < 0 else code
