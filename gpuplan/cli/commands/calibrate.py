"""`gpuplan calibrate`: what the estimator has learned from finished runs (and learning from missed ones)."""

from __future__ import annotations

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, print_table


@click.command()
@click.option("--show", is_flag=True, help="List the learned MFU per GPU type and model size (the default).")
@click.option("--update", is_flag=True,
              help="First learn from finished runs with measured throughput that were not learned from yet.")
@click.option("--json", "as_json", is_flag=True, help="Print as JSON.")
@pass_app
def calibrate(app: AppContext, show: bool, update: bool, as_json: bool) -> None:
    """The MFU learned from finished runs, per (GPU type, model-size bucket), and from which runs.

    `gpuplan estimate` uses a learned MFU (mfu_source "calibrated") when no bench matches.
    """
    from gpuplan.calibration.run_mfu import calibration_table, learn_from_finished_runs

    with app.store.session() as session:
        learned = learn_from_finished_runs(session) if update else []
        table = calibration_table(session)
    if as_json:
        emit_json({"learned_now": [row.run_id for row in learned], "calibrations": table})
        return
    if update:
        note(f"learned from {len(learned)} run(s)" + (f": {', '.join(str(r.run_id) for r in learned)}"
                                                      if learned else ""))
    if not table:
        note("nothing learned yet: runs that finish with measured throughput teach the estimator")
        return
    rows = [(t["gpu"], t["params_bucket"], f"{t['mfu']:.1%}", t["samples"],
             t["updated_at"].strftime("%Y-%m-%d %H:%M"), ", ".join(t["run_ids"]))
            for t in table]
    print_table(["gpu", "params", "MFU", "runs", "updated (UTC)", "from runs"], rows, justify_right=["MFU", "runs"])
