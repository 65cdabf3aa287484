"""Every ```console block of the docs (docs/**/*.md and README.md) runs, and prints what the page says.

One test per block, named by page and line (`docs/getting-started.md:42`). Blocks of a page share one fresh
GPUPLAN_HOME and SQLite database and run in page order (scripts/docsite/console_blocks.py says the convention).
A failure shows the command and a unified diff of the page's text against the real output.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from console_blocks import ConsoleBlock, PageSession, docs_pages, page_environments, parse_blocks, unexecuted_examples
from console_services import ConsoleServices, ServiceUnavailable

REPO = Path(__file__).resolve().parents[2]
BLOCKS = [block for page in docs_pages() for block in parse_blocks(page)]


@pytest.fixture(scope="session")
def page_sessions() -> dict[Path, PageSession]:
    return {}


@pytest.fixture(scope="session")
def page_services() -> Iterator[ConsoleServices]:
    """The services pages ask for (`<!-- console-env: NAME -->`), on 127.0.0.1, stopped at the end."""
    services = ConsoleServices()
    yield services
    services.stop_all()


@pytest.mark.parametrize("block", BLOCKS, ids=[b.test_id for b in BLOCKS])
def test_console_block(block: ConsoleBlock, page_sessions: dict[Path, PageSession],
                       page_services: ConsoleServices,
                       tmp_path_factory: pytest.TempPathFactory) -> None:
    session = page_sessions.get(block.page)
    if session is None:
        session = PageSession(block.page, tmp_path_factory.mktemp("docs-page"), parse_blocks(block.page))
        page_sessions[block.page] = session
        for name in page_environments(block.page):
            assert name in page_services.names(), f"{block.page}: no console-env {name!r}"
            try:
                session.extra_env.update(page_services.start(name, session.env()))
            except ServiceUnavailable as absent:
                session.unavailable = f"console-env {name}: {absent}"
                break
    if session.unavailable:
        pytest.skip(session.unavailable)
    assert block.commands, f"{block.test_id}: a console block without a `$ ` command"
    results = session.run_block(session.blocks.index(block))
    failures = [result.explain(block) for result in results if not result.ok]
    assert not failures, "\n\n".join(failures)


def test_every_gpuplan_example_runs_or_says_why_it_cannot() -> None:
    """Issue 34: every `$ gpuplan ...` line of the docs is in a ```console block the suite runs; one that
    cannot run here (a real account, a GPU) sits in a block whose fence follows `<!-- not-run: REASON -->`.
    A new unexplained line is drift this test catches; each one is listed as PAGE:LINE."""
    unexplained = [f"{e.page.relative_to(REPO).as_posix()}:{e.line}: {e.text[:80]}"
                   for page in docs_pages() for e in unexecuted_examples(page) if e.reason is None]
    assert not unexplained, (
        f"{len(unexplained)} `$ gpuplan` line(s) in blocks that do not run and say no reason: make the block "
        "```console, or put `<!-- not-run: why it cannot run here -->` on the line before its fence:\n"
        + "\n".join(unexplained))
