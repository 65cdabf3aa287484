"""`image:` means a container: a runtime counts only when it really runs one, and none working is an error."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.container_runtime import find_runtime, no_runtime_message, probe
from gpuplan.jobs.runner import EXIT_FILE, LAUNCH_FILE, LOG_FILE, NodeLaunch
from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.local import LocalProvider

from support.fakeruntimes import failing_runtimes
from support.podmanhelp import busybox_image, podman_env


@pytest.fixture
def broken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Fake podman and docker first on PATH, failing as broken installs do."""
    monkeypatch.setenv("PATH", failing_runtimes(tmp_path / "fakebin")["PATH"])


def test_a_cli_that_answers_version_but_cannot_run_is_not_a_runtime(broken: None) -> None:
    choice = find_runtime()
    assert choice.runtime is None
    podman, docker = choice.probes
    assert not podman.works and "exit 126" in podman.detail and "OCI permission denied" in podman.detail
    assert not docker.works and "Cannot connect to the Docker daemon" in docker.detail
    message = no_runtime_message("busybox:1", choice)
    assert "busybox:1" in message and "podman:" in message and "docker:" in message
    assert "runtime: process" in message and "\n" not in message


def test_a_requested_runtime_is_the_only_one_tried(broken: None) -> None:
    assert [p.name for p in find_runtime("docker").probes] == ["docker"]


def test_real_podman_runs_a_test_container_without_an_image(monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/test-services.sh installs it)")
    for key, value in podman_env().items():
        monkeypatch.setenv(key, value)
    assert probe("podman").works


def test_real_podman_that_cannot_start_containers_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A real podman with an engine setting this machine refuses (crun, the default OCI runtime, fails here)."""
    if shutil.which("podman") is None:
        pytest.skip("podman is not installed (scripts/test-services.sh installs it)")
    conf = tmp_path / "containers.conf"
    conf.write_text('[engine]\nruntime = "no-such-oci-runtime"\n')
    monkeypatch.setenv("CONTAINERS_CONF", str(conf))
    found = probe("podman")
    assert not found.works and "a test container failed" in found.detail


def test_local_launch_check_refuses_an_image_with_no_runtime(broken: None, tmp_path: Path) -> None:
    request = LaunchRequest(run_id="r-0000000000", name="img", command="true", run_dir=str(tmp_path),
                            image="busybox:1", runtime="auto")
    with pytest.raises(UserError, match="needs a container runtime and none works here"):
        LocalProvider(root=tmp_path).check_launch(request)
    # runtime: process is the explicit way out, and a spec without an image needs nothing
    for fields in ({"runtime": "process"}, {"image": None}):
        plain = LaunchRequest(**{**request.__dict__, **fields})
        assert LocalProvider(root=tmp_path).check_launch(plain).notes == ()


def test_the_wrapper_never_runs_an_image_job_on_the_host(broken: None, tmp_path: Path) -> None:
    """Even if the launch check was passed (a runtime broke in between), the node fails instead of running the
    command outside its image."""
    run_dir = tmp_path / "run"
    node_dir = run_dir / "node-0"
    node_dir.mkdir(parents=True)
    marker = tmp_path / "ran-on-host"
    launch = NodeLaunch(run_id="r-hostless", name="img", argv=["/bin/sh", "-c", f"touch {marker}"],
                        run_dir=str(run_dir), runtime="auto", image="busybox:1")
    (node_dir / LAUNCH_FILE).write_text(launch.to_json())
    proc = subprocess.run([sys.executable, "-m", "gpuplan.jobs.runner", str(node_dir)], env=dict(os.environ),
                          capture_output=True, text=True, timeout=60)
    record = json.loads((node_dir / EXIT_FILE).read_text())
    assert proc.returncode == 127 and record["exit_code"] == 127
    assert "needs a container runtime and none works here" in record["cause"]
    assert not marker.exists(), (node_dir / LOG_FILE).read_text()


def test_podman_job_runs_in_its_image(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The positive case through the wrapper: auto picks podman and the command sees the image's root."""
    image = busybox_image()
    run_dir = tmp_path / "run"
    node_dir = run_dir / "node-0"
    node_dir.mkdir(parents=True)
    launch = NodeLaunch(run_id=f"r-{os.getpid():x}ci", name="img", run_dir=str(run_dir), runtime="auto",
                        image=image, argv=["/bin/sh", "-c", 'ls / > "$GPUPLAN_RUN_DIR/root.txt"'])
    (node_dir / LAUNCH_FILE).write_text(launch.to_json())
    subprocess.run([sys.executable, "-m", "gpuplan.jobs.runner", str(node_dir)],
                   env={**os.environ, **podman_env()}, capture_output=True, text=True, timeout=60, check=True)
    record = json.loads((node_dir / EXIT_FILE).read_text())
    assert record["runtime"] == "podman" and record["exit_code"] == 0
    assert "gpuplan" in (run_dir / "root.txt").read_text().split()  # the container's / (the host's has no /gpuplan)
