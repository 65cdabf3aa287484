"""Every ```console block of the docs (docs/**/*.md and README.md) runs, and prints what the page says.

One test per block, named by page and line (`docs/getting-started.md:42`). Blocks of a page share one fresh
GPUPLAN_HOME and SQLite database and run in page order (scripts/docsite/console_blocks.py says the convention).
A failure shows the command and a unified diff of the page's text against the real output.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from console_blocks import ConsoleBlock, PageSession, docs_pages, parse_blocks

BLOCKS = [block for page in docs_pages() for block in parse_blocks(page)]


@pytest.fixture(scope="session")
def page_sessions() -> dict[Path, PageSession]:
    return {}


@pytest.mark.parametrize("block", BLOCKS, ids=[b.test_id for b in BLOCKS])
def test_console_block(block: ConsoleBlock, page_sessions: dict[Path, PageSession],
                       tmp_path_factory: pytest.TempPathFactory) -> None:
    session = page_sessions.get(block.page)
    if session is None:
        session = PageSession(block.page, tmp_path_factory.mktemp("docs-page"), parse_blocks(block.page))
        page_sessions[block.page] = session
    assert block.commands, f"{block.test_id}: a console block without a `$ ` command"
    results = session.run_block(session.blocks.index(block))
    failures = [result.explain(block) for result in results if not result.ok]
    assert not failures, "\n\n".join(failures)
