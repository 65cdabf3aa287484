"""Follow a run from the CLI: stream its log and draw a progress bar with ETA on stderr until it ends.

Following is only a viewer plus the watch step: the job runs detached, so Ctrl-C (or kill -9) of the follower
leaves the run going and `gpuplan status`/`logs`/`watch` carry on from the database and the run folder.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gpuplan.store.models import RunState
from gpuplan.supervise.watch import WatchResult, enforce_budgets, watch_run

if TYPE_CHECKING:
    from gpuplan.store.db import Store


def log_path(run_dir: str | None, node_rank: int = 0) -> Path | None:
    """Where a node's job log is readable locally: RUN_DIR/node-<rank>/job.log (providers make it so)."""
    return Path(run_dir) / f"node-{node_rank}" / "job.log" if run_dir else None


CHUNK_BYTES = 1 << 20  # a log is streamed a megabyte at a time: a 600 MB log must not take 1.2 GB to print


class LogTail:
    """Reads what was appended to a file since the last call (the file may not exist yet), a chunk at a time.

    The job owns the file: it may be huge, one line without a newline, or not a regular file at all (a FIFO is
    read as empty: gpuplan.readfile.open_regular), and none of that may cost more than a chunk of memory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.offset = 0

    def _read(self, limit: int) -> bytes:
        if self.path is None:
            return b""
        from gpuplan.readfile import FileRefused, open_regular

        try:
            with open_regular(self.path, "the job log") as fh:
                fh.seek(self.offset)
                return fh.read(limit)
        except (FileNotFoundError, FileRefused):
            return b""

    def read(self) -> str:
        """Whole lines appended since the last call, at most a chunk (a line longer than a chunk comes in pieces),
        so a line being written is printed once, complete."""
        data = self._read(CHUNK_BYTES)
        cut = data.rfind(b"\n") + 1 or (len(data) if len(data) == CHUNK_BYTES else 0)
        self.offset += cut
        return data[:cut].decode(errors="replace")

    def rest(self) -> str:
        """The next chunk of what is left, including a last line without a newline ("" once all is read)."""
        data = self._read(CHUNK_BYTES)
        self.offset += len(data)
        return data.decode(errors="replace")

    def drain(self, out: TextIO, *, partial: bool = False) -> None:
        """Write everything appended so far to `out`, chunk by chunk (`partial`: the last line without a newline
        too, at the end of a log)."""
        while True:
            text = self.rest() if partial else self.read()
            if not text:
                return
            out.write(text)


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
        while show_logs and (rest := tail.rest()):  # what is left, a chunk at a time
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
