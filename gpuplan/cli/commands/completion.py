"""`gpuplan completion SHELL`: the shell script that makes TAB complete gpuplan's commands, options and values.

The script is Click's own (it calls back into `gpuplan` with `_GPUPLAN_COMPLETE` set); the values it offers
come from gpuplan.cli.complete: GPU names, model presets, run ids, schedule names, config keys.
"""

from __future__ import annotations

import click

SHELLS = ("bash", "zsh", "fish")
COMPLETE_VAR = "_GPUPLAN_COMPLETE"
INSTALL = {
    "bash": 'eval "$(gpuplan completion bash)"    # in ~/.bashrc (bash 4.4 or newer)',
    "zsh": 'eval "$(gpuplan completion zsh)"     # in ~/.zshrc, after compinit',
    "fish": "gpuplan completion fish > ~/.config/fish/completions/gpuplan.fish",
}


@click.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
@click.pass_context
def completion(ctx: click.Context, shell: str) -> None:
    """Print the completion script for SHELL (bash, zsh or fish); TAB then completes commands, options, GPU
    names, model presets, run ids and schedule names.

    \b
    bash:  eval "$(gpuplan completion bash)"     (in ~/.bashrc; bash 4.4+)
    zsh:   eval "$(gpuplan completion zsh)"      (in ~/.zshrc, after compinit)
    fish:  gpuplan completion fish > ~/.config/fish/completions/gpuplan.fish
    """
    from click.shell_completion import get_completion_class

    cls = get_completion_class(shell)
    if cls is None:  # pragma: no cover - Click ships all three
        raise click.UsageError(f"no completion for {shell}")
    root = ctx.find_root().command
    click.echo(cls(root, {}, "gpuplan", COMPLETE_VAR).source())
