"""Follow a run from the CLI: stream its log and draw a progress bar with ETA on stderr until it ends.

Following is only a viewer plus the watch step: the job runs detached, so Ctrl-C (or kill -9) of the follower
leaves the run going and `gpuplan status`/`logs`/`watch` carry on from the database and the run folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuplan.store.models import RunState
from gpuplan.supervise.watch import WatchResult, enforce_budgets, watch_run

if TYPE_CHECKING:
    from gpuplan.store.db import Store


def log_path(run_dir: str | None, node_rank: int = 0) -> Path | None:
    """Where a node's job log is readable locally: RUN_DIR/node-<rank>/job.log (providers make it so)."""
    return Path(run_dir) / f"node-{node_rank}" / "job.log" if run_dir else None


class LogTail:
    """Reads what was appended to a file since the last call (the file may not exist yet)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0

    def read(self) -> str:
        if self.path is None:
            return ""
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return ""
        # Only whole lines, so a line being written is printed once, complete.
        cut = data.rfind(b"\n") + 1
        self.offset += cut
        return data[:cut].decode(errors="replace")

    def rest(self) -> str:
        """Everything left, including a last line without a newline."""
        text = self.read()
        if self.path is None:
            return text
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                tail = fh.read()
        except FileNotFoundError:
            return text
        self.offset += len(tail)
        return text + tail.decode(errors="replace")


def _format_eta(seconds: float | None) -> str:
    if seconds is None:
        return "ETA ?"
    seconds = int(seconds)
    hours, rem = divmod(seconds, 3600)
    minutes, secs = divmod(rem, 60)
    return f"ETA {hours}:{minutes:02d}:{secs:02d}" if hours else f"ETA {minutes}:{secs:02d}"


# A budget pass costs a ledger query per budget; checking every few seconds is plenty for a cap.
BUDGET_CHECK_EVERY_S = 5.0


def follow(store: Store, run_id: str, *, interval: float = 1.0, show_logs: bool = True) -> WatchResult:
    """Watch the run until it reaches a final state (and its machines are closed); returns the last step."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from gpuplan.cli.inert import inert_markup

    console = Console(file=sys.stderr)
    result = watch_run(store, run_id)
    next_budget_check = time.monotonic()
    tail = LogTail(log_path(result.summary.get("run_dir")))
    columns = [TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
               TimeElapsedColumn(), TextColumn("{task.fields[eta]}"), TextColumn("{task.fields[info]}")]
    with Progress(*columns, console=console, transient=False, refresh_per_second=4) as bar:
        task = bar.add_task(inert_markup(result.summary["name"][:30]), total=100, eta="ETA ?", info="")
        while True:
            text = tail.read()
            if show_logs and text:
                for line in text.splitlines():
                    bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
            _update(bar, task, result)
            done = result.state in RunState.FINAL and all(
                i["terminated_at"] is not None for i in result.summary["instances"])
            if done:
                break
            time.sleep(interval)
            if time.monotonic() >= next_budget_check:  # budgets are hard caps for a followed run too
                enforce_budgets(store)
                next_budget_check = time.monotonic() + BUDGET_CHECK_EVERY_S
            result = watch_run(store, run_id)
        rest = tail.rest()
        if show_logs and rest:
            for line in rest.splitlines():
                bar.console.print(line, markup=False, highlight=False, soft_wrap=True)
        if result.state == RunState.SUCCEEDED:
            bar.update(task, completed=100)
        _update(bar, task, result)
    return result


def _update(bar: Any, task: Any, result: WatchResult) -> None:
    progress = result.progress
    summary = result.summary
    info = [summary["state"]]
    if progress is not None and progress.tokens_per_s:
        info.append(f"{progress.tokens_per_s:,.0f} tok/s")
    if progress is not None and progress.loss is not None:
        info.append(f"loss {progress.loss:.3f}")
    info.append(f"${float(summary['cost_usd']):.4f}")
    completed = (progress.fraction * 100) if progress is not None and progress.fraction is not None else None
    eta = "" if summary["state"] in RunState.FINAL else _format_eta(progress.eta_seconds if progress else None)
    fields: dict[str, Any] = {"info": "  ".join(info), "eta": eta}
    if completed is not None:
        bar.update(task, completed=completed, **fields)
    else:
        bar.update(task, **fields)
