"""Settling a run that ended: the one place the estimator learns from it.

A run's final state is recorded wherever it ends (gpuplan.runs.records.set_state: the job exited, a cap, a stop,
a failed launch); closing the books does nothing more. Settling is the step after, taken by whoever looks after
the run once it ended (the watch step, `gpuplan stop`, the budget cap): it teaches the estimator the MFU the run
achieved (gpuplan.calibration.run_mfu), at most once per run, and says so with a `calibrated` event.
`gpuplan calibrate --update` learns from any finished run this missed. It also bills the run's ended spot
machines at the spot prices the cloud charged over their span (gpuplan.supervise.spot_bill), with a `spot_billed`
event per machine keeping the quoted and the billed cost.
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from gpuplan.calibration.run_mfu import record_run
from gpuplan.providers.base import Provider
from gpuplan.runs.events import EventKind, record_event
from gpuplan.runs.payloads import CalibratedData
from gpuplan.store.models import Calibration, Run, RunState
from gpuplan.supervise.spot_bill import bill_spot

log = logging.getLogger(__name__)


def settle(session: Session, run: Run, provider: Provider | None = None) -> Calibration | None:
    """Bill the ended spot machines as the cloud did, and learn from `run` if it ended with a measured throughput
    (both idempotent); returns the new calibration row.

    Never fails the caller: these are by-products, and the books must close even if they go wrong.
    """
    if run.state not in RunState.FINAL:
        return None
    try:  # `gpuplan ssh --config` entries must not outlive the machines they point at
        from gpuplan.runs.ssh_config import remove_entry

        remove_entry(run.id)
    except OSError:
        log.warning("could not remove the ssh config entry of run %s", run.id, exc_info=True)
    if any(row.spot for row in run.instances):
        try:
            bill_spot(session, run, provider)
        except Exception:
            log.warning("could not bill the spot machines of run %s from the price history", run.id, exc_info=True)
    try:
        learned = record_run(session, run)
    except Exception:
        log.warning("could not learn throughput from run %s", run.id, exc_info=True)
        return None
    if learned is not None:
        record_event(session, run, EventKind.CALIBRATED, f"MFU for {learned.gpu} {learned.params_bucket} now "
                     f"{learned.mfu:.1%} over {learned.samples} run(s)", CalibratedData(learned.id))
    return learned
