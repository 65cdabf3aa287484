"""Every ```console block of the docs (docs/**/*.md and README.md) runs, and prints what the page says.

One test per page (`docs/getting-started.md`): its blocks share one fresh GPUPLAN_HOME and SQLite database and
run in page order, in one worker, so no block is replayed on another xdist worker to rebuild its page's state
(scripts/docsite/console_blocks.py says the convention). The sandboxes a page asks for start before its first
block and stop after its last. A failure shows each failing command with its page and line and a unified diff of
the page's text against the real output; every block of the page still runs.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from console_blocks import PageSession, docs_pages, page_environments, page_name, parse_blocks, unexecuted_examples
from console_services import ConsoleServices, ServiceUnavailable

REPO = Path(__file__).resolve().parents[2]
PAGES = [page for page in docs_pages() if parse_blocks(page)]


@pytest.mark.parametrize("page", PAGES, ids=[page_name(p) for p in PAGES])
def test_console_blocks_of_page(page: Path, tmp_path: Path) -> None:
    session = PageSession(page, tmp_path / "docs-page", parse_blocks(page))
    services = ConsoleServices()
    try:
        for name in page_environments(page):
            assert name in services.names(), f"{page_name(page)}: no console-env {name!r}"
            try:
                session.extra_env.update(services.start(name, session.env()))
            except ServiceUnavailable as absent:
                pytest.skip(f"console-env {name}: {absent}")
        failures: list[str] = []
        for index, block in enumerate(session.blocks):
            assert block.commands, f"{block.test_id}: a console block without a `$ ` command"
            results = session.run_block(index)
            failures += [result.explain(block) for result in results if not result.ok]
        assert not failures, "\n\n".join(failures)
    finally:
        services.stop_all()


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
