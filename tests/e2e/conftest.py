"""Fixtures shared by the e2e modules."""

from __future__ import annotations

import pytest

from support.uihelp import Books, make_books


@pytest.fixture(scope="session")
def ui_books(tmp_path_factory: pytest.TempPathFactory) -> Books:
    """Books made by real local launches, read by the dashboard tests (HTTP and browser) of one worker."""
    folder = tmp_path_factory.mktemp("ui-books")
    return make_books(folder, f"sqlite:///{folder / 'gpuplan.db'}")
