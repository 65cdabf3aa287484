"""Property fuzz of every command's options: whatever the values, the CLI answers with success, a failure it
explains, or one `error:` line and exit 2 — never a traceback or an `unexpected` error. In-process for breadth
(every command, a few examples each under `make test`), and through child processes for a sample.

Commands that would run for long or reach out are held to their bounded form: `launch` always gets --dry-run,
`watch` and `scheduler run` --once, `logs` never --follow; `catalog refresh`, `setup aws` and `reconcile` are
left out (each asks a cloud API: tests only reach dead loopback endpoints, so they would only time out), and so
is `ui`, which serves until Ctrl-C (its options and refusals are tested in tests/e2e/test_ui_http.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.clihelp import run_cli
from support.clitree import Path_, command_tree
from support.fuzzing import check_outcome, examples, hostile_text

TREE = command_tree()
LEFT_OUT = {("catalog", "refresh"), ("setup", "aws"), ("reconcile",), ("ui",)}
FORCED = {("launch",): ["--dry-run"], ("watch",): ["--once"], ("scheduler", "run"): ["--once"]}
NEVER = {"--follow", "-f", "--yes", "-y", "--detach", "--create", "--terminate", "--help"}
COMMANDS = sorted(p for p, c in TREE.items() if p and not isinstance(c, click.Group) and p not in LEFT_OUT)


def argv_for(path: Path_, *, nul: bool) -> st.SearchStrategy[list[str]]:
    """A command line for `path`: each option left out, given as a flag, or given a hostile value."""
    command = TREE[path]
    parts: list[st.SearchStrategy[list[str]]] = []
    for param in command.params:
        if isinstance(param, click.Option):
            names = [n for n in param.opts if n not in NEVER]
            if not names or param.hidden:
                continue
            if param.is_flag:
                parts.append(st.sampled_from([[], [names[0]]]))
            else:
                parts.append(st.one_of(st.just([]), hostile_text(nul=nul).map(lambda v, n=names[0]: [n, v])))
        elif isinstance(param, click.Argument):
            count = param.nargs if param.nargs > 0 else 1
            parts.append(st.lists(hostile_text(nul=nul), min_size=count, max_size=count))
    return st.tuples(*parts).map(lambda chunks: [*path, *FORCED.get(path, []), *(a for c in chunks for a in c)])


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_answers_any_options_in_one_line(path: Path_, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a relative path among the values (`report --plot 0`) lands here, not in the tree
    @examples(quick=3, long=300)
    @given(argv_for(path, nul=True))
    def prop(argv: list[str]) -> None:
        try:
            result = run_cli(*argv)
        except SystemExit as exc:  # pragma: no cover - run_cli catches it; here for a clear report
            raise AssertionError((argv, exc.code)) from exc
        check_outcome(argv, result.exit_code, result.stderr)

    prop()


@examples(quick=6, long=300)
@given(st.sampled_from(COMMANDS).flatmap(lambda p: argv_for(p, nul=False)))
def test_any_command_line_in_a_child_process(tmp_path_factory: Any, argv: list[str]) -> None:
    proc = subprocess.run([sys.executable, "-m", "gpuplan", *argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, cwd=tmp_path_factory.mktemp("cwd"))
    check_outcome(argv, proc.returncode, proc.stderr)
