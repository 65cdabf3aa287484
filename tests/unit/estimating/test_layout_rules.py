"""The layout rules are written once (gpuplan.estimating.layout.layout_problems) and worded in the caller's own
option names: the CLI's flags, a job spec's keys and the step model's ParallelConfig give the same rules."""

from __future__ import annotations

import pytest

from gpuplan.estimating.layout import CLI_NAMES, SPEC_NAMES, layout_problems
from gpuplan.estimating.parallel import ParallelConfig
from gpuplan.jobs.spec import SpecError, parse_spec

from support.clihelp import run_cli

BAD = {"tp": 1, "sharding": "fsdp", "recompute": "selective", "activation_checkpointing": True, "tp_overlap": True,
       "dp_overlap": True}


def test_one_rule_function_two_spellings() -> None:
    cli, spec = layout_problems(CLI_NAMES, **BAD), layout_problems(SPEC_NAMES, **BAD)  # type: ignore[arg-type]
    assert len(cli) == len(spec) == 3
    assert cli[0] == "--activation-checkpointing means --recompute full, not selective"
    assert spec[0] == "activation_checkpointing means recompute full, not selective"
    assert cli[1] == "--tp-overlap needs --tp of 2 or more" and spec[1] == "tp_overlap needs tp of 2 or more"
    for name in ("tp_overlap", "activation_checkpointing", "dp_overlap", "recompute", "sharding", "tp"):
        flag = "--" + name.replace("_", "-")
        cli = [c.replace(flag, name) for c in cli]
    assert cli == spec
    assert layout_problems(CLI_NAMES, tp=2, sharding="zero1", recompute="full", activation_checkpointing=True,
                           tp_overlap=True, dp_overlap=True) == []


def test_every_caller_uses_it() -> None:
    with pytest.raises(ValueError, match="--tp-overlap needs --tp of 2 or more"):
        ParallelConfig(gpus=8, gpus_per_node=8, tp=1, tp_overlap=True)
    with pytest.raises(SpecError, match="tp_overlap needs tp of 2 or more"):
        parse_spec("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  tp_overlap: true\n")
    result = run_cli("estimate", "--params", "7B", "--tokens", "1B", "--gpu", "H100", "--tp-overlap")
    assert result.exit_code == 2 and "--tp-overlap needs --tp of 2 or more" in result.stderr
