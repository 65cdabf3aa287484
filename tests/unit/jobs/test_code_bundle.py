"""Packing the job's folder for a cloud machine: .gitignore honoured (with or without git), symlinks and .git
left out, the size capped."""

from __future__ import annotations

import subprocess
import tarfile
from pathlib import Path

import pytest

from gpuplan.jobs.code_bundle import bundle, code_files


def tree(root: Path) -> Path:
    (root / "pkg").mkdir(parents=True)
    (root / "train.py").write_text("print('hi')\n")
    (root / "pkg" / "model.py").write_text("x = 1\n")
    (root / "ckpt").mkdir()
    (root / "ckpt" / "last.pt").write_bytes(b"w" * 100)
    (root / "notes.log").write_text("log\n")
    (root / ".gitignore").write_text("# comment\nckpt/\n*.log\n")
    (root / "link.py").symlink_to("/etc/passwd")
    return root


def test_without_git_the_folders_gitignore_is_honoured(tmp_path: Path) -> None:
    root = tree(tmp_path / "job")
    assert code_files(root) == [".gitignore", "pkg/model.py", "train.py"]


def test_in_a_git_work_tree_git_decides(tmp_path: Path) -> None:
    root = tree(tmp_path / "repo")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / ".git" / "info" / "exclude").write_text("pkg/\n")  # git's own excludes count too
    assert code_files(root) == [".gitignore", "train.py"]


def test_the_bundle_unpacks_to_the_files_and_the_cap_refuses_a_big_folder(tmp_path: Path) -> None:
    root = tree(tmp_path / "job")
    packed = bundle(root, tmp_path / "code.tar.gz")
    assert (packed.files, packed.size) == (3, len("print('hi')\n") + len("x = 1\n") + len("# comment\nckpt/\n*.log\n"))
    with tarfile.open(packed.path) as tar:
        assert sorted(tar.getnames()) == [".gitignore", "pkg/model.py", "train.py"]
    (root / "weights.bin").write_bytes(b"0" * 5000)
    with pytest.raises(ValueError, match=r"more than the .* cap \(biggest: weights.bin"):
        bundle(root, tmp_path / "again.tar.gz", cap_bytes=1000)
