"""The exit status of a remote command whose tool does not pass it back: read from a marker line in its output.

`gpuplan exec` over AWS Session Manager runs `sh -c LINE; echo MARKER=$?` on the machine (gpuplan.providers.
attach_base.reporting_status); the session's output is forwarded here line by line as it comes, the marker line
left out, and its status returned. The marker is random per call, so a command cannot print a fake one.
"""

from __future__ import annotations

import re
from typing import IO


def forward_with_status(stream: IO[bytes], out: IO[bytes], marker: str) -> int | None:
    """Copy `stream` to `out` until it ends; the status after `MARKER=`, or None when no marker line came (the
    session ended before the command did). Text before the marker on its line (output without a final newline)
    is kept."""
    pattern = re.compile(re.escape(marker.encode()) + rb"=(\d+)\r?\n?$")
    status: int | None = None
    for line in iter(stream.readline, b""):
        found = pattern.search(line)
        if found:
            status = int(found.group(1))
            line = line[:found.start()]
        if line:
            out.write(line)
            out.flush()
    return status
