"""Fixtures shared by the e2e modules."""

from __future__ import annotations

import contextlib
import os
import random
import signal
from collections.abc import Iterator

import pytest

from support.sleepers import sleeping
from support.uihelp import Books, make_books


@pytest.fixture
def marker() -> Iterator[str]:
    """A sleep length no other process uses (support.sleepers); whatever still sleeps it at the end is killed, so
    a test that fails (or old code that leaks) leaves nothing running."""
    seconds = str(random.randint(100_000, 999_999))
    yield seconds
    for pid in sleeping(seconds):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture(scope="session")
def ui_books(tmp_path_factory: pytest.TempPathFactory) -> Books:
    """Books made by real local launches, read by the dashboard tests (HTTP and browser) of one worker."""
    folder = tmp_path_factory.mktemp("ui-books")
    return make_books(folder, f"sqlite:///{folder / 'gpuplan.db'}")
