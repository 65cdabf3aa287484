"""Listing and downloading a run's stored checkpoints: a folder storage, and names that would leave it."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.providers.base import ProviderError
from gpuplan.providers.stored_files import download, list_files, safe_name


def test_a_folder_storage_lists_and_downloads_its_files(tmp_path: Path) -> None:
    store = tmp_path / "shared" / "r-1" / "checkpoints"
    (store / "sub").mkdir(parents=True)
    (store / "model.pt").write_bytes(b"x" * 10)
    (store / "sub" / "opt.pt").write_bytes(b"y")
    (store / ".partial.tmp").write_bytes(b"z")  # a copy in progress is not a checkpoint
    files = list_files(str(store))
    assert [(f.name, f.size) for f in files] == [("model.pt", 10), ("sub/opt.pt", 1)]
    target = download(str(store), "sub/opt.pt", tmp_path / "dl")
    assert target == tmp_path / "dl" / "sub" / "opt.pt" and target.read_bytes() == b"y"
    assert list_files(str(tmp_path / "missing")) == []


@pytest.mark.parametrize("name", ["../evil", "/etc/passwd", "a//b", "a/../../b", ""])
def test_a_name_that_leaves_the_folder_is_refused(tmp_path: Path, name: str) -> None:
    assert safe_name(name) is None
    with pytest.raises(ProviderError, match="refusing"):
        download(str(tmp_path), name, tmp_path / "dl")
