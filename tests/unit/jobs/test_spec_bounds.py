"""Hostile specs are refused with one line in well under a second (gpuplan.jobs.spec_bounds)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.spec import SpecError, load_spec, parse_spec

from support.fuzzing import alias_bomb

HEAD = "name: x\ncommand: echo\n"



CASES = {
    "alias bomb": (alias_bomb(HEAD), "expands to over 100,000 values"),
    "3000-deep sequences": (HEAD + "labels: " + "[" * 3000 + "]" * 3000 + "\n", "nested deeper than 64 levels"),
    "3000-deep mappings": (HEAD + "labels: " + "{a: " * 3000 + "1" + "}" * 3000 + "\n", "nested deeper than 64"),
    "recursive anchor": (HEAD + "labels: &a {x: *a}\n", "recursive anchor"),
    "10 MB of labels": (HEAD + "labels:\n" + "".join(f"  k{i}: v\n" for i in range(1_100_000)), "over 256 KB"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_spec_is_one_line_fast(name: str) -> None:
    text, expected = CASES[name]
    started = time.process_time()  # CPU time: the machine is shared
    with pytest.raises(SpecError) as caught:
        parse_spec(text, source="job.yaml")
    assert time.process_time() - started < 1.0
    message = str(caught.value)
    assert "\n" not in message and message.startswith("job.yaml") and expected in message
    assert isinstance(caught.value, UserError)


def test_dev_zero_is_refused_without_reading_it_all() -> None:
    started = time.process_time()  # CPU time: the machine is shared
    with pytest.raises(SpecError, match="character device, not a regular file"):
        load_spec(Path("/dev/zero"))
    assert time.process_time() - started < 1.0


def test_ordinary_aliases_still_work() -> None:
    spec = parse_spec(HEAD + "env: &e {A: '1'}\nlabels: {team: nlp}\n")
    assert spec.env == {"A": "1"}


def test_a_spec_just_under_the_size_cap_still_parses() -> None:
    filler = "# " + "x" * 1000 + "\n"
    text = HEAD + filler * 250
    assert parse_spec(text).name == "x"
