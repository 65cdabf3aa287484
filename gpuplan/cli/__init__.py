"""The `gpuplan` command group.

Two jobs only: load each subcommand lazily (so `gpuplan --help` imports click and nothing heavy), and turn
errors into one clear line. Each command lives in its own module under gpuplan.cli.commands and is registered in
COMMANDS below; a command module imports what it needs (SQLAlchemy, pandas, boto3, torch) inside its body.
"""

from __future__ import annotations

from gpuplan.cli.interrupt import EXIT_INTERRUPTED, during_start_up

during_start_up()  # before the imports below: a Ctrl-C during them is one line and exit 130, not a traceback

import importlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

import click  # noqa: E402

from gpuplan import __version__  # noqa: E402
from gpuplan.cli.brokenpipe import EXIT_BROKEN_PIPE, OutputClosed, output_closed_guard  # noqa: E402
from gpuplan.cli.context import AppContext  # noqa: E402

# name -> ("module:attribute", one-line help shown by `gpuplan --help` without importing the module).
COMMANDS: dict[str, tuple[str, str]] = {
    "bench": ("gpuplan.cli.commands.bench:bench", "Measure training throughput with real PyTorch steps; list benches."),
    "budget": ("gpuplan.cli.commands.budget:budget",
               "Spending caps per month/week/total that launch and watch enforce."),
    "calibrate": ("gpuplan.cli.commands.calibrate:calibrate", "Show the MFU learned from finished runs."),
    "checkpoints": ("gpuplan.cli.commands.checkpoints:checkpoints",
                    "List (or download) the checkpoints a run kept in its storage."),
    "catalog": ("gpuplan.cli.commands.catalog:catalog", "Refresh the GPU price catalog from the clouds' price APIs."),
    "completion": ("gpuplan.cli.commands.completion:completion",
                   "Print the shell completion script for bash, zsh or fish."),
    "config": ("gpuplan.cli.commands.config:config",
               "Show, check and set the config file (defaults, provider settings)."),
    "convert": ("gpuplan.cli.commands.convert:convert",
                "Write the gpuplan job spec of a SkyPilot task or dstack task file."),
    "db": ("gpuplan.cli.commands.db:db", "Inspect and upgrade the gpuplan database."),
    "estimate": ("gpuplan.cli.commands.estimate:estimate_command", "Estimate FLOPs, memory, hours of a training job."),
    "exec": ("gpuplan.cli.commands.attach:exec_command",
             "Run a command on a live run's machine (container or run folder)."),
    "gpus": ("gpuplan.cli.commands.gpus:gpus",
             "List GPUs: memory, bandwidth, TFLOP/s, clouds and the cheapest $/GPU-hour."),
    "launch": ("gpuplan.cli.commands.launch:launch", "Launch a job spec and follow it to the end."),
    "logs": ("gpuplan.cli.commands.logs:logs", "Print (or follow) a run's job log."),
    "models": ("gpuplan.cli.commands.models:models", "List the model presets with their sizes and shapes."),
    "plan": ("gpuplan.cli.commands.plan:plan_command", "Rank GPU offers by what the whole job costs."),
    "prices": ("gpuplan.cli.commands.prices:prices", "Compare GPU offers across clouds and regions."),
    "reconcile": ("gpuplan.cli.commands.reconcile:reconcile_cmd", "Find machines the books do not know about."),
    "report": ("gpuplan.cli.commands.report:report", "Spend by period/project/cloud/GPU, estimate vs actual, plots."),
    "runs": ("gpuplan.cli.commands.runs:runs", "List runs: state, machines, GPU, cost, throughput, reason."),
    "schedule": ("gpuplan.cli.commands.schedule:schedule", "Run a job spec on a cron schedule."),
    "scheduler": ("gpuplan.cli.commands.scheduler:scheduler", "Fire due schedules: the loop (run) or one tick."),
    "setup": ("gpuplan.cli.commands.setup:setup", "Check or create what a cloud account needs (AWS instance profile)."),
    "status": ("gpuplan.cli.commands.status:status",
               "Live runs and the last ended (one line each), or one run in full."),
    "ssh": ("gpuplan.cli.commands.attach:ssh", "Open a shell on a live run's machine (SSM, IAP, srun, local)."),
    "stop": ("gpuplan.cli.commands.stop:stop", "Stop a run and terminate its machines."),
    "ui": ("gpuplan.ui.command:ui", "A local web dashboard of runs, the books, budgets, accuracy and plans."),
    "watch": ("gpuplan.cli.commands.watch:watch", "Enforce caps and settle detached runs (loop or --once)."),
}


