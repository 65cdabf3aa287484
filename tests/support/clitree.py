"""The CLI's command tree, walked from `gpuplan.cli.cli` through the LazyGroup registry: the sweep
(tests/unit/cli/test_cli_sweep.py) and the option fuzz (tests/fuzz/) cover every command, new ones included."""

from __future__ import annotations

import click

from gpuplan.cli import cli

Path_ = tuple[str, ...]


def command_tree() -> dict[Path_, click.Command]:
    """Every command and subcommand, by its path under `gpuplan` (the root is the empty path)."""
    found: dict[Path_, click.Command] = {}

    def walk(cmd: click.Command, path: Path_, parent: click.Context | None) -> None:
        found[path] = cmd
        if isinstance(cmd, click.Group):
            ctx = click.Context(cmd, info_name=path[-1] if path else "gpuplan", parent=parent)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                assert sub is not None, f"{' '.join((*path, name))} is listed but cannot be loaded"
                walk(sub, (*path, name), ctx)

    walk(cli, (), None)
    return found
