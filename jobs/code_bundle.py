"""The job's code, packed to travel to a cloud machine: the spec's folder as a .tar.gz, .gitignore honoured.

A `runtime: process` job on a cloud machine has nothing but the machine's image; its `command` (`python
train.py`) needs the files next to its spec. gpuplan packs that folder once per run, puts it in the run's
storage (`<storage>/<run id>/code.tar.gz`), and the boot script unpacks it before the command runs
(gpuplan.jobs.boot_checkpoints): a process job starts there (in `workdir` when that is relative), a container
gets it mounted at /gpuplan/src.

What is packed: inside a git work tree, what git would commit (`git ls-files --cached --others
--exclude-standard`: tracked and untracked files, without what .gitignore excludes); elsewhere every file but
those matched by the folder's own .gitignore (its simple patterns: names, globs, `dir/`), and never `.git/`.
Symbolic links are left out (one could point anywhere on this machine). The total size is capped
(MAX_CODE_BYTES): a checkpoint or data set in the folder would otherwise be uploaded on every launch; the refusal
names the biggest files.
"""

from __future__ import annotations

import fnmatch
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

MAX_CODE_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class CodeBundle:
    """A packed folder: the archive, how many files and how many bytes (before compression) it holds."""

    path: Path
    files: int
    size: int


def _git_files(folder: Path) -> list[str] | None:
    try:
        proc = subprocess.run(["git", "-C", str(folder), "ls-files", "-z", "--cached", "--others",
                               "--exclude-standard", "--", "."], capture_output=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None  # not a git work tree (or no git): the folder's own .gitignore then
    return [name for name in proc.stdout.decode(errors="surrogateescape").split("\0") if name]


def _ignore_patterns(folder: Path) -> list[str]:
    try:
        lines = (folder / ".gitignore").read_text(errors="replace").splitlines()
    except OSError:
        return []
    return [line.strip() for line in lines if line.strip() and not line.startswith(("#", "!"))]


def _ignored(relative: str, patterns: list[str]) -> bool:
    parts = relative.split("/")
    for pattern in patterns:
        anchored = pattern.startswith("/")
        body = pattern.strip("/")
        dir_only = pattern.endswith("/")
        candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + (0 if dir_only else 1))]
        for candidate in candidates:
            name = candidate.rsplit("/", 1)[-1]
            if fnmatch.fnmatch(candidate, body) or (not anchored and "/" not in body and fnmatch.fnmatch(name, body)):
                return True
    return False


def _walk_files(folder: Path) -> list[str]:
    patterns = _ignore_patterns(folder)
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder).as_posix()
        if relative == ".git" or relative.startswith(".git/") or path.is_symlink() or not path.is_file():
            continue
        if not _ignored(relative, patterns):
            found.append(relative)
    return found


def code_files(folder: Path) -> list[str]:
    """The files of `folder` that travel (paths relative to it), sorted."""
    names = _git_files(folder)
    if names is None:
        return _walk_files(folder)
    return sorted(n for n in names if not (folder / n).is_symlink() and (folder / n).is_file())


def bundle(folder: Path, out: Path, *, cap_bytes: int = MAX_CODE_BYTES) -> CodeBundle:
    """Pack `folder` into the .tar.gz `out`; ValueError (one line) when it is not a folder or is too big."""
    if not folder.is_dir():
        raise ValueError(f"the job's folder {folder} is not a folder")
    names = code_files(folder)
    sizes = {name: (folder / name).stat().st_size for name in names}
    total = sum(sizes.values())
    if total > cap_bytes:
        biggest = ", ".join(f"{n} ({s / 1e6:.0f} MB)" for n, s in sorted(sizes.items(), key=lambda x: -x[1])[:3])
        raise ValueError(f"the job's folder {folder} holds {total / 1e6:.0f} MB of files to ship, more than the "
                         f"{cap_bytes / 1e6:.0f} MB cap (biggest: {biggest}); list what the machine does not need "
                         "in .gitignore")
    with tarfile.open(out, "w:gz") as tar:
        for name in names:
            tar.add(folder / name, arcname=name, recursive=False)
    return CodeBundle(out, len(names), total)
