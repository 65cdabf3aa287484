"""The work spot interruptions lost, learnt from the relaunch events in the books (what the planner charges)."""

from __future__ import annotations

import pytest

from gpuplan.runs.events import EventKind, record_event
from gpuplan.runs.interruption_loss import measured_loss
from gpuplan.runs.payloads import RelaunchData
from gpuplan.store.db import Store
from gpuplan.store.models import Run


def test_the_mean_lost_work_of_recorded_relaunches(db_url: str) -> None:
    assert measured_loss(db_url) is None
    store = Store.open(db_url)
    with store.session() as s:
        run = Run(id="r-spot", name="spot", provider="aws", state="running", spec_text="", spec_hash="")
        s.add(run)
        s.flush()
        record_event(s, run, EventKind.RELAUNCH, "old relaunch, nothing measured", RelaunchData(1))
        record_event(s, run, EventKind.RELAUNCH, "saved on the notice", RelaunchData(2, lost_seconds=0.0))
        record_event(s, run, EventKind.RELAUNCH, "killed without notice", RelaunchData(3, lost_seconds=1800.0))
        s.commit()
    store.close()
    loss = measured_loss(db_url)
    assert loss is not None and loss.relaunches == 2
    assert loss.hours == pytest.approx(0.25)
