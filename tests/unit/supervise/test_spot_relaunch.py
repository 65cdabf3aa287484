"""Spot interruptions: the watch step relaunches from the checkpoint a bounded number of times, within the budget.

EC2 has no API to interrupt a spot instance, and neither has moto: the test does to moto's instance what EC2 does
(terminates it with the state reason Server.SpotInstanceTermination), then runs the real watch step.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.plan import plan_launch
from gpuplan.launching.record import record_run
from gpuplan.launching.start import launch_recorded_run
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.runs.events import EventKind
from gpuplan.runs.machines import SUPERSEDED
from gpuplan.store.db import Store
from gpuplan.store.models import Run
from gpuplan.supervise.relaunch import MAX_RELAUNCHES
from gpuplan.supervise.watch import watch_run

from support.awsmoto import Injector, inject, spot_interrupt

SPEC = """\
name: spot-train
runtime: process
command: python train.py --resume
resources:
  gpu: A10G:1
  spot: true
  regions: [us-east-1]
limits:
  budget_usd: {budget}
  max_hours: 10
{checkpoint}
"""


@pytest.fixture
def store(tmp_path: Path) -> Any:
    store = Store.open(os.environ["GPUPLAN_DB"])
    yield store
    store.close()


def launch(store: Any, aws: AwsProvider, *, checkpoint: bool = True, budget: str = "100") -> str:
    text = SPEC.format(budget=budget, checkpoint="checkpoint: {dir: ckpt, interval: 10m}" if checkpoint else "")
    plan = plan_launch(parse_spec(text), text, provider=aws)
    run_id = record_run(store, plan)
    launch_recorded_run(store, run_id, plan, aws, {})
    return run_id


def interrupt(store: Any, run_id: str) -> str:
    """Interrupt the run's live machine as EC2 would; returns its instance id."""
    with store.session() as s:
        run = s.get(Run, run_id)
        [row] = [i for i in run.instances if i.terminated_at is None]
        instance_id = row.provider_instance_id
    spot_interrupt(instance_id)
    return instance_id


def events(store: Any, run_id: str) -> list[tuple[str, str]]:
    with store.session() as s:
        return [(e.kind, e.message) for e in s.get(Run, run_id).events]


def test_interrupted_spot_run_relaunches_from_its_checkpoint_then_gives_up(store: Any, aws: AwsProvider) -> None:
    run_id = launch(store, aws)
    seen: set[str] = set()
    for generation in range(1, MAX_RELAUNCHES + 1):
        gone = interrupt(store, run_id)
        seen.add(gone)
        result = watch_run(store, run_id, provider_factory=lambda _: aws)
        assert result.state == "running", events(store, run_id)
        with store.session() as s:
            run = s.get(Run, run_id)
            rows = {i.provider_instance_id: i for i in run.instances}
            assert rows[gone].state == SUPERSEDED and rows[gone].terminated_at is not None
            live = [i for i in run.instances if i.terminated_at is None]
            assert len(live) == 1 and live[0].provider_instance_id not in seen and live[0].spot
            relaunch = [json.loads(e.data_json) for e in run.events if e.kind == EventKind.RELAUNCH]
            assert [r["generation"] for r in relaunch] == list(range(1, generation + 1))
        tagged = aws.list_tagged(run_id)
        assert [i.instance_id for i in tagged] == [live[0].provider_instance_id]
    interrupt(store, run_id)
    final = watch_run(store, run_id, provider_factory=lambda _: aws)
    assert final.state == "failed" and "preempted" in (final.summary["state_reason"] or "")
    kinds = [k for k, _ in events(store, run_id)]
    assert kinds.count("relaunch") == MAX_RELAUNCHES and "relaunch_skipped" in kinds
    assert f"limit {MAX_RELAUNCHES}" in dict(events(store, run_id))["relaunch_skipped"]
    assert aws.list_tagged(run_id) == []
    # Every generation is billed: four machines, each at least AWS's 60 s minimum.
    assert len(final.summary["instances"]) == MAX_RELAUNCHES + 1
    assert final.summary["cost_usd"] > 0


def test_without_a_checkpoint_an_interruption_ends_the_run(store: Any, aws: AwsProvider) -> None:
    run_id = launch(store, aws, checkpoint=False)
    interrupt(store, run_id)
    result = watch_run(store, run_id, provider_factory=lambda _: aws)
    assert result.state == "failed"
    assert "no checkpoint dir" in dict(events(store, run_id))["relaunch_skipped"]


def test_no_relaunch_once_the_budget_is_spent(store: Any, aws: AwsProvider) -> None:
    # $0.01 pays for the first machine's 60 s minimum (~$0.0071 at the g5.xlarge spot price) but not for a second
    # one: a launch whose money cannot pay the minimum is refused outright (tests/e2e/test_failsafe_launch.py).
    run_id = launch(store, aws, budget="0.01")
    interrupt(store, run_id)
    result = watch_run(store, run_id, provider_factory=lambda _: aws)
    assert result.state in ("failed", "capped")
    assert "budget" in dict(events(store, run_id))["relaunch_skipped"]
    assert aws.list_tagged(run_id) == []


def test_a_relaunch_that_fails_over_to_another_type_records_the_type_and_its_attempts(store: Any,
                                                                                     aws: AwsProvider) -> None:
    """A relaunch is a start with a generation: the same failover, the same attempt events, and the run follows
    its machines to the instance type that had capacity (the relaunch's own copy of the start recorded neither)."""
    run_id = launch(store, aws)
    with store.session() as s:
        first_type = s.get(Run, run_id).instance_type
    refused = inject(aws.launch_client("us-east-1"), "RunInstances",
                     Injector("InsufficientInstanceCapacity", "We currently do not have sufficient capacity",
                              when=lambda p: p["InstanceType"] == first_type), server=False)
    interrupt(store, run_id)
    result = watch_run(store, run_id, provider_factory=lambda _: aws)
    assert result.state == "running", events(store, run_id)
    with store.session() as s:
        run = s.get(Run, run_id)
        [live] = [i for i in run.instances if i.terminated_at is None]
        assert live.instance_type != first_type and run.instance_type == live.instance_type
        attempts = [json.loads(e.data_json) for e in run.events if e.kind == EventKind.LAUNCH_ATTEMPT]
    relaunch_attempts = [a for a in attempts if a.get("generation") == 1]
    assert refused.failed >= 1
    on_first = [a["outcome"] for a in relaunch_attempts if a["instance_type"] == first_type]
    assert on_first.count("capacity") == refused.failed and set(on_first) <= {"capacity", "skipped"}
    assert relaunch_attempts[-1]["outcome"] == "launched"
    assert relaunch_attempts[-1]["instance_type"] == live.instance_type
