"""What gpuplan creates on disk is the user's alone: the database (0600, in a 0700 folder) and run folders (0700),
whatever the umask; folders that already existed keep their mode."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.paths import make_private_dir
from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.local import LocalProvider
from gpuplan.providers.outputs import store_output
from gpuplan.store.db import Store


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    """The most permissive umask a user could have: what gpuplan creates must still be private."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_a_new_database_and_its_folders_are_private(tmp_path: Path, open_umask: None) -> None:
    existing = tmp_path / "home"
    existing.mkdir(mode=0o755)
    db = existing / "xdg" / "gpuplan" / "gpuplan.db"
    store = Store.open(f"sqlite:///{db}")
    with store.session():
        pass
    store.close()
    assert mode(db.parent) == 0o700 and mode(db.parent.parent) == 0o700
    files = sorted(db.parent.iterdir())
    assert db in files
    assert {f.name: mode(f) for f in files} == {f.name: 0o600 for f in files}  # -wal/-shm follow the database
    assert mode(existing) == 0o755  # a folder that existed is not gpuplan's to change


def test_an_existing_database_keeps_its_mode(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    db.touch(mode=0o640)
    os.chmod(db, 0o640)
    Store.open(f"sqlite:///{db}").close()
    assert mode(db) == 0o640


def test_local_run_folders_are_private(tmp_path: Path, open_umask: None) -> None:
    run_dir = tmp_path / "home" / "runs" / "r-0123456789"
    provider = LocalProvider(root=run_dir.parent)
    [inst] = provider.launch(LaunchRequest(run_id="r-0123456789", name="private", command="echo hi",
                                           run_dir=str(run_dir), price_per_hour=Decimal(0),
                                           options={"argv": ["/bin/sh", "-c", "echo hi"]}))
    provider.terminate([inst.instance_id], grace_seconds=5)
    for folder in (run_dir.parent.parent, run_dir.parent, run_dir, run_dir / "node-0"):
        assert mode(folder) == 0o700, folder


def test_shipped_outputs_land_in_private_folders(tmp_path: Path, open_umask: None) -> None:
    run_dir = tmp_path / "runs" / "r-cloud00001"
    log = store_output(run_dir, 1, "job.log", b"step 1\n")
    assert mode(run_dir) == 0o700 and mode(run_dir / "node-1") == 0o700
    assert mode(log) == 0o600 and log.read_bytes() == b"step 1\n"  # the file too, not only its folder


def test_make_private_dir_is_idempotent(tmp_path: Path) -> None:
    target = tmp_path / "a" / "b"
    assert make_private_dir(target) == target
    assert make_private_dir(target) == target and mode(target) == 0o700
