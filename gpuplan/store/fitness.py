"""Is this database fit to record a launch? Checked before a run is recorded, so that a launch never starts a job
the books cannot keep (issue 38, class 4).

- An in-memory SQLite database (`GPUPLAN_DB=sqlite://`) ends with the command: a run launched into it is billed
  and running, and no later `status`, `stop` or budget can see it. Refused.
- A damaged SQLite file (a page of random bytes) may read fine until a launch writes into the damaged part, or
  records into it silently. `PRAGMA quick_check` (https://www.sqlite.org/pragma.html#pragma_quick_check: the
  integrity check without the index-content cross-check, O(N)) runs before each launch: milliseconds for the
  books of years of runs, small beside a launch.
- A full disk (the database's, or the run folders'): a launch that records the run, starts the job and then
  cannot record the machine leaves it running unbooked. Refused when less than MIN_FREE_BYTES is free there.
All three are the user's environment, not a bug: UserError, one line, exit 2, nothing recorded.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError

from gpuplan.errors import UserError
from gpuplan.paths import expand_user
from gpuplan.store.db import Store
from gpuplan.store.space import MIN_FREE_BYTES, free_bytes


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL; None for another database. An in-memory one is refused here (see above)."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return None
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or "mode=memory" in (parsed.query.get("mode") or "") or \
        database.startswith("file::memory:")
    if in_memory:
        raise UserError("the database is in memory (GPUPLAN_DB=sqlite://): a run launched into it would be "
                        "forgotten when this command ends, and nothing could see, bill or stop it; "
                        "point GPUPLAN_DB / --db at a file")
    return expand_user(database.removeprefix("file:").split("?", 1)[0])


def check_room(folder: Path, what: str) -> None:
    free = free_bytes(folder)
    if free is not None and free < MIN_FREE_BYTES:
        raise UserError(f"the disk holding {what} ({folder}) has {free // 1024} KiB free; a launch needs at least "
                        f"{MIN_FREE_BYTES // (1024 * 1024)} MiB there to keep its books: free some space")


def check_fit_for_launch(store: Store, run_root: Path) -> None:
    """Refuse (UserError) a launch into a database that is in memory, damaged, or on a full disk, or whose run
    folders are on a full disk."""
    path = sqlite_file(store.url)
    if path is not None:
        check_room(path.parent, "the database")
        try:
            with store.engine.connect() as conn:
                rows = [str(r[0]) for r in conn.execute(text("PRAGMA quick_check(3)"))]
        except DBAPIError as exc:
            raise UserError(f"the database {path} is damaged ({exc.orig}): nothing was launched; restore it from "
                            "a backup or point --db elsewhere") from exc
        if rows != ["ok"]:
            raise UserError(f"the database {path} is damaged ({rows[0]}): nothing was launched; restore it from "
                            "a backup or point --db elsewhere")
    check_room(run_root, "the run folders")
