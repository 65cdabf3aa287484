"""Executable examples in the docs: the ```console blocks of a Markdown page, parsed and run.

The convention (docs/contributing.md says it for writers):
- A fenced block whose info string is `console` is executed. Each line starting with `$ ` is a command (a
  trailing backslash continues it on the next line); the lines after it, up to the next `$ ` line or the end of
  the block, are its expected stdout and stderr, interleaved as a terminal shows them.
- `...` in the expected output matches any text, across lines too (doctest's ELLIPSIS).
- A command that exits non-zero ends its expected output with a line `[exit N]`.
- Trailing whitespace and trailing blank lines are ignored.
- Commands run with bash, the repository as the working folder, the venv's `gpuplan` first on PATH, and a fresh
  GPUPLAN_HOME, SQLite GPUPLAN_DB, HOME and config folder per page (no config file, so the local provider),
  shared by the page's blocks in page order. Terminal width: COLUMNS (100); time zone UTC; no colour.
- A page that holds the line `<!-- console-env: NAME -->` gets that sandbox for its commands (aws, gcp,
  gcp-catalog, slurm, ledger: console_services.py), on 127.0.0.1; every other endpoint is a closed loopback port.
Commands that need a real cloud, or must not run, go in ```bash or ```text blocks instead, and a `$ gpuplan`
line in such a block needs its reason on the line right before the fence: `<!-- not-run: needs a real account -->`
(`unexecuted_examples` finds the lines without one; tests/docs/test_examples.py fails on them).
"""

from __future__ import annotations

