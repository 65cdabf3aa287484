"""Rewrite the expected output of every failing ```console command on the given pages with what it prints now.

For a change that moves many numbers at once (a new estimator constant, a new price snapshot): run it, then
read `git diff` and put `...` back where the output is volatile (run ids, times, dates, ages), since a
rewritten command's expected text is the real output in full. Commands that pass are left as written.

    .venv/bin/python scripts/docsite/accept_examples.py docs/concepts/estimate.md [more pages]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from console_blocks import ConsoleBlock, PageSession, normalise, page_environments, parse_blocks
from console_services import ConsoleServices, ServiceUnavailable


def _expected_span(lines: list[str], block: ConsoleBlock, index: int) -> tuple[int, int]:
    """The 0-based [start, end) of command `index`'s expected lines (after its command lines)."""
    command = block.commands[index]
    start = command.line + command.command.count("\n")  # the line after the command (0-based)
    if index + 1 < len(block.commands):
        return start, block.commands[index + 1].line - 1
    end = start
    while not lines[end].lstrip().startswith(("```", "~~~")):
        end += 1
    return start, end


def accept(page: Path) -> int:
    lines = page.read_text().split("\n")
    blocks = parse_blocks(page)
    session = PageSession(page, Path(tempfile.mkdtemp(prefix="docs-accept-")), blocks)
    session.prepare()
    services = ConsoleServices()
    try:
        for name in page_environments(page):  # the same loopback services the test suite gives the page
            session.extra_env.update(services.start(name, session.env()))
        return _rewrite(page, lines, blocks, session)
    except ServiceUnavailable as absent:
        print(f"skipped {page}: {absent}")
        return 0
    finally:
        services.stop_all()


def _rewrite(page: Path, lines: list[str], blocks: list[ConsoleBlock], session: PageSession) -> int:
    edits: list[tuple[int, int, list[str]]] = []
    for block in blocks:
        indent = lines[block.line - 1][: len(lines[block.line - 1]) - len(lines[block.line - 1].lstrip())]
        for index, command in enumerate(block.commands):
            result = session.run_command(command)
            if result.ok:
                continue
            new = normalise(result.output).splitlines()
            if result.exit_code:
                new.append(f"[exit {result.exit_code}]")
            start, end = _expected_span(lines, block, index)
            edits.append((start, end, [indent + line if line else line for line in new]))
            print(f"rewrote {page}:{command.line}: $ {command.command.splitlines()[0][:80]}")
    for start, end, new in sorted(edits, reverse=True):
        lines[start:end] = new
    page.write_text("\n".join(lines))
    return len(edits)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    total = sum(accept(Path(arg)) for arg in argv)
    print(f"{total} command(s) rewritten; review with `git diff` and restore `...` for volatile text")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
