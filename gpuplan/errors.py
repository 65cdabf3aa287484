"""Errors that the CLI turns into one clear line on stderr.

`UserError` is bad input (exit status 2); every other error is unexpected (exit status 1, traceback with -v).
Provider errors live in gpuplan.providers.base because providers must not import the CLI.
"""

from __future__ import annotations


class GpuplanError(Exception):
    """Base class for errors gpuplan raises on purpose; the message is shown to the user as is."""

    exit_code = 1


class UserError(GpuplanError):
    """The user's input is wrong (a flag, a file, a name): shown as `error: ...`, exit status 2."""

    exit_code = 2


class NotFoundError(UserError):
    """A run, schedule, budget or benchmark the user named does not exist."""
