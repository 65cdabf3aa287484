"""The CLI reference page, generated from the Click commands themselves (never a hand-written copy).

The `gpuplan` group is lazy (gpuplan.cli registers each command by name and imports its module on use), so the
walk goes through the group's own `list_commands`/`get_command`, the same path `gpuplan CMD --help` takes: a
command or option added to the code appears here at the next `make docs` without anyone writing it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import click


@dataclass(frozen=True)
class CommandEntry:
    """One command of the tree: its full path (`gpuplan budget set`), the Click command and its context."""

    path: tuple[str, ...]
    command: click.Command
    context: click.Context

    @property
    def name(self) -> str:
        return " ".join(self.path)

    @property
    def anchor(self) -> str:
        return "-".join(self.path)


def root_command() -> click.Group:
    from gpuplan.cli import cli

    return cli


def walk_commands(root: click.Command | None = None) -> Iterator[CommandEntry]:
    """Every command and subcommand, depth first, in the order `--help` lists them (hidden ones left out)."""
    root = root or root_command()
    yield from _walk(root, click.Context(root, info_name="gpuplan", **root.context_settings), ("gpuplan",))


def _walk(command: click.Command, ctx: click.Context, path: tuple[str, ...]) -> Iterator[CommandEntry]:
    yield CommandEntry(path, command, ctx)
    if isinstance(command, click.Group):
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is None or sub.hidden:
                continue
            # The command's own context settings (`-h` as well as `--help`), as `gpuplan CMD --help` builds it.
            sub_ctx = click.Context(sub, info_name=name, parent=ctx, **sub.context_settings)
            yield from _walk(sub, sub_ctx, (*path, name))


def _cell(text: str) -> str:
    """Text for one Markdown table cell: one line, pipes escaped."""
    return " ".join(text.split()).replace("|", "\\|")


def _paragraphs(text: str) -> str:
    """A Click help text as Markdown: `\\b` paragraphs (Click's "do not rewrap") become text blocks."""
    out: list[str] = []
    import inspect

    for para in inspect.cleandoc(text).split("\n\n"):
        if para.startswith("\b"):
            out.append("```text\n" + para.lstrip("\b").strip("\n") + "\n```")
        else:
            out.append(" ".join(para.split()).replace("<", "&lt;"))
    return "\n\n".join(out)


def _param_type(param: click.Parameter, ctx: click.Context) -> str:
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return "flag"
    if isinstance(param.type, click.Choice):
        return " \\| ".join(f"`{c}`" for c in param.type.choices)
    metavar = param.make_metavar(ctx) if _takes_ctx(param) else param.make_metavar()  # type: ignore[call-arg]
    return f"`{metavar}`"


def _takes_ctx(param: click.Parameter) -> bool:
    import inspect

    return "ctx" in inspect.signature(param.make_metavar).parameters


def _default(param: click.Parameter) -> str:
    if isinstance(param, click.Option) and param.is_flag and not param.secondary_opts:
        return ""
    default = param.default
    if "UNSET" in repr(default):  # Click >= 8.2 marks "no default" with a sentinel
        return ""
    if callable(default) or default is None or default == () or (isinstance(default, str) and not default):
        return ""
    if isinstance(param, click.Option) and param.secondary_opts and isinstance(default, bool):
        return f"`{param.opts[0] if default else param.secondary_opts[0]}`"
    return f"`{default}`"


def _option_rows(entry: CommandEntry) -> list[str]:
    rows = []
    for param in entry.command.get_params(entry.context):
        if isinstance(param, click.Argument):
            names = f"`{param.human_readable_name}`"
            help_text = "argument" + (" (required)" if param.required else "")
        elif isinstance(param, click.Option):
            if param.hidden:
                continue
            names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
            help_text = param.help or ""
            if param.required:
                help_text += " (required)"
            if param.envvar and str(param.envvar) not in help_text:
                help_text += f" (env `{param.envvar}`)"
        else:  # pragma: no cover - Click has only options and arguments
            continue
        rows.append(f"| {names} | {_param_type(param, entry.context)} | {_default(param)} | {_cell(help_text)} |")
    return rows


def render_command(entry: CommandEntry) -> str:
    depth = min(len(entry.path) + 1, 4)
    lines = [f"{'#' * depth} `{entry.name}` {{ #{entry.anchor} }}", ""]
    usage = " ".join(entry.command.collect_usage_pieces(entry.context))
    lines += ["```text", f"Usage: {entry.context.command_path} {usage}".rstrip(), "```", ""]
    if entry.command.help:
        lines += [_paragraphs(entry.command.help), ""]
    rows = _option_rows(entry)
    if rows:
        lines += ["| option | takes | default | what it does |", "| --- | --- | --- | --- |", *rows, ""]
    if isinstance(entry.command, click.Group):
        subs = [(name, entry.command.get_command(entry.context, name))
                for name in entry.command.list_commands(entry.context)]
        lines += ["Subcommands:", ""]
        lines += [f"- [`{entry.name} {name}`](#{entry.anchor}-{name}): {_cell(sub.get_short_help_str(100))}"
                  for name, sub in subs if sub is not None and not sub.hidden]
        lines.append("")
    return "\n".join(lines)


def render_cli_reference() -> str:
    """The whole page: every command, subcommand and option of `gpuplan`."""
    entries = list(walk_commands())
    head = [
        "# CLI reference",
        "",
        "Generated from the Click commands at build time (`scripts/docsite/cli_reference.py`): every command,",
        "subcommand and option, with the help text `gpuplan COMMAND --help` prints. Every command that prints",
        "data takes `--json`; bad input is one line `error: ...` on stderr and exit status 2",
        "(see [Troubleshooting](../troubleshooting.md)).",
        "",
    ]
    return "\n".join(head + [render_command(e) for e in entries])
