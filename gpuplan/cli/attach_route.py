"""`gpuplan exec` / `gpuplan ssh`: the command line that reaches one node of a live run, built from what the books
recorded (provider, instance id, region/zone, run folder), so getting in needs no new state.

What "in" means is the same everywhere: the job's container when it runs in one (`podman exec`, `docker exec`),
else the run's folder on that machine. A shell (`ssh`) or one command (`exec`):

| provider | how |
| --- | --- |
| local | `podman`/`docker exec` into `gpuplan-RUN-RANK`, else the node's working folder with the job's variables |
| slurm | `srun --jobid JOB --overlap --relative N` (a step inside the job's allocation, in the run folder) |
| aws | Session Manager (`aws ssm start-session`); `--via ssh`: ssh through it; `--via ip`: port 22 for a /32 |
| gcp | `gcloud compute ssh --tunnel-through-iap` |

A plugin provider may offer the same with a method `attach_command(target, command, interactive) -> Attach`.
The cloud builders only build argv (the user's aws/gcloud CLI does the talking): tests check them without a
cloud, and no credential passes through gpuplan. The routing lives in the CLI, the one layer above every provider
package, so the providers' shared root never imports a cloud's package (which imports the root back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost
from gpuplan.providers.base import ProviderError


def attach_command(target: AttachTarget, command: Sequence[str] | None, *, interactive: bool, via: str | None = None,
                   settings: Mapping[str, object] | None = None, provider: object | None = None,
                   prepare: bool = True) -> Attach:
    """The command line into `target` for `command` (None: an interactive shell). `prepare=False` (--print)
    only builds it: nothing on the machine's side is changed (AWS `--via ip` opens no port)."""
    settings = settings or {}
    if target.provider == "local":
        from gpuplan.providers.local_attach import local_attach

        return local_attach(target, command, interactive=interactive, root=settings.get("root"))
    if target.provider == "slurm":
        from gpuplan.providers.slurm.attach import slurm_attach

        return slurm_attach(target, command, interactive=interactive, provider=provider)
    if target.provider == "aws":
        from gpuplan.providers.aws.attach import aws_attach

        return aws_attach(target, command, interactive=interactive, via=via, settings=settings, provider=provider,
                          prepare=prepare)
    if target.provider == "gcp":
        from gpuplan.providers.gcp.attach import gcp_attach

        return gcp_attach(target, command, interactive=interactive, settings=settings)
    method = getattr(provider, "attach_command", None)
    if callable(method):
        result = method(target, command, interactive)
        if isinstance(result, Attach):
            return result
    raise ProviderError(f"the {target.provider} provider offers no way into its machines (exec/ssh)")


def ssh_host(target: AttachTarget, settings: Mapping[str, object] | None = None,
             provider: object | None = None) -> SshHost:
    """How plain ssh reaches `target` (an ssh_config Host), where the provider's machines take ssh: AWS through
    Session Manager, GCP through IAP; a plugin may offer `ssh_host(target) -> SshHost`."""
    settings = settings or {}
    if target.provider == "aws":
        from gpuplan.providers.aws.attach import aws_ssh_host

        return aws_ssh_host(target, settings)
    if target.provider == "gcp":
        from gpuplan.providers.gcp.attach import gcp_ssh_host

        return gcp_ssh_host(target, settings)
    method = getattr(provider, "ssh_host", None)
    if callable(method):
        result = method(target)
        if isinstance(result, SshHost):
            return result
    from gpuplan.errors import UserError

    raise UserError(f"the {target.provider} provider's machines take no ssh login: `gpuplan ssh "
                    f"{target.run_id}` opens a shell there")


def check_via(provider: str, via: str | None) -> None:
    """`--via` names a way this provider has."""
    ways = {"aws": ("ssm", "ssh", "ip")}.get(provider, ())
    if via is not None and via not in ways:
        raise ValueError(f"--via {via}: the {provider} provider has " +
                         (f"{', '.join(ways)}" if ways else "one way in (leave --via out)"))
