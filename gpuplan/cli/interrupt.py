"""Ctrl-C for the `gpuplan` process: the first one stops the command, and the process always exits 130.

Two things in CPython get in the way of "one line, exit status 130" (the documented contract, gpuplan.cli):

- A KeyboardInterrupt that leaves code compiled from a string (`exec(text)`: dataclasses and namedtuple build
  their methods that way, so a Ctrl-C during an import often does: torch imports modules lazily during a
  bench's first steps) sets the interpreter's "unhandled KeyboardInterrupt" flag, even when gpuplan then catches
  it. Under `python -m gpuplan` the interpreter, after exiting with our SystemExit(130), sees that flag and
  kills itself with SIGINT (a parent process sees status -2, not 130). CPython 3.8 to 3.13 all do it.
- After the first Ctrl-C, the interpreter's shutdown (torch's takes seconds) restores SIGINT's default action:
  a second Ctrl-C, pressed because nothing seems to happen, kills the process by signal, or earlier, replaces
  the handled interrupt with a traceback.

So the process entry point (gpuplan.cli.main, never the in-process CliRunner) installs `ignore_repeats`: the
first SIGINT raises KeyboardInterrupt as usual, later ones are ignored while the command unwinds (its database
sessions roll back or commit as on any exception; SIGTERM and SIGQUIT still end a stuck process). And an
interrupted command ends with `exit_interrupted`: the exit handlers run as at a normal exit, the output is
flushed, and the process leaves with os._exit(130), which no interpreter flag can turn into a signal.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys
import threading
from types import FrameType
from typing import NoReturn

from gpuplan import interrupted_at_start

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


def during_start_up() -> None:
    """Ctrl-C while the CLI's own modules are still importing (click alone takes ~0.1 s): one line and exit 130 at
    once, not a KeyboardInterrupt traceback from inside an import (nothing has been started or opened yet, so
    there is nothing to unwind). Only in the `gpuplan` process itself (`gpuplan ...` or `python -m gpuplan`): a
    program or test that imports gpuplan.cli keeps its own Ctrl-C. `ignore_repeats` takes over in main()."""
    if threading.current_thread() is not threading.main_thread() or not _is_cli_process():
        return
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, interrupted_at_start)


def _is_cli_process() -> bool:
    argv0 = sys.argv[0] if sys.argv else ""
    return os.path.basename(argv0) == "gpuplan" or argv0.endswith(os.path.join("gpuplan", "__main__.py"))


def ignore_repeats() -> None:
    """Let the first SIGINT raise KeyboardInterrupt and ignore the ones after it.

    Only when Python's own handler is installed and we are on the main thread: a SIGINT that was ignored when
    the process started (a background job) stays ignored, and a handler someone else set is left alone.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGINT) in (signal.default_int_handler, interrupted_at_start):
        signal.signal(signal.SIGINT, _first_interrupt)


def _first_interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is stopping already
    raise KeyboardInterrupt


def command_done() -> None:
    """The command is over and the process is about to exit: from here a Ctrl-C is ignored.

    At its shutdown the interpreter resets a signal handled by a Python function (ours) to the default action, so
    a Ctrl-C in the last instants (say, just as `gpuplan runs` finished) killed the process by the signal (status
    -2, no message); an ignored signal is left ignored. The command's outcome stands."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) in (
            _first_interrupt, interrupted_at_start):
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def exit_interrupted() -> NoReturn:
    """End the process with status 130 after the exit handlers have run and the output is flushed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    atexit._run_exitfuncs()  # what a normal exit runs (logging's flush, tempfile's clean-up, ...)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken pipe must not turn 130 into a traceback
            stream.flush()
    os._exit(EXIT_INTERRUPTED)