class LazyGroup(click.Group):
    """A click group whose subcommands are imported only when invoked (Click's documented lazy pattern)."""

    def __init__(self, *args: Any, lazy: dict[str, tuple[str, str]] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy:
            target, _ = self.lazy[cmd_name]
            module_name, attr = target.split(":")
            command = getattr(importlib.import_module(module_name), attr)
            if not isinstance(command, click.Command):  # pragma: no cover - a registry typo
                raise TypeError(f"{target} is not a click command")
            return command
        return super().get_command(ctx, cmd_name)

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None,
                     **extra: Any) -> click.Context:
        """Parse the arguments (`--help` and `--version` print here); see invoke about a closed output."""
        with output_closed_guard():
            return super().make_context(info_name, args, parent=parent, **extra)

    def invoke(self, ctx: click.Context) -> Any:
        """Run the command; a broken pipe on our own output becomes OutputClosed (see gpuplan.cli.brokenpipe)."""
        with output_closed_guard():
            return super().invoke(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """List the commands from the registry's help strings, without importing their modules."""
        rows = [(name, help_text) for name, (_, help_text) in sorted(self.lazy.items())]
        rows += [
            (name, cmd.get_short_help_str())
            for name, cmd in sorted(self.commands.items())
            if name not in self.lazy and not cmd.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(sorted(rows))

    # click types Command.main as two overloads (NoReturn when standalone); one wrapper cannot restate them.
    def main(self, args: Any = None, prog_name: str | None = None, **extra: Any) -> Any:  # type: ignore[override]
        """Run the CLI; map every error to `error: ...` on stderr and a documented exit status.

        Exit status: 0 success, 1 failure or unexpected error, 2 bad input (usage, UserError), 3 the user
        declined `launch`'s prompt (nothing started), 130 Ctrl-C,
        141 (killed by SIGPIPE, from the console script) when the reader of the output went away.
        """
        argv = list(sys.argv[1:] if args is None else args)
        if any("\x00" in str(arg) for arg in argv):  # no exec can pass one; a caller in-process could
            _fail("an argument contains a NUL character (\\0), which no file name or value can hold", 2)
        verbose = _wants_verbose(argv)
        extra.pop("standalone_mode", None)
        try:
            rv = super().main(argv, prog_name=prog_name or "gpuplan", standalone_mode=False, **extra)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.UsageError as exc:
            _fail(_usage_message(exc), 2)
        except click.Abort as exc:
            # Click turns Ctrl-C into Abort (keeping the KeyboardInterrupt as its cause): still exit 130.
            if isinstance(exc.__cause__, KeyboardInterrupt):
                _fail("interrupted", EXIT_INTERRUPTED)
            _fail("aborted", 1)
        except KeyboardInterrupt:
            _fail("interrupted", EXIT_INTERRUPTED)
        except _user_error_types() as exc:
            if verbose:
                traceback.print_exc()
            _print_detail(exc)
            _fail(str(exc), getattr(exc, "exit_code", 2))
        except click.ClickException as exc:
            _fail(exc.format_message(), exc.exit_code)
        except OutputClosed:
            sys.exit(EXIT_BROKEN_PIPE)  # the entry point turns this into a quiet SIGPIPE death
        except Exception as exc:
            from gpuplan.cli.db_errors import database_problem

            if verbose:
                traceback.print_exc()
            problem = database_problem(exc)
            if problem is not None:
                _fail(problem, 2)
            if verbose:
                _fail(f"unexpected {type(exc).__name__}: {exc} (a bug in gpuplan)", 1)
            _fail(f"unexpected {type(exc).__name__}: {exc} (a bug in gpuplan: run with -v for the traceback)", 1)
        if isinstance(rv, int) and rv:
            sys.exit(rv)
        sys.exit(0)


def _user_error_types() -> tuple[type[BaseException], ...]:
    """Exceptions that are the user's input being wrong, or a provider saying no, never a crash."""
    from gpuplan.errors import GpuplanError

    types: list[type[BaseException]] = [GpuplanError]
    provider_base = sys.modules.get("gpuplan.providers.base")
    if provider_base is not None:
        types.append(provider_base.ProviderError)
    return tuple(types)


def _usage_message(exc: click.UsageError) -> str:
    """Click's message on one line: for a missing Choice option it lists the choices on tab-indented lines
    ("Choose from:\n\tmonth,\n\tweek"), and the one-line error would otherwise end at "Choose from:"."""
    no_args = getattr(click.exceptions, "NoArgsIsHelpError", ())  # Click >= 8.2: a bare group is an error
    if isinstance(exc, no_args) and exc.ctx is not None and isinstance(exc.ctx.command, click.Group):
        # Its message is the whole help page; one line naming the choices serves better.
        names = exc.ctx.command.list_commands(exc.ctx)
        message = f"missing command: one of {', '.join(names)}"
    else:
        message = " ".join(exc.format_message().split())
    if exc.ctx is not None:
        message += f" (see '{exc.ctx.command_path} --help')"
    return message


def _wants_verbose(argv: list[str]) -> bool:
    return bool(os.environ.get("GPUPLAN_DEBUG")) or any(a in ("-v", "--verbose") for a in argv)


def _print_detail(exc: BaseException) -> None:
    """Some errors carry a multi-line explanation (failover's table of attempts): print it before the one line."""
    detail = getattr(exc, "detail", None)
    if isinstance(detail, str) and detail.strip():
        click.echo(detail.rstrip(), err=True)


def _fail(message: str, code: int) -> None:
    from gpuplan.cli.inert import inert

    first_line = message.strip().splitlines()[0] if message.strip() else "failed"
    click.echo(f"error: {inert(first_line)}", err=True)
    sys.exit(code)


@click.group(
    cls=LazyGroup,
    lazy=COMMANDS,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
)
@click.option(
    "--db",
    "db_url",
    envvar="GPUPLAN_DB",
    metavar="URL",
    help="SQLAlchemy database URL (env GPUPLAN_DB). Default: a SQLite file in the XDG data dir.",
)
@click.option("-v", "--verbose", is_flag=True, help="Show debug logs and full tracebacks.")
@click.version_option(__version__, "--version", prog_name="gpuplan")
@click.pass_context
def cli(ctx: click.Context, db_url: str | None, verbose: bool) -> None:
    """Plan, price, launch and account for PyTorch training jobs on rented GPUs.

    Estimate how long and how much a training job costs from the model's size and a measured throughput,
    compare GPU offers across clouds by total job cost, launch the job, tear it down, and keep the books.
    """
    if verbose:
        _debug_logging()
    ctx.obj = AppContext(db_url=db_url, verbose=verbose)
    if ctx.invoked_subcommand not in (None, "config", "completion"):
        # Every command checks the config file first: a typo (`[provider.aws]`, `regoins`) is one line and
        # exit 2 whatever the command, never a setting silently ignored. `config` itself is exempt, so a broken
        # file can still be located and fixed with it.
        from gpuplan.config import load_config

        tables = sorted(load_config().get("providers", {}))
        if tables:  # a typo'd provider table too (the settings in it are checked where the provider is built)
            from gpuplan.providers.registry import check_provider_tables

            check_provider_tables(tables)


# Cloud SDKs log whole API requests at DEBUG: botocore logs every parameter of a call, so an SSM PutParameter's
# SecureString value (a job's secret) would reach the terminal. `-v` is gpuplan's debug output, not theirs.
QUIET_LIBRARIES = ("botocore", "boto3", "s3transfer", "urllib3", "google", "grpc", "requests")


def _debug_logging() -> None:
    """`-v`: gpuplan's own debug records; the SDKs' records from INFO only (no request bodies, so no secrets)."""
    import logging

    logging.basicConfig(level=logging.DEBUG, format="%(levelname)s %(name)s: %(message)s")
    for name in QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.INFO)


def main() -> None:
    """Console-script entry point (and `python -m gpuplan`): the CLI in a process of its own.

    Ctrl-C (gpuplan.cli.interrupt): later Ctrl-Cs are ignored once the first has stopped the command, and an
    interrupted command always ends with exit status 130, whatever the interpreter would do at its exit.
    """
    from gpuplan.cli import brokenpipe, interrupt

    interrupt.ignore_repeats()
    try:
        cli.main()
    except SystemExit as exc:
        try:
            if exc.code == interrupt.EXIT_INTERRUPTED:
                interrupt.exit_interrupted()
            if exc.code == EXIT_BROKEN_PIPE:
                brokenpipe.die_quietly()
            brokenpipe.flush_or_die()  # the last buffered lines, while a broken pipe can still end quietly
            interrupt.command_done()
        except KeyboardInterrupt:  # a Ctrl-C in the instant between the command's end and command_done
            interrupt.exit_interrupted()
        raise
    except KeyboardInterrupt:  # before or after the group's own handler could take it
        click.echo("error: interrupted", err=True)
        interrupt.exit_interrupted()
