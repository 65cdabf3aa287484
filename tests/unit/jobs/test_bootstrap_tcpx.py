"""Issue 32 item 3 (GCP A3): on a VM with the GPU data NICs of a multi-node A3 High run, the container gets the RxDM
socket folder and Google's GPUDirect-TCPX NCCL environment, and the job log says when the image has no TCPX plugin
or the VM runs no RxDM; any other VM gets nothing. The boot script runs for real with bash and real curl against
the fake GCE metadata server (tests/support/fakes/interruption_metadata.py); `docker` is the recording stand-in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.gcp.boot import gcp_boot_cloud
from gpuplan.providers.gcp.boot_fabric import TCPX_ENV
from unit.jobs.test_bootstrap_outcomes import DOCKER_SHIM, _wait_gone, calls

from support.fakes.interruption_metadata import serve_interruption_metadata


@pytest.mark.parametrize(("machine", "nics", "has_plugin", "rxdm"), [
    ("a3-highgpu-8g", 5, True, True),
    ("a3-highgpu-8g", 5, False, False),
    ("a3-highgpu-8g", 1, True, True),  # a single A3 node: no data NICs, nothing to do
    ("a2-highgpu-8g", 1, True, True),
])
def test_a_tcpx_vm_gives_the_container_the_rxdm_and_nccl_settings(tmp_path: Path, machine: str, nics: int,
                                                                  has_plugin: bool, rxdm: bool) -> None:
    bin_dir = tmp_path / "shim" / "bin"
    bin_dir.mkdir(parents=True)
    docker = bin_dir / "docker"
    docker.write_text(DOCKER_SHIM.replace("PYTHON", sys.executable, 1))
    docker.chmod(0o755)
    tcpx = tmp_path / "tcpx"
    if rxdm:
        tcpx.mkdir()
    base = tmp_path / "base"
    with serve_interruption_metadata() as metadata:
        metadata.state.machine_type, metadata.state.nics = machine, nics
        cloud = gcp_boot_cloud(metadata_url=metadata.metadata_url, gcs_endpoint="http://127.0.0.1:9",
                               secretmanager_endpoint="http://127.0.0.1:9", compute_endpoint="http://127.0.0.1:9")
        script = render_boot_script(BootPlan(run_id="r-tcpx", name="tcpx", base_dir=str(base), poweroff=False,
                                             argv=["true"], image="example/train:1", runtime="docker", cloud=cloud))
        path = tmp_path / "boot.sh"
        path.write_text(script)
        env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", SHIM_ROOT=str(tmp_path / "shim"),
                   GPUPLAN_TCPX_DIR=str(tcpx), IMAGE_HAS_OFI="1" if has_plugin else "0")
        subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
        assert _wait_gone(path)
    [run_call] = [c for c in calls(tmp_path / "shim", "docker") if c[0] == "run" and "--entrypoint" not in c]
    log = (base / "run" / "job.log").read_text()
    tcpx_vm = machine == "a3-highgpu-8g" and nics == 5
    given = [run_call[i + 1] for i, arg in enumerate(run_call[:-1]) if arg == "-e" and "=" in run_call[i + 1]]
    assert (f"{tcpx}:/run/tcpx" in run_call) is tcpx_vm
    assert (set(TCPX_ENV) <= set(given)) is tcpx_vm
    assert ("no GPUDirect-TCPX NCCL plugin" in log) is (tcpx_vm and not has_plugin)
    assert ("no GPUDirect-TCPX receive-datapath manager" in log) is (tcpx_vm and not rxdm)
