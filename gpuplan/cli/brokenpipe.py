"""A closed stdout (`gpuplan estimate ... | head -1`) ends the process the Unix way: quietly, by SIGPIPE.

Python ignores SIGPIPE, so a write to a pipe whose reader has gone raises BrokenPipeError wherever the command
happens to be writing; Click then exits 1, and the interpreter's final flush prints "Exception ignored ...".
A Unix filter instead dies of SIGPIPE without a word and its shell sees status 141. gpuplan keeps SIGPIPE
ignored while a command runs, so a command between two steps (a launch recording its machines) still unwinds
through its own clean-up as on any error, and only at the entry point turns the broken pipe into that quiet
death. In-process (CliRunner) the group just exits with EXIT_BROKEN_PIPE.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
from collections.abc import Iterator
from typing import NoReturn

EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE  # 141, what shells report for a process killed by SIGPIPE


class OutputClosed(Exception):
    """The reader of stdout (or stderr) went away; not an OSError, so Click's own EPIPE handler (exit 1)
    does not take it."""


def output_closed() -> bool:
    """Whether stdout or stderr is a pipe with no reader left (poll reports POLLERR on such a write end).

    A BrokenPipeError can also come from a child's pipe (podman, srun); only a closed output is the user's
    `| head`. A stream without a file descriptor (a test's capture) counts as closed: nothing else there can
    raise BrokenPipeError.
    """
    for stream in (sys.stdout, sys.stderr):
        try:
            fd = stream.fileno()
        except (AttributeError, OSError, ValueError):
            return True
        poller = select.poll()
        poller.register(fd, select.POLLOUT)
        if any(events & select.POLLERR for _, events in poller.poll(0)):
            return True
    return False


@contextlib.contextmanager
def output_closed_guard() -> Iterator[None]:
    """Turn a BrokenPipeError from a closed stdout/stderr into OutputClosed; any other broken pipe stays."""
    try:
        yield
    except BrokenPipeError as exc:
        if output_closed():
            raise OutputClosed() from exc
        raise


def die_quietly() -> NoReturn:
    """Leave as a Unix filter does when its reader has gone: killed by SIGPIPE, nothing on stderr.

    Stdout is pointed at /dev/null first so no later flush (exit handlers, the interpreter's own) can raise
    again (the recipe in Python's signal module documentation).
    """
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGPIPE)
    os._exit(EXIT_BROKEN_PIPE)  # pragma: no cover - only where SIGPIPE cannot kill (not on Linux/macOS)


def flush_or_die() -> None:
    """Flush the output at the end of a command; a reader that left before the last lines is a quiet exit."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        die_quietly()
    except (OSError, ValueError):  # a closed stream: nothing left to say
        pass
