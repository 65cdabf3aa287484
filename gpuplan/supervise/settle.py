"""Settling a run that ended: the one place the estimator learns from it.

A run's final state is recorded wherever it ends (gpuplan.runs.records.set_state: the job exited, a cap, a stop,
a failed launch); closing the books does nothing more. Settling is the step after, taken by whoever looks after
the run once it ended (the watch step, `gpuplan stop`, the budget cap): it teaches the estimator the MFU the run
achieved (gpuplan.calibration.run_mfu), at most once per run, and says so with a `calibrated` event.
`gpuplan calibrate --update` learns from any finished run this missed.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from gpuplan.calibration.run_mfu import record_run
from gpuplan.runs.events import EventKind, record_event
from gpuplan.store.models import Calibration, Run, RunState

log = logging.getLogger(__name__)


def settle(session: Session, run: Run) -> Calibration | None:
    """Learn from `run` if it ended with a measured throughput (idempotent); returns the new calibration row.

    Never fails the caller: learning is a by-product, and the books must close even if it goes wrong.
    """
    if run.state not in RunState.FINAL:
        return None
    try:
        learned = record_run(session, run)
    except Exception:
        log.warning("could not learn throughput from run %s", run.id, exc_info=True)
        return None
    if learned is not None:
        record_event(session, run, EventKind.CALIBRATED, f"MFU for {learned.gpu} {learned.params_bucket} now "
                     f"{learned.mfu:.1%} over {learned.samples} run(s)", calibration_id=learned.id)
    return learned
