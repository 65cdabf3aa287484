"""Where `gpuplan logs` reads a cloud run's log from, and when the next copy lands.

A cloud machine's job log reaches this computer only as copies: the boot script ships RUN_DIR/job.log to the
run's storage every SHIP_INTERVAL_SECONDS (gpuplan.jobs.bootstrap) and at the end, and each watch step fetches a
copy that changed (gpuplan.providers.outputs). So `logs` on such a run says which object it shows, when that copy
was fetched, and by when the next one lands; a provider that ships nothing (no bucket configured) says how to turn
shipping on, instead of printing nothing. A provider that writes the run folder itself (local) has nothing to say.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

from gpuplan.jobs.bootstrap import SHIP_INTERVAL_SECONDS


@dataclass(frozen=True)
class LogSource:
    """What a run's log is a copy of: the shipped object (None: not shipped) and the hint when nothing ships."""

    shipped_url: str | None
    hint: str | None
    interval_s: int = SHIP_INTERVAL_SECONDS

    @property
    def is_copy(self) -> bool:
        return self.shipped_url is not None

    def describe(self, local: Path | None, *, live: bool, now: dt.datetime | None = None) -> str | None:
        """One line for stderr (None for a log this machine writes itself)."""
        if self.shipped_url is None:
            return f"this run's machines ship no log: {self.hint}" if self.hint else None
        now = now or dt.datetime.now(dt.timezone.utc)
        fetched = _mtime(local)
        if fetched is None:
            when = (f"the machines ship a first copy within {self.interval_s} s of the job's start"
                    if live else "no copy was ever shipped")
            return f"log: {self.shipped_url} (none fetched yet: {when})"
        ago = max(0, int((now - fetched).total_seconds()))
        copy = f"copy fetched {fetched:%H:%M:%S} UTC ({ago} s ago)"
        if not live:
            return f"log: {self.shipped_url}, the last copy its machines shipped ({copy})"
        next_by = fetched + dt.timedelta(seconds=self.interval_s)
        lands = (f"the next lands by {next_by:%H:%M:%S} UTC" if next_by > now
                 else f"a newer copy is due (the machines ship every {self.interval_s} s)")
        return f"log: {self.shipped_url}, shipped every {self.interval_s} s; {copy}; {lands}"


def _mtime(path: Path | None) -> dt.datetime | None:
    try:
        return dt.datetime.fromtimestamp(path.stat().st_mtime, dt.timezone.utc) if path is not None else None
    except OSError:
        return None


def log_source(provider_name: str, run_id: str, node: int, storage: str | None = None) -> LogSource:
    """Ask the run's provider where its nodes ship (no cloud call: the provider's configured storage, else the
    run's own `storage:` when the provider fetches outputs from there)."""
    from gpuplan.jobs.storage import run_storage_url
    from gpuplan.providers.registry import make_provider

    provider = make_provider(provider_name)
    url = provider.outputs_url(run_id)
    if not url and storage and provider.fetches_run_storage:
        url = run_storage_url(storage, run_id)
    if url:
        return LogSource(f"{url.rstrip('/')}/node-{int(node)}/job.log", None)
    if provider.runs_here:
        return LogSource(None, None)
    hint = provider.outcome_hint()
    return LogSource(None, hint.removeprefix("no exit record: ") if hint else None)