import difflib
import doctest
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})\s*(?P<info>[^`\n]*)$")
EXIT_LINE = re.compile(r"^\[exit (\d+)\]$")
CONSOLE_ENV = re.compile(r"^<!-- console-env: (?P<name>[a-z0-9-]+) -->$", re.MULTILINE)
# The stated reason a block of `$ gpuplan` lines is not executed, on the line right before its fence.
NOT_RUN = re.compile(r"^\s*<!-- not-run: (?P<reason>\S.*?\S) -->\s*$")
GPUPLAN_COMMAND = re.compile(r"^\$ (?:[A-Z_][A-Z0-9_]*=\S*\s+)*gpuplan\b")
COLUMNS = 100
COMMAND_TIMEOUT_S = 120
# Every network endpoint a command could reach, on a closed loopback port unless a page's service (console-env)
# gives a live one: no example may reach a registry, a price list or a cloud's metadata server (tests/conftest.py
# does the same for the rest of the suite).
DEAD_ENDPOINT = "http://127.0.0.1:9"
LOOPBACK_ONLY = {
    "GPUPLAN_REGISTRY_ENDPOINT": DEAD_ENDPOINT,  # image-platform lookups (jobs/image_registry.py)
    "GPUPLAN_AWS_PRICE_LIST_URL": DEAD_ENDPOINT,
    "GPUPLAN_AZURE_PRICES_URL": f"{DEAD_ENDPOINT}/api/retail/prices",
    "AWS_ENDPOINT_URL": DEAD_ENDPOINT,
    "AWS_MAX_ATTEMPTS": "1",
    "AWS_EC2_METADATA_DISABLED": "true",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": f"{DEAD_ENDPOINT}/compute/v1/",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE": f"{DEAD_ENDPOINT}/storage/v1/",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER": f"{DEAD_ENDPOINT}/",
    "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING": f"{DEAD_ENDPOINT}/",
    "NO_GCE_CHECK": "True",
    "GCE_METADATA_HOST": "127.0.0.1:9",
    "GCE_METADATA_IP": "127.0.0.1:9",
}
# Variables from the caller's environment that would point a page at real clouds, real books or a config file.
DROPPED_PREFIXES = ("GPUPLAN_", "AWS_", "GOOGLE_", "CLOUDSDK_", "XDG_", "PYTEST_", "SLURM_", "HF_", "AZURE_", "GCE_")


@dataclass(frozen=True)
class ConsoleCommand:
    """One `$ ` command, the output it should print and the exit status it should end with."""

    command: str
    expected: str
    exit_code: int
    line: int


@dataclass(frozen=True)
class ConsoleBlock:
    """A ```console block: its page, the line of its opening fence and its commands in order."""

    page: Path
    line: int
    commands: tuple[ConsoleCommand, ...]

    @property
    def test_id(self) -> str:
        return f"{page_name(self.page)}:{self.line}"


@dataclass(frozen=True)
class CommandResult:
    """What a command printed and its exit status, against what the page says."""

    command: ConsoleCommand
    output: str
    exit_code: int

    @property
    def ok(self) -> bool:
        return self.exit_code == self.command.exit_code and output_matches(self.command.expected, self.output)

    def explain(self, block: ConsoleBlock) -> str:
        where = f"{page_name(block.page)}:{self.command.line}"
        want = self.command.expected + (f"[exit {self.command.exit_code}]\n" if self.command.exit_code else "")
        got = normalise(self.output) + (f"[exit {self.exit_code}]\n" if self.exit_code else "")
        diff = difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                    fromfile=f"{where} (the page)", tofile="actual output")
        return f"$ {self.command.command}\n" + "".join(diff)


def page_name(page: Path) -> str:
    """A page as the tests name it: relative to the repository when inside it."""
    return page.relative_to(REPO).as_posix() if page.is_relative_to(REPO) else page.as_posix()


def normalise(text: str) -> str:
    """Trailing whitespace off every line, trailing blank lines off the end, one final newline (or none)."""
    lines = [line.rstrip() for line in text.replace("\r\n", "\n").split("\n")]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n" if lines else ""


def output_matches(expected: str, actual: str) -> bool:
    checker = doctest.OutputChecker()
    return checker.check_output(normalise(expected), normalise(actual), doctest.ELLIPSIS)


@dataclass(frozen=True)
class FencedBlock:
    """Any fenced block of a page: its info string, the line of its opening fence and its body (dedented)."""

    info: str
    line: int
    body: tuple[str, ...]
    not_run_reason: str | None  # the `<!-- not-run: ... -->` line right before the fence, if any


@dataclass(frozen=True)
class UnexecutedExample:
    """A `$ gpuplan` line in a block the suite does not run, and the reason the page gives (None: no reason)."""

    page: Path
    line: int
    text: str
    reason: str | None


def fenced_blocks(page: Path) -> list[FencedBlock]:
    """Every fenced block of `page` (fences may be indented, e.g. inside an admonition)."""
    lines = page.read_text().split("\n")
    blocks: list[FencedBlock] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        indent, fence, info = match["indent"], match["fence"], match["info"].strip()
        body: list[str] = []
        start = i
        i += 1
        while i < len(lines):
            closing = FENCE.match(lines[i])
            if closing and closing["fence"].startswith(fence[0]) and len(closing["fence"]) >= len(fence) \
                    and not closing["info"].strip():
                break
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i].lstrip())
            i += 1
        i += 1
        marker = NOT_RUN.match(lines[start - 1]) if start else None
        blocks.append(FencedBlock(info, start + 1, tuple(body), marker["reason"] if marker else None))
    return blocks


def parse_blocks(page: Path) -> list[ConsoleBlock]:
    """Every ```console block of `page`, its commands parsed."""
    return [ConsoleBlock(page, b.line, tuple(_commands(list(b.body), b.line + 1)))
            for b in fenced_blocks(page) if b.info.split()[:1] == ["console"]]


def unexecuted_examples(page: Path) -> list[UnexecutedExample]:
    """The `$ gpuplan ...` lines (an environment assignment before `gpuplan` counts too) of `page` that sit in
    a block the suite does not execute, each with the reason its `<!-- not-run: REASON -->` marker gives."""
    found: list[UnexecutedExample] = []
    for block in fenced_blocks(page):
        if block.info.split()[:1] == ["console"]:
            continue
        for offset, text in enumerate(block.body):
            if GPUPLAN_COMMAND.match(text.strip()):
                found.append(UnexecutedExample(page, block.line + 1 + offset, text.strip(), block.not_run_reason))
    return found


def _commands(body: list[str], first_line: int) -> Iterator[ConsoleCommand]:
    i = 0
    while i < len(body):
        if not body[i].startswith("$ "):
            i += 1  # text before the first command is not compared
            continue
        line_no = first_line + i
        command = body[i][2:]
        while command.endswith("\\") and i + 1 < len(body):
            i += 1
            command = command[:-1] + "\n" + body[i].removeprefix("> ")
        i += 1
        expected: list[str] = []
        while i < len(body) and not body[i].startswith("$ "):
            expected.append(body[i])
            i += 1
        exit_code = 0
        while expected and not expected[-1].strip():
            expected.pop()
        if expected and EXIT_LINE.match(expected[-1].strip()):
            exit_code = int(EXIT_LINE.match(expected.pop().strip())[1])  # type: ignore[index]
        yield ConsoleCommand(command, normalise("\n".join(expected)), exit_code, line_no)


def page_environments(page: Path) -> list[str]:
    """The services a page asks for with `<!-- console-env: NAME -->` lines (e.g. `aws`)."""
    return CONSOLE_ENV.findall(page.read_text())


def docs_pages(root: Path = REPO) -> list[Path]:
    """The pages whose examples run: every Markdown file under docs/, and the README."""
    pages = sorted((root / "docs").rglob("*.md"))
    readme = root / "README.md"
    return [readme, *pages] if readme.exists() else pages


@dataclass
class PageSession:
    """The shared state of one page's examples: its own GPUPLAN_HOME, database, HOME and config folder.

    Blocks run in page order; `run_block(k)` first runs any earlier block this process has not run, so a
    block's test passes or fails the same whether its page's other blocks ran in this worker or another.
    """

    page: Path
    home: Path
    blocks: list[ConsoleBlock] = field(default_factory=list)
    ran: set[int] = field(default_factory=set)
    extra_env: dict[str, str] = field(default_factory=dict)  # what the page's services add (an AWS endpoint)

    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED_PREFIXES)}
        bin_dir = str(Path(sys.executable).parent)
        env.update({
            "PATH": f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
            "HOME": str(self.home / "home"),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_DATA_HOME": str(self.home / "data"),
            "XDG_CACHE_HOME": str(self.home / "cache"),
            "GPUPLAN_HOME": str(self.home / "gpuplan"),
            "GPUPLAN_DB": f"sqlite:///{self.home / 'gpuplan' / 'gpuplan.db'}",
            "COLUMNS": str(COLUMNS),
            "LINES": "50",
            "TERM": "dumb",
            "NO_COLOR": "1",
            "TZ": "UTC",
            "LC_ALL": "C.UTF-8",
            "PYTHONIOENCODING": "utf-8",
            **LOOPBACK_ONLY,
        })
        env.update(self.extra_env)
        return env

    def prepare(self) -> None:
        for sub in ("home", "config", "data", "cache", "gpuplan"):
            (self.home / sub).mkdir(parents=True, exist_ok=True)

    def run_command(self, command: ConsoleCommand) -> CommandResult:
        proc = subprocess.run(["bash", "-c", command.command], cwd=REPO, env=self.env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=COMMAND_TIMEOUT_S,
                              check=False)
        return CommandResult(command, proc.stdout.decode("utf-8", "replace"), proc.returncode)

    def run_block(self, index: int) -> list[CommandResult]:
        self.prepare()
        for earlier in range(index):
            if earlier not in self.ran:
                self.run_block_only(earlier)
        return self.run_block_only(index)

    def run_block_only(self, index: int) -> list[CommandResult]:
        self.ran.add(index)
        return [self.run_command(c) for c in self.blocks[index].commands]
