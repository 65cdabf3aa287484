"""gpuplan.planning.job_plan on its own, without the CLI: a job spec and the user's limits in, the ranked plan out.

The CLI only parses and renders (tests/unit/cli/test_plan_cli.py runs it); what is merged with what — the spec's
resources and limits, the command line's limits over them — is decided here.
"""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.errors import UserError
from gpuplan.estimating.estimate import Workload
from gpuplan.planning.job_plan import PlanRequest, plan_job

SPEC = ("name: llama\ncommand: torchrun train.py\n"
        "resources:\n  gpu: H100\n  clouds: [aws]\n  nodes: 2\n  gpus_per_node: 8\n"
        "limits:\n  budget_usd: 90000\n  deadline: 200h\n"
        "checkpoint:\n  dir: /ckpt\n  interval: 30m\n"
        "workload:\n  model: llama-2-7b\n  tokens: 20B\n")


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def test_the_spec_sets_the_shape_and_limits_of_the_plan(tmp_path: Path) -> None:
    answer = plan_job(PlanRequest(spec_path=_spec(tmp_path)), db_url=None)
    assert answer.constraints.nodes == 2 and answer.constraints.budget_usd == Decimal(90000)
    assert answer.constraints.deadline_hours == 200
    assert answer.spot_model.checkpoint_hours == 0.5
    assert answer.workload.tokens == 20 * 10**9
    options = answer.result.options
    assert options
    assert {(o.cloud, o.gpu, o.nodes, o.gpus_per_node) for o in options} == {("aws", "H100", 2, 8)}
    assert all(o.est_cost_usd is not None and o.est_cost_usd <= 90000 for o in options)


def test_the_command_line_limits_win_over_the_spec(tmp_path: Path) -> None:
    answer = plan_job(PlanRequest(spec_path=_spec(tmp_path), budget_usd=Decimal(1), deadline_hours=10.0,
                                  checkpoint_hours=2.0), db_url=None)
    assert answer.constraints.budget_usd == Decimal(1) and answer.constraints.deadline_hours == 10.0
    assert answer.spot_model.checkpoint_hours == 2.0
    assert answer.result.options == ()  # nothing costs $1: an answer with reasons, not an error
    assert answer.result.rejected and all(o.reason for o in answer.result.rejected)


def test_a_spec_deadline_in_the_past_is_one_user_error(tmp_path: Path) -> None:
    past = (dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    path = _spec(tmp_path, SPEC.replace("deadline: 200h", f"deadline: {past}"))
    with pytest.raises(UserError, match="has already passed"):
        plan_job(PlanRequest(spec_path=path), db_url=None)


def test_max_nodes_below_the_spec_nodes_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=re.escape("--max-nodes 1 is below the spec's resources.nodes 2")):
        plan_job(PlanRequest(spec_path=_spec(tmp_path), max_nodes=1), db_url=None)


def test_a_spec_and_a_workload_together_are_refused(tmp_path: Path) -> None:
    workload = Workload(params=7 * 10**9, tokens=10**9)
    with pytest.raises(UserError, match="not both"):
        plan_job(PlanRequest(spec_path=_spec(tmp_path), workload=workload), db_url=None)


def test_unrented_gpus_come_back_as_warnings_for_the_caller_to_show() -> None:
    answer = plan_job(PlanRequest(workload=Workload(params=10**9, tokens=10**9), gpu_text="L4,RTX4090"),
                      db_url=None)
    assert len(answer.warnings) == 1 and "RTX4090" in answer.warnings[0]
    assert {o.gpu for o in answer.result.options} == {"L4"}
