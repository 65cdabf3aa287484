"""Typed events: kinds are an enum whose values are the stored words, payloads a dataclass read through one function."""

from __future__ import annotations

import json

from gpuplan.runs.events import EventKind, payload
from gpuplan.runs.payloads import LaunchPlanData, NoticeData, RelaunchData, SpotBilledData
from gpuplan.store.models import Event


def event(kind: str, data: object) -> Event:
    return Event(run_id="r-1", kind=kind, message="", data_json=json.dumps(data))


def test_kinds_are_an_enum_of_the_stored_words() -> None:
    assert EventKind("relaunch") is EventKind.RELAUNCH and EventKind.RELAUNCH == "relaunch"
    assert EventKind.RELAUNCH_OUTCOMES == ("relaunch", "relaunch_failed")  # groups are not kinds themselves
    assert "relaunch_outcomes" not in {k.value for k in EventKind}
    assert json.dumps({"kind": EventKind.CAP}) == '{"kind": "cap"}'


def test_a_payload_reads_its_fields_and_nothing_else() -> None:
    read = payload(event("relaunch", {"generation": 2, "instances": ["i-1"], "resumed_from_step": 40,
                                      "notice": {"cloud": "aws"}, "unknown": 1}), RelaunchData)
    assert read == RelaunchData(generation=2, instances=("i-1",), resumed_from_step=40, notice=NoticeData(cloud="aws"))
    plan = payload(event("launch_plan", {"provider": "aws", "regions": ["us-east-1"], "pid": 7}), LaunchPlanData)
    assert plan is not None and (plan.provider, plan.regions, plan.pid, plan.generation) == ("aws", ("us-east-1",),
                                                                                             7, None)


def test_another_kind_a_damaged_row_or_a_wrong_type_never_breaks_a_reader() -> None:
    assert payload(event("launched", {"generation": 1}), RelaunchData) is None
    assert payload(Event(run_id="r", kind="spot_billed", message="", data_json="{not json"), SpotBilledData) is None
    assert payload(event("spot_billed", ["a list"]), SpotBilledData) is None
    odd = payload(event("relaunch", {"generation": "two", "recovered": 1, "lost_seconds": 3}), RelaunchData)
    assert odd == RelaunchData(generation=None, recovered=False, lost_seconds=3)
