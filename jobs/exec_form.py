"""The job's command as the program that receives the stop signal: `exec` where the shell can step aside, and a
forwarder where it cannot.

Why: every stop gpuplan sends (`gpuplan stop`, the max_hours fail-safe, a spot interruption notice) is a SIGTERM
that the job must see to save a checkpoint. A job runs as `/bin/sh -c TEXT`; Debian's dash does not replace itself
with the last command of `-c` text (it forks and waits), so a SIGTERM that reaches only the shell kills the shell
and never reaches `python train.py`.

- A simple command (`python train.py --lr 3e-4`, `torchrun ...`, a list `command:`) gets `exec ` in front: the
  shell becomes the program, so the program is the process every signal goes to.
- Anything else (`run:` scripts, `a && b`, pipes) stays a script. A process job leads its own process group, and
  the stop goes to the whole group (gpuplan.jobs.runner, the boot script's `setsid`). In a container the script
  runs under `forwarding_argv`: a shell that passes SIGTERM/SIGINT to every process of the container with
  `kill -SIG -1` ("all processes for which the calling process has permission to send signals, except for
  process 1 (init)", kill(2): https://man7.org/linux/man-pages/man2/kill.2.html), and waits until all of them
  are gone, so the container's init (below) does not end the container while the job is still saving.

Containers always run with an init as PID 1 (`--init`: docker's tini, podman's catatonit), because the kernel
drops a signal sent to a namespace's PID 1 unless that process installed a handler for it, and a shell or a
Python program does not: "Run an init inside the container that forwards signals and reaps processes"
(https://docs.docker.com/reference/cli/docker/container/run/#init;
https://docs.podman.io/en/latest/markdown/podman-run.1.html#init). The init forwards the runtime's SIGTERM to its
child: the exec'd program, or the forwarder.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence

SHELL = "/bin/sh"
# Words that cannot follow `exec`: shell syntax and built-ins that only make sense in the shell itself.
_NOT_A_PROGRAM = frozenset({
    "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "function", "if", "in", "select",
    "then", "until", "while", "time", ".", ":", "alias", "bg", "break", "cd", "continue", "eval", "exec", "exit",
    "export", "fg", "jobs", "local", "read", "readonly", "return", "set", "shift", "source", "trap", "ulimit",
    "umask", "unalias", "unset", "wait",
})
_OPERATOR_CHARS = set("();<>|&")
# One leading `NAME=value` of a command (the value unquoted, '...' or "..."), with the blanks before it.
_ASSIGNMENT = re.compile(r"""\s*[A-Za-z_][A-Za-z0-9_]*=(?:'[^']*'|"(?:[^"\\]|\\.)*"|\\.|[^\s'"\\])*""")

# The forwarder: the job's script ($1) in a child shell; SIGTERM/SIGINT go to every process of the container but
# init and this shell; it ends with the script's status once nothing of the job is left. Fixed text, no user value.
FORWARDER = (
    'trap \'kill -TERM -1 2>/dev/null\' TERM; trap \'kill -INT -1 2>/dev/null\' INT; '
    f'{SHELL} -c "$1" & job=$!; '
    'while :; do wait "$job"; status=$?; kill -0 "$job" 2>/dev/null || break; done; '
    'while kill -0 -1 2>/dev/null; do sleep 1; done; exit "$status"'
)


def exec_script(script: str) -> str:
    """`script` with `exec` before its command when it is one simple command (leading assignments stay in front:
    `A=1 exec prog` passes A to prog); any other script unchanged."""
    if "\n" in script or script.lstrip().startswith("exec "):
        return script
    lexer = shlex.shlex(script, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        words = list(lexer)
    except ValueError:  # unbalanced quotes: the shell reports it, not us
        return script
    if not words or any(set(w) <= _OPERATOR_CHARS for w in words):
        return script
    assignments = 0
    for word in words:
        name, eq, _ = word.partition("=")
        if not eq or not name.isidentifier():
            break
        assignments += 1
    if assignments == len(words) or words[assignments] in _NOT_A_PROGRAM:
        return script
    # Insert `exec` in the original text (quoting kept as the user wrote it): after the leading assignments.
    end = 0
    for _ in range(assignments):
        match = _ASSIGNMENT.match(script, end)
        if match is None:  # quoting shlex read but this pattern does not: leave the script as it is
            return script
        end = match.end()
    return f"{script[:end]} exec {script[end:].lstrip()}" if assignments else f"exec {script.lstrip()}"


def exec_argv(argv: Sequence[str]) -> list[str]:
    """A `/bin/sh -c TEXT ...` argv with TEXT in exec form; any other argv unchanged."""
    if len(argv) >= 3 and argv[0] == SHELL and argv[1] == "-c":
        return [SHELL, "-c", exec_script(argv[2]), *argv[3:]]
    return list(argv)


def forwarding_argv(argv: Sequence[str]) -> list[str]:
    """What a container runs for `argv`: a `/bin/sh -c` script that is not one exec'd command runs under the
    forwarder (see the module doc); everything else as it is."""
    if len(argv) == 3 and argv[0] == SHELL and argv[1] == "-c" and not argv[2].lstrip().startswith("exec "):
        return [SHELL, "-c", FORWARDER, "sh", argv[2]]
    return list(argv)
