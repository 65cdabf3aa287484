"""The job's code to a cloud machine: checked when the launch is decided, packed and uploaded when it starts.

A cloud machine boots an image and the boot script (gpuplan.jobs.bootstrap); a `runtime: process` job's command
(`python train.py`) needs the files next to its spec. With run storage the spec's folder is packed
(gpuplan.jobs.code_bundle: .gitignore honoured, size-capped) into `<storage>/<run id>/code.tar.gz`, which the boot
script unpacks before the command runs; a relaunch finds it there. A process job that would reach a cloud
machine with no way to get the code its command names (a file of its folder, like `train.py`; no storage, no
image) is refused before anything is recorded (exit 2).
"""

from __future__ import annotations

import shlex
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.errors import UserError
from gpuplan.jobs.code_bundle import MAX_CODE_BYTES, bundle, code_files
from gpuplan.jobs.storage import run_storage

if TYPE_CHECKING:
    from gpuplan.jobs.spec import JobSpec
    from gpuplan.launching.offer import LaunchPlan
    from gpuplan.providers.base import LaunchRequest, Provider


def check_code(spec: JobSpec, source_dir: str | None, provider: Provider, cloud: str) -> None:
    """UserError (one line) for a process job a cloud machine could not run, or a folder too big to ship."""
    if not provider.boots_from_script:
        return
    storage = run_storage(spec)
    if not spec.wants_container() and storage is None:
        named = local_files_named(spec, source_dir)
        if named:
            raise UserError(f"a process job (no image) on {cloud} cannot reach {named[0]}: its folder is not "
                            "shipped without run storage; give the spec a `storage:` (gpuplan ships the folder "
                            "there) or an `image:` that holds the code")
    if storage is not None and source_dir:
        folder = Path(source_dir)
        size = sum((folder / name).stat().st_size for name in code_files(folder))
        if size > MAX_CODE_BYTES:
            raise UserError(f"the job's folder {folder} holds {size / 1e6:.0f} MB of files to ship, more than the "
                            f"{MAX_CODE_BYTES / 1e6:.0f} MB cap; list what the machine does not need in .gitignore")


def local_files_named(spec: JobSpec, source_dir: str | None) -> list[str]:
    """The words of the job's command that are files in its folder (`python train.py` next to the spec): code the
    machine needs. A command naming none (`nvidia-smi`, `python -c ...`, a path on the image) needs no folder."""
    if not source_dir:
        return []
    base = Path(source_dir) / (spec.workdir or "") if not (spec.workdir or "").startswith("/") else None
    if base is None:
        return []
    try:
        words = shlex.split(spec.shell_script, comments=True)
    except ValueError:
        words = spec.shell_script.split()
    found = []
    for word in words:
        if word.startswith("-") or "=" in word or word.startswith("/"):
            continue
        try:
            if (base / word).is_file():
                found.append(word)
        except OSError:
            continue
    return found


def ship_code(plan: LaunchPlan, request: LaunchRequest, provider: Provider) -> None:
    """Pack the spec's folder and put it where the boot script fetches it (a cloud launch with run storage)."""
    from gpuplan.providers.base import ProviderError
    from gpuplan.providers.stored_files import upload

    url = request.options.get("code_url")
    if not url or not provider.boots_from_script or not plan.source_dir:
        return
    with tempfile.TemporaryDirectory(prefix="gpuplan-code-") as tmp:
        try:
            packed = bundle(Path(plan.source_dir), Path(tmp) / "code.tar.gz")
        except ValueError as exc:  # checked at plan time; the folder changed since: the launch fails, recorded
            raise ProviderError(str(exc)) from exc
        upload(packed.path, str(url), request.region)
