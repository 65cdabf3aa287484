"""The one way gpuplan reads a file the user names (a job spec, the config file, a model config.json): bounded.

Every such read used to be `path.read_text()`, so `GPUPLAN_CONFIG=/dev/zero` read gigabytes, a FIFO or /proc/kmsg
blocked forever, and a 10 MB comment-only config took seconds to parse. Here:

- the file is opened non-blocking (`O_NONBLOCK`: opening a FIFO with no writer does not wait) and must be a
  regular file (`fstat`): a FIFO, a socket, a device (/dev/zero, /dev/urandom), a folder is refused at once;
- a file of the kernel's own filesystems (/proc, /sys: /proc/kmsg is a "regular file" of size 0 that blocks)
  is refused too;
- the size is capped (`max_bytes`): refused from `fstat` before reading, and the read itself stops one byte past
  the cap (a file that grows while read);
- the text must be UTF-8.
Each refusal is a `FileRefused` (a UserError: one line, exit 2), in well under a second. Growing files gpuplan
reads repeatedly (job logs, metrics) are streamed in bounded pieces instead (gpuplan.cli.follow.LogTail,
gpuplan.supervise.progress.read_records).
"""

from __future__ import annotations

import os
import stat
from typing import BinaryIO

from gpuplan.errors import UserError

KERNEL_FILESYSTEMS = ("/proc", "/sys")


class FileRefused(UserError, ValueError):
    """A file gpuplan will not read (not a regular file, too big, not UTF-8): the message says which and why."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _kernel_file(st: os.stat_result) -> bool:
    for root in KERNEL_FILESYSTEMS:
        try:
            if os.stat(root).st_dev == st.st_dev:
                return True
        except OSError:
            continue
    return False


def _open_fd(path: str | os.PathLike[str], what: str) -> int:
    """A descriptor opened without blocking (a FIFO must not hang us) or taking a terminal; FileNotFoundError as
    is, any other refusal as FileRefused naming `what`."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise FileRefused(f"cannot read {what} {path}: {exc.strerror or exc}") from exc


def open_regular(path: str | os.PathLike[str], what: str) -> BinaryIO:
    """A binary file object for the regular file `path`, for streaming a file that grows (a job's log, its
    metrics): the job owns its run folder and could put a FIFO there, which must not hang `status` or the watch
    loop that enforces the caps. FileRefused for anything but a regular file; FileNotFoundError as is."""
    fd = _open_fd(path, what)
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or _kernel_file(st):
        os.close(fd)
        raise FileRefused(f"{what} {path} is {_kind(st.st_mode)}, not a regular file")
    return os.fdopen(fd, "rb")


def read_bytes(path: str | os.PathLike[str], what: str, max_bytes: int) -> bytes:
    """The bytes of the regular file `path`, at most `max_bytes`; FileRefused (naming `what`) otherwise.
    FileNotFoundError is left to the caller, which knows how to say that a file is missing."""
    fd = _open_fd(path, what)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{what} {path} is {_kind(st.st_mode)}, not a regular file")
        if _kernel_file(st):
            raise FileRefused(f"{what} {path} is a file of the kernel (/proc, /sys), not a regular file")
        if st.st_size > max_bytes:
            raise FileRefused(f"{what} {path} is over {_size(max_bytes)} ({_size(st.st_size)}), more than such a "
                              "file ever needs")
        chunks, total = [], 0
        while total <= max_bytes:
            try:
                chunk = os.read(fd, min(1 << 20, max_bytes + 1 - total))
            except BlockingIOError as exc:
                raise FileRefused(f"{what} {path} would block (not a regular file)") from exc
            except OSError as exc:
                raise FileRefused(f"cannot read {what} {path}: {exc.strerror or exc}") from exc
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > max_bytes:
            raise FileRefused(f"{what} {path} is over {_size(max_bytes)}, more than such a file ever needs")
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], what: str, max_bytes: int) -> str:
    """`read_bytes` decoded as UTF-8 (FileRefused when it is not)."""
    raw = read_bytes(path, what, max_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileRefused(f"cannot read {what} {path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def _size(n: int) -> str:
    if n >= 1 << 20:
        return f"{n / (1 << 20):.1f} MB"
    if n >= 1 << 10:
        return f"{n // 1024} KB"
    return f"{n} bytes"



MAX_DEPTH = 64  # a config file nests 2 levels, a config.json 3: more is a bomb, not a file


def check_nesting(text: str, what: str, *, comment: str | None = None, max_depth: int = MAX_DEPTH) -> None:
    """Refuse brackets (`[`, `{`) open deeper than `max_depth`, in one linear pass that skips quoted text (and
    `comment`-to-end-of-line): the TOML and JSON parsers recurse per level, and 100,000 levels overflowed the stack
    (RecursionError, shown as a crash)."""
    depth, quote, in_comment, escaped = 0, "", False, False
    for char in text:
        if in_comment:
            in_comment = char != "\n"
        elif quote:
            if escaped:
                escaped = False
            elif char == "\\" and quote == '"':
                escaped = True
            elif char == quote or char == "\n":
                quote = ""
        elif char in "'\"":
            quote = char
        elif comment is not None and char == comment:
            in_comment = True
        elif char in "[{":
            depth += 1
            if depth > max_depth:
                raise FileRefused(f"{what} nests deeper than {max_depth} levels")
        elif char in "]}":
            depth = max(depth - 1, 0)
