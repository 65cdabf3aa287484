"""GPUs into containers: the runtime arguments, the CDI spec podman needs, the devices this machine has."""

from __future__ import annotations

from pathlib import Path

from gpuplan.jobs.gpu_devices import cdi_problem, ensure_cdi_spec, gpu_run_args, has_cdi_spec, nvidia_devices
from gpuplan.jobs.runner import NodeLaunch, container_argv
from gpuplan.providers.local import LocalProvider

CDI = """cdiVersion: 0.5.0
kind: nvidia.com/gpu
devices:
- name: all
"""


def test_gpu_arguments_per_runtime() -> None:
    assert gpu_run_args("podman", 8) == ["--device", "nvidia.com/gpu=all"]
    assert gpu_run_args("docker", 1) == ["--gpus", "all"]
    assert gpu_run_args("podman", 0) == [] and gpu_run_args("docker", 0) == []


def test_container_argv_hands_the_gpus_over_before_the_image() -> None:
    launch = NodeLaunch(run_id="r-1", name="n", argv=["nvidia-smi"], run_dir="/r", image="img:1", gpus=8)
    for runtime, args in (("podman", ["--device", "nvidia.com/gpu=all"]), ("docker", ["--gpus", "all"])):
        argv = container_argv(launch, runtime, {})
        at = argv.index(args[0])
        assert argv[at:at + 2] == args and at < argv.index("img:1")
    cpu = container_argv(NodeLaunch(run_id="r-1", name="n", argv=["x"], run_dir="/r", image="img:1"), "podman", {})
    assert "--device" not in cpu and "--gpus" not in cpu


def test_nvidia_devices_are_the_numbered_device_files(tmp_path: Path) -> None:
    for name in ("nvidia0", "nvidia1", "nvidia10", "nvidiactl", "nvidia-uvm", "nvidia-modeset", "sda"):
        (tmp_path / name).touch()
    assert nvidia_devices(tmp_path) == [str(tmp_path / n) for n in ("nvidia0", "nvidia1", "nvidia10")]
    assert nvidia_devices(tmp_path / "absent") == []


def test_cdi_spec_found_or_generated_with_nvidia_ctk(tmp_path: Path) -> None:
    etc, run = tmp_path / "etc-cdi", tmp_path / "run-cdi"
    assert not has_cdi_spec([str(etc), str(run)])
    ctk = tmp_path / "nvidia-ctk"  # writes the spec where --output says, as `nvidia-ctk cdi generate` does
    ctk.write_text(f'#!/bin/sh\nout="${{3#--output=}}"\nprintf "%s" "{CDI}" > "$out"\n')
    ctk.chmod(0o755)
    status = ensure_cdi_spec([str(etc), str(run)], nvidia_ctk=str(ctk))
    assert status.ready and str(etc / "nvidia.yaml") in status.note
    assert has_cdi_spec([str(etc)])
    assert ensure_cdi_spec([str(etc)], nvidia_ctk="/nonexistent").note == "CDI spec for nvidia.com/gpu found"


def test_cdi_spec_that_cannot_be_made_says_how(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))  # no nvidia-ctk anywhere
    missing = ensure_cdi_spec([str(tmp_path / "cdi")])
    assert not missing.ready and "install the NVIDIA Container Toolkit" in missing.note
    failing = tmp_path / "nvidia-ctk"
    failing.write_text('#!/bin/sh\necho "ERRO failed to initialize NVML: Driver Not Loaded" >&2\nexit 1\n')
    failing.chmod(0o755)
    status = ensure_cdi_spec([str(tmp_path / "cdi")], nvidia_ctk=str(failing))
    assert not status.ready and "Driver Not Loaded" in status.note and "nvidia-ctk cdi generate" in status.note


def test_this_machine_without_nvidia_devices_has_no_gpus(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import gpuplan.jobs.gpu_devices as devices

    monkeypatch.setattr(devices, "nvidia_devices", lambda dev=Path("/dev"): [])
    local = LocalProvider(root="/tmp/unused")
    assert local.missing_gpus(8) == "this machine has no NVIDIA GPU (no /dev/nvidia0)"
    assert local.missing_gpus(0) is None
    monkeypatch.setattr(devices, "nvidia_devices", lambda dev=Path("/dev"): ["/dev/nvidia0", "/dev/nvidia1"])
    assert local.missing_gpus(2) is None
    assert local.missing_gpus(8) == "this machine has 2 NVIDIA GPU(s), not 8"



def test_cdi_problem_only_when_there_is_no_spec_and_no_nvidia_ctk(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    dirs = [str(tmp_path / "etc-cdi")]
    problem = cdi_problem(dirs)
    assert problem is not None and "no nvidia-ctk" in problem and "nvidia-ctk cdi generate" in problem
    assert cdi_problem(dirs, nvidia_ctk="/opt/nvidia-ctk") is None
    (tmp_path / "etc-cdi").mkdir()
    (tmp_path / "etc-cdi" / "nvidia.yaml").write_text(CDI)
    assert cdi_problem(dirs) is None


def test_local_launch_check_refuses_podman_gpus_without_any_way_to_cdi(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import functools
    import os
    import shutil

    import pytest

    import gpuplan.jobs.gpu_devices as devices
    from gpuplan.errors import UserError
    from gpuplan.providers.base import LaunchRequest

    from support.podmanhelp import busybox_image, podman_env

    image = busybox_image()
    for key, value in podman_env().items():
        monkeypatch.setenv(key, value)
    bin_dir = tmp_path / "bin"  # podman and nothing else: no nvidia-ctk
    bin_dir.mkdir()
    (bin_dir / "podman").symlink_to(shutil.which("podman") or "/usr/bin/podman")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/sbin:/sbin")
    monkeypatch.setattr(devices, "cdi_problem", functools.partial(devices.cdi_problem, [str(tmp_path / "cdi")]))
    request = LaunchRequest(run_id="r-0000000000", name="g", command="nvidia-smi", run_dir=str(tmp_path),
                            image=image, runtime="podman", gpus_per_node=8)
    local = LocalProvider(root=tmp_path)
    with pytest.raises(UserError, match=r"with GPUs: podman needs a CDI spec for nvidia.com/gpu .*nvidia-ctk cdi"):
        local.check_launch(request)
    (tmp_path / "cdi").mkdir()
    (tmp_path / "cdi" / "nvidia.yaml").write_text(CDI)
    assert local.check_launch(request).notes == (f"container: {image} in podman",)
