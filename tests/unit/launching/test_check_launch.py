"""The provider's own pre-launch check (`Provider.check_launch`), called by the launch gates before anything is
recorded: what it is given, and that its refusal stops the launch with no run recorded."""

from __future__ import annotations

from typing import Any

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.plan import plan_launch
from gpuplan.launching.sequence import PLANNED_RUN_ID, check_launch
from gpuplan.providers.base import Instance, LaunchCheck, LaunchRequest, Provider

SPEC = """\
name: checked
command: python train.py
runtime: process
secrets: [HF_TOKEN]
resources:
  gpu: A10G:1
  regions: [us-east-1]
"""


class Checking(Provider):
    """A cloud provider that records what it was asked to check, and refuses when told to."""

    name = "checking"
    cloud = "aws"
    boots_from_script = True

    def __init__(self, refuse: str | None = None) -> None:
        self.refuse = refuse
        self.seen: list[LaunchRequest] = []

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        self.seen.append(request)
        if self.refuse:
            raise UserError(self.refuse)
        return LaunchCheck(notes=("fine",), details={"machine": {"architecture": "x86_64"}})

    def launch(self, request: LaunchRequest) -> list[Instance]:
        raise AssertionError("a check must not launch")

    def describe(self, instance_ids: Any) -> list[Instance]:
        return []

    def terminate(self, instance_ids: Any) -> None:
        return None

    def list_tagged(self, run_id: str | None = None) -> list[Instance]:
        return []


def test_the_check_gets_the_planned_request_with_its_boot_script_and_no_secret_values() -> None:
    provider = Checking()
    plan = plan_launch(parse_spec(SPEC), SPEC, provider=provider)
    result = check_launch(plan, provider)
    assert result.notes == ("fine",)
    [request] = provider.seen
    assert request.run_id == PLANNED_RUN_ID and request.instance_type == plan.offer.instance_type
    assert request.secrets == {"HF_TOKEN": ""}  # names only: values are read after the gates
    assert request.boot_script and "python train.py" in request.boot_script


def test_the_default_check_accepts_everything() -> None:
    class Plain(Checking):
        check_launch = Provider.check_launch  # type: ignore[assignment]

    assert Plain().check_launch(LaunchRequest(run_id="r", name="n", command="c", run_dir="/")) == LaunchCheck()


def test_a_refusal_leaves_no_run(tmp_path: Any) -> None:
    from gpuplan.launching.sequence import check_gates
    from gpuplan.store.db import Store

    store = Store.open(f"sqlite:///{tmp_path / 'g.db'}")
    provider = Checking(refuse="no instance profile")
    plan = plan_launch(parse_spec(SPEC), SPEC, provider=provider)
    with pytest.raises(UserError, match="no instance profile"):
        check_gates(store, plan, provider, force=False)
    from gpuplan.store.models import Run

    with store.session() as session:
        assert session.query(Run).count() == 0
