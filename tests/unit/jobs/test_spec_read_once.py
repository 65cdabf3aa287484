"""A job spec is read once: the text `launch` records is the text it validated (issue 37 item 5).

Reads are observed with a Python audit hook on the `open` event (raised just before the file is opened), which
also lets a test play the other process that writes the file between two reads.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from gpuplan.jobs.foreign import load_job
from gpuplan.jobs.spec import SpecError

from support.clihelp import run_cli

SPEC = "name: once\ncommand: echo hi\n"

# An audit hook cannot be removed: one hook for the process, calling whichever watcher the running test set.
_WATCHERS: list[Callable[[str], None]] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _WATCHERS and args and isinstance(args[0], (str, Path)):
        _WATCHERS[-1](str(args[0]))


sys.addaudithook(_audit)


@pytest.fixture
def opens_of() -> Iterator[Callable[[Path, Callable[[int], None] | None], list[str]]]:
    """opens_of(path, on_open): the list the opens of `path` are appended to; on_open(n) runs before the n-th."""
    def watch(path: Path, on_open: Callable[[int], None] | None = None) -> list[str]:
        seen: list[str] = []

        def watcher(name: str) -> None:
            if name == str(path):
                seen.append(name)
                if on_open is not None:
                    _WATCHERS.append(lambda _name: None)  # the watcher's own writes are not the code's reads
                    try:
                        on_open(len(seen))
                    finally:
                        _WATCHERS.pop()

        _WATCHERS.append(watcher)
        return seen

    yield watch
    _WATCHERS.clear()


def test_a_spec_that_appears_after_the_read_is_not_picked_up_with_an_empty_text(
        tmp_path: Path, opens_of: Callable[..., list[str]]) -> None:
    # The file is missing at the first read and written (by "another process") just before any second read. The
    # old load_job read it a second time to word the error, validated the new file and returned it with the
    # recorded text "", so a launch would run one spec and record another.
    path = tmp_path / "job.yaml"

    def appear(n: int) -> None:
        if n == 2:
            path.write_text(SPEC)

    seen = opens_of(path, appear)
    with pytest.raises(SpecError, match="does not exist"):
        load_job(path)
    assert len(seen) == 1


def test_load_job_returns_the_text_it_validated_from_one_read(tmp_path: Path,
                                                               opens_of: Callable[..., list[str]]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    seen = opens_of(path)
    loaded = load_job(path)
    assert len(seen) == 1
    assert loaded.text == SPEC and loaded.spec.name == "once"


def test_launch_reads_the_spec_file_once(tmp_path: Path, opens_of: Callable[..., list[str]]) -> None:
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    seen = opens_of(path)
    result = run_cli("launch", str(path), "--provider", "local", "--dry-run", "--allow-cpu")
    assert result.exit_code == 0, result.stderr
    assert len(seen) == 1
