"""The console-block parser and matcher themselves: what a page's text means, on small written pages."""

from __future__ import annotations

from pathlib import Path

from console_blocks import PageSession, output_matches, parse_blocks

PAGE = """# A page

```bash
$ not run
```

```console
$ echo one
one
$ printf 'a\\nb  \\n\\n'
a
b
$ echo "long \\
> line"
long line
$ false
[exit 1]
```

!!! note
    ```console
    $ echo indented
    ...dent...
    ```
"""


def test_parses_commands_expected_output_exit_codes_and_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE)
    blocks = parse_blocks(page)
    assert [b.line for b in blocks] == [7, 21]
    commands = blocks[0].commands
    assert [c.command for c in commands] == ["echo one", "printf 'a\\nb  \\n\\n'", 'echo "long \nline"', "false"]
    assert [c.expected for c in commands] == ["one\n", "a\nb\n", "long line\n", ""]
    assert [c.exit_code for c in commands] == [0, 0, 0, 1]
    assert [c.line for c in commands] == [8, 10, 13, 16]
    assert blocks[1].commands[0].command == "echo indented"


def test_ellipsis_spans_lines_and_trailing_space_is_ignored() -> None:
    assert output_matches("start\n...\nend\n", "start\nx\ny\nend   \n\n")
    assert not output_matches("start\nend\n", "start\nx\nend\n")


def test_blocks_run_in_a_shared_home_and_report_a_diff(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(PAGE + "\n```console\n$ echo $GPUPLAN_HOME | grep -c gpuplan\n1\n$ echo two\nthree\n```\n")
    session = PageSession(page, tmp_path / "home", parse_blocks(page))
    results = session.run_block(2)  # runs blocks 0 and 1 first
    assert session.ran == {0, 1, 2}
    assert [r.ok for r in results] == [True, False]
    explained = results[1].explain(session.blocks[2])
    assert "-three" in explained and "+two" in explained


def test_accept_rewrites_only_the_failing_commands(tmp_path: Path) -> None:
    from accept_examples import accept

    page = tmp_path / "page.md"
    page.write_text("```console\n$ echo one\nwrong\n$ echo two\n...\n$ sh -c 'echo three; exit 3'\n```\n")
    assert accept(page) == 2
    assert page.read_text() == "```console\n$ echo one\none\n$ echo two\n...\n$ sh -c 'echo three; exit 3'\nthree\n" \
                               "[exit 3]\n```\n"


def test_a_gpuplan_line_outside_console_blocks_is_found_with_its_stated_reason(tmp_path: Path) -> None:
    from console_blocks import unexecuted_examples

    page = tmp_path / "page.md"
    page.write_text("```console\n$ gpuplan --version\n```\n\n```text\n$ gpuplan launch a.yaml\n$ ls\n```\n\n"
                    "<!-- not-run: needs a real AWS account -->\n```bash\n$ GPUPLAN_X=1 gpuplan stop r-1\n"
                    "gpuplan runs\n```\n\n<!-- not-run: -->\n```\n$ gpuplan report\n```\n")
    found = [(e.line, e.text, e.reason) for e in unexecuted_examples(page)]
    assert found == [(6, "$ gpuplan launch a.yaml", None),
                     (12, "$ GPUPLAN_X=1 gpuplan stop r-1", "needs a real AWS account"),
                     (18, "$ gpuplan report", None)]  # an empty reason is no reason
