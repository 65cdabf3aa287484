"""Each failure reason comes from a real failing container or process, in the runtime's own words."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.jobs.failure_cause import OomWatch, failure_cause, runtime_message
from gpuplan.jobs.gpu_devices import has_cdi_spec
from gpuplan.jobs.runner import EXIT_FILE, LAUNCH_FILE, LOG_FILE, NodeLaunch

from support.cgrouphelp import memory_limited
from support.podmanhelp import busybox_image, podman_env

HOG = "x = []\nwhile True:\n    x.append(bytearray(16 * 2**20))\n"


def run_node(tmp_path: Path, preexec=None, **fields: object) -> tuple[dict, str]:  # type: ignore[no-untyped-def]
    """Run one node through the real wrapper; (its exit record, its job log)."""
    run_dir = tmp_path / "run"
    node_dir = run_dir / "node-0"
    node_dir.mkdir(parents=True)
    values: dict = {"run_id": f"r-{os.getpid():x}fc", "name": "fails", "run_dir": str(run_dir), **fields}
    (node_dir / LAUNCH_FILE).write_text(NodeLaunch(**values).to_json())
    subprocess.run([sys.executable, "-m", "gpuplan.jobs.runner", str(node_dir)], env={**os.environ, **podman_env()},
                   capture_output=True, text=True, timeout=120, preexec_fn=preexec)
    return json.loads((node_dir / EXIT_FILE).read_text()), (node_dir / LOG_FILE).read_text()


def test_image_pull_failure_names_the_image_and_the_registry_message(tmp_path: Path) -> None:
    busybox_image()  # podman present
    image = "127.0.0.1:9/gpuplan/absent:1"  # a registry nobody listens on: the pull fails for real
    record, log = run_node(tmp_path, runtime="podman", image=image, argv=["true"])
    assert record["exit_code"] == 125, log
    assert record["cause"].startswith(f"image pull failed for {image}: ")
    assert "pinging container registry 127.0.0.1:9" in record["cause"] and "connection refused" in record["cause"]


def test_no_such_command_in_the_image(tmp_path: Path) -> None:
    record, log = run_node(tmp_path, runtime="podman", image=busybox_image(), argv=["no-such-tool", "--x"])
    assert record["exit_code"] != 0, log
    assert record["cause"].startswith(f"no such command in the image {busybox_image()}: ")
    # The container's init (--init: catatonit under podman) is what fails to exec the command, and says so.
    assert "failed to exec pid1: No such file or directory" in record["cause"]


def test_no_such_command_as_a_process(tmp_path: Path) -> None:
    record, log = run_node(tmp_path, runtime="process", argv=["/bin/sh", "-c", "no-such-tool --x"])
    assert record["exit_code"] == 127, log
    assert record["cause"].startswith("no such command (exit 127): ") and "no-such-tool" in record["cause"]


def test_gpu_job_in_podman_without_a_cdi_spec(tmp_path: Path) -> None:
    if has_cdi_spec():
        pytest.skip("this machine has a CDI spec for nvidia.com/gpu")
    record, log = run_node(tmp_path, runtime="podman", image=busybox_image(), argv=["true"], gpus=1)
    assert record["exit_code"] in (125, 126), log
    assert record["cause"].startswith("GPU not available in the container (podman): ")
    assert "unresolvable CDI devices nvidia.com/gpu=all" in record["cause"] and "nvidia-ctk" in record["cause"]
    assert "no CDI spec for nvidia.com/gpu" in log  # the wrapper tried to make one first and said why it could not


def test_out_of_memory_process_with_the_cgroup_oom_count(tmp_path: Path) -> None:
    with memory_limited(256 * 2**20, "gpuplan-oom-test") as enter:
        record, log = run_node(tmp_path, preexec=enter, runtime="process", argv=[sys.executable, "-c", HOG])
    assert record["exit_code"] == -9, log  # SIGKILLed by the kernel (a shell would report 137)
    assert record["cause"].startswith("out of memory: the kernel's OOM killer ended the job (exit -9; memory cgroup ")
    assert "oom_kill +1" in record["cause"]


def test_out_of_memory_container_with_the_kernels_oom_count(tmp_path: Path) -> None:
    """A real container over its memory limit: podman exits 137. Its cgroup is podman's, not the caller's, so the
    kernel's own count (/proc/vmstat oom_kill) is what says it was the OOM killer."""
    image = busybox_image()
    proc = subprocess.Popen(["podman", "run", "--rm", "--memory", "32m", "--memory-swap", "32m", image, "sh", "-c",
                             "x=$(cat /dev/urandom)"], env={**os.environ, **podman_env()},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=tmp_path)  # conmon leaves an `oom` marker file in its working folder
    watch = OomWatch.start(proc.pid)
    output, _ = proc.communicate(timeout=120)
    assert proc.returncode == 137, output
    cause = failure_cause(137, runtime="podman", image=image, output=output, oom=watch.kills())
    assert cause is not None and cause.startswith("out of memory: the kernel's OOM killer ended the job (exit 137; ")
    assert "oom_kill +" in cause


def test_sigkill_without_an_oom_kill_is_not_called_out_of_memory(tmp_path: Path) -> None:
    record, log = run_node(tmp_path, runtime="process", argv=["/bin/sh", "-c", "kill -9 $$"])
    assert record["exit_code"] == -9, log
    assert record["cause"].startswith("killed by SIGKILL (exit -9); not out of memory")


def test_an_ordinary_failure_keeps_its_exit_code_only(tmp_path: Path) -> None:
    record, _ = run_node(tmp_path, runtime="process", argv=["/bin/sh", "-c", "exit 3"])
    assert record["exit_code"] == 3 and "cause" not in record


def test_docker_messages() -> None:
    """docker's wording (no daemon here to produce it: these are its documented messages)."""
    pull = ("Unable to find image 'ghcr.io/x/y:1' locally\ndocker: Error response from daemon: manifest unknown.\n"
            "See 'docker run --help'.")
    assert runtime_message(pull) == "manifest unknown."
    assert failure_cause(125, runtime="docker", image="ghcr.io/x/y:1", output=pull) == \
        "image pull failed for ghcr.io/x/y:1: manifest unknown."
    gpu = ('docker: Error response from daemon: could not select device driver "" with capabilities: [[gpu]].')
    assert failure_cause(125, runtime="docker", image="i", output=gpu).startswith("GPU not available")


def test_a_runtime_without_an_init_says_what_to_install() -> None:
    said = "Error: container-init binary not found on the host: stat /usr/libexec/podman/catatonit: no such file"
    cause = failure_cause(125, runtime="podman", image="img", output=said)
    assert cause is not None and cause.startswith("podman has no init for --init") and "install catatonit" in cause
