"""Hypothesis settings and hostile values shared by the fuzz tests (tests/fuzz/).

`make test` runs each property a few derandomized examples (the same ones every time: a bounded, reproducible
slice); `make fuzz` (GPUPLAN_FUZZ=1) runs many random ones. Either way a failure is shrunk to the smallest input.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

LONG = os.environ.get("GPUPLAN_FUZZ") == "1"


def examples(quick: int, long: int) -> settings:
    """`quick` derandomized examples under `make test`, `long` random ones under `make fuzz`."""
    return settings(max_examples=long if LONG else quick, deadline=None, derandomize=not LONG, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.data_too_large])


# What testers type into options and specs when they mean harm or make mistakes.
HOSTILE = [
    "", " ", "-1", "0", "-0", "1e-400", "1e400", "1e-300", "nan", "NaN", "inf", "-inf", "99999999999999999999",
    "0x10", "1_000", "１２", "%", "_", "%e81", "r-%", "\x1b[2J\x1b]0;t\x07", "\x9b31m", "\u202eevil", "x" * 5000,
    "/dev/zero", "/", ".", "/proc/self/x", "../../etc/passwd", "9999-12-31", "0001-01-01",
    "9999-12-31T23:59:59-12:00", "$(id)", "`id`", "; rm -rf ~", "'", '"', "\\", "1B", "7B", "H100", "h100:8",
    "aws", "gcp", "local", "slurm", "24h", "-5h", "90m", "1e9", "month", "week", "total", "bf16", "* * * * *",
    "61 25 32 13 8", "@reboot", "Europe/Nowhere", "ä", "\t", "\n", "a\nb",
]


def hostile_text(*, nul: bool = True) -> st.SearchStrategy[str]:
    """A hostile value, or any short text (without NUL for a subprocess's argv, which cannot carry one)."""
    text = st.text(max_size=40)
    if not nul:
        text = text.filter(lambda s: "\x00" not in s)
    return st.one_of(st.sampled_from(HOSTILE), text, st.integers().map(str), st.floats().map(repr))


def alias_bomb(head: str) -> str:
    """A spec (`head` plus labels) whose nine levels of ten aliases expand to 10^9 values in about 500 bytes."""
    lines = ["a: &a [x,x,x,x,x,x,x,x,x,x]"]
    for i in range(1, 9):
        prev, name = chr(96 + i), chr(97 + i)
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 10) + "]")
    return head + "labels:\n" + "".join(f"  {line}\n" for line in lines)


def check_outcome(where: object, code: int, stderr: str) -> None:
    """The contract for any input: no crash, exit 0, 1 (a failure it explains) or 2 with one `error:` line; never a
    traceback or `unexpected`. `where` names the input in the assertion and the outcomes file."""
    record_outcome(where, code, stderr)
    assert "Traceback" not in stderr, (where, stderr)
    assert "error: unexpected" not in stderr, (where, stderr)
    assert code in (0, 1, 2), (where, code, stderr)
    if code == 2:
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1, (where, stderr)


def record_outcome(argv: object, code: int, stderr: str) -> None:
    """With GPUPLAN_FUZZ_OUTCOMES=FILE, append each failing outcome (exit != 0) as a JSON line: how `make fuzz`'s
    counts per class are taken (the report of issue 38's campaign)."""
    path = os.environ.get("GPUPLAN_FUZZ_OUTCOMES")
    if not path or code == 0:
        return
    import json

    lines = [line for line in stderr.splitlines() if line.strip()]
    with open(path, "a") as fh:
        fh.write(json.dumps({"argv": repr(argv)[:300], "code": code, "last": (lines[-1] if lines else "")[:300],
                             "lines": len(lines)}) + "\n")
