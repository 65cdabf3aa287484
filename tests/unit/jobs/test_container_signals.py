"""A stop reaches the job: in a real podman container (an init as PID 1, the command exec'd or forwarded) and as a
plain process (the command exec'd), the job's own SIGTERM handler saves its checkpoint.

The container's userland is this machine's /usr (support.hostimage): Debian's dash as /bin/sh, as on a cloud image,
so `sh -c "python3 train.py"` does not exec by itself. Before the fix, `sh` was the container's PID 1 and the kernel
dropped the SIGTERM; nothing was saved and the container was killed after the grace period.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.jobs.exec_form import exec_script
from gpuplan.jobs.runner import NodeLaunch, NodeRunner
from gpuplan.providers.aws.boot import aws_boot_cloud

from support.fakes.interruption_metadata import serve_interruption_metadata
from support.hostimage import host_userland_env, host_userland_image
from support.reaper import reap
from support.waiting import wait_for

# A training loop that saves where it is when SIGTERM comes (as a torch job saves its state_dict), then exits 143.
TRAIN = r"""
import json, os, signal, sys, time
ck = os.environ["GPUPLAN_CHECKPOINT_DIR"]
os.makedirs(ck, exist_ok=True)
step = 0
def save(signum, frame):
    with open(os.path.join(ck, "state.json"), "w") as fh:
        json.dump({"step": step, "signal": signum, "ppid": os.getppid()}, fh)
    print("saved at", step, flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, save)
open(os.path.join(os.environ["GPUPLAN_RUN_DIR"], "started"), "w").close()
while True:
    step += 1
    time.sleep(0.05)
"""


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> object:
    yield
    reap(tmp_path)


def test_exec_form_of_commands() -> None:
    assert exec_script("python3 train.py --lr 3e-4") == "exec python3 train.py --lr 3e-4"
    assert exec_script("OMP_NUM_THREADS=4 torchrun train.py") == "OMP_NUM_THREADS=4 exec torchrun train.py"
    for script in ("cd src && python3 train.py", "set -e\npython3 train.py", "python3 t.py | tee log",
                   "exec python3 t.py", "cd /x", "A=1", "echo $(date)"):
        assert exec_script(script) == script


@dataclass
class RunningPodmanJob:
    """TRAIN running under a NodeRunner in a real podman container, its runner on a thread: what the stop tests
    share."""

    runner: NodeRunner
    run_dir: Path
    node_dir: Path
    worker: threading.Thread
    codes: list[int]

    def finish(self) -> None:
        self.worker.join(60)

    def saved(self) -> Path:
        return self.run_dir / "ckpt" / "state.json"


def start_podman_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_id: str,
                     argv: list[str]) -> RunningPodmanJob:
    """Start TRAIN in a podman container under a NodeRunner and return once it has installed its SIGTERM handler."""
    image = host_userland_image()
    for key, value in host_userland_env(tmp_path).items():
        monkeypatch.setenv(key, value)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "train.py").write_text(TRAIN)
    node_dir = tmp_path / "node"
    node_dir.mkdir()
    launch = NodeLaunch(run_id=f"{run_id}{os.getpid():x}", name="sig", run_dir=str(run_dir), runtime="podman",
                        image=image, argv=argv, checkpoint_dir="ckpt")
    runner = NodeRunner(node_dir, launch)
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(runner.run()))
    worker.start()
    wait_for(lambda: (run_dir / "started").exists())
    return RunningPodmanJob(runner, run_dir, node_dir, worker, codes)


def test_gpuplan_stop_reaches_the_job_in_a_podman_container(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    job = start_podman_job(tmp_path, monkeypatch, "r-sig", ["/bin/sh", "-c", "python3 /gpuplan/run/train.py"])
    job.runner.stop("stopped", grace=20)
    job.finish()
    log = (job.node_dir / "job.log").read_text()
    state = json.loads(job.saved().read_text())  # old code: never written
    assert state["signal"] == 15 and state["step"] > 0, log
    assert job.codes == [143] and "saved at" in log
    assert state["ppid"] == 1  # exec'd: the init (PID 1) is the program's parent, no shell in between


def test_a_stop_reaches_the_container_when_the_runtime_client_cannot_forward_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh-clone CI run lost a stop: the runner signalled `podman run`, which forwards a SIGTERM only once its
    signal proxy is installed (before podman 4.4 that came after the container started: containers/podman#16901), and
    the job exited without saving. The stop now goes to the container through the runtime (`podman kill`), not
    through the client. Shown deterministically with a client that cannot forward anything (SIGSTOPped): on the old
    code nothing reaches the job until the grace period ends and the container is removed."""
    job = start_podman_job(tmp_path, monkeypatch, "r-sigdirect", ["python3", "/gpuplan/run/train.py"])
    assert job.runner.child is not None
    client = job.runner.child.pid
    os.kill(client, signal.SIGSTOP)
    try:
        job.runner.stop("stopped", grace=30)
        wait_for(job.saved().exists, timeout=20)  # old code: never, while the client is stopped
    finally:
        os.kill(client, signal.SIGCONT)
    job.finish()
    state = json.loads(job.saved().read_text())
    assert state["signal"] == 15 and state["step"] > 0
    # The job exited 143; a client frozen until after `--rm` removed the container cannot read that any more and
    # exits 127 ("container has already been removed"): an artefact of freezing it, not of the stop.
    assert job.codes in ([143], [127]), (job.node_dir / "job.log").read_text()


def test_a_spot_notice_reaches_a_script_job_in_the_boot_scripts_container(tmp_path: Path) -> None:
    """A `run:`-style script (not one command) under the boot script's container: the forwarder passes the
    notice's SIGTERM to the program; the checkpoint lands in the run's storage before the machine goes."""
    image = host_userland_image()
    base, storage = tmp_path / "machine", tmp_path / "shared"
    (base / "run").mkdir(parents=True)
    (base / "run" / "train.py").write_text(TRAIN)
    with serve_interruption_metadata() as metadata:
        plan = BootPlan(run_id=f"r-notice{os.getpid():x}", name="notice", image=image, runtime="podman",
                        argv=["/bin/sh", "-c", "cd /gpuplan/run && python3 train.py"], base_dir=str(base),
                        poweroff=False, checkpoint_dir="ckpt", checkpoint_url=str(storage / "checkpoints"),
                        checkpoint_sync_seconds=3600, storage_url=str(storage / "node-0"),
                        interruption_watch=True, notice_poll_seconds=1, cloud=aws_boot_cloud(metadata.imds_url))
        (tmp_path / "boot.sh").write_text(render_boot_script(plan))
        proc = subprocess.Popen(["bash", str(tmp_path / "boot.sh")], cwd=tmp_path, start_new_session=True,
                                env={**os.environ, **host_userland_env(tmp_path)})
        wait_for(lambda: (base / "run" / "started").exists() or proc.poll() is not None)
        metadata.state.announce("terminate")
        code = proc.wait(timeout=90)
    log = (base / "run" / "job.log").read_text()
    assert code == 143, log + (base / "boot.log").read_text()
    assert json.loads((base / "run" / "exit.json").read_text())["reason"] == "interrupted"
    saved = json.loads((storage / "checkpoints" / "state.json").read_text())  # old code: no checkpoint at all
    assert saved["signal"] == 15 and saved["step"] > 0


def test_a_spot_notice_reaches_the_container_when_the_runtime_client_cannot_forward_it(tmp_path: Path) -> None:
    """The boot script's stop on a VM goes to the container through the runtime too (`podman kill --signal`), not
    only through the `podman run` client's sig-proxy: with the client frozen (as one that has not installed its
    proxy yet), the notice still reaches the job, which saves. Old code: the SIGTERM waits at the frozen client."""
    image = host_userland_image()
    base = tmp_path / "machine"
    (base / "run").mkdir(parents=True)
    (base / "run" / "train.py").write_text(TRAIN)
    with serve_interruption_metadata() as metadata:
        plan = BootPlan(run_id=f"r-frozen{os.getpid():x}", name="frozen", image=image, runtime="podman",
                        argv=["python3", "/gpuplan/run/train.py"], base_dir=str(base), poweroff=False,
                        checkpoint_dir="ckpt", interruption_watch=True, notice_poll_seconds=1,
                        cloud=aws_boot_cloud(metadata.imds_url))
        (tmp_path / "boot.sh").write_text(render_boot_script(plan))
        proc = subprocess.Popen(["bash", str(tmp_path / "boot.sh")], cwd=tmp_path, start_new_session=True,
                                env={**os.environ, **host_userland_env(tmp_path)})
        wait_for(lambda: (base / "run" / "started").exists() or proc.poll() is not None)
        client = int((base / "run" / "job.pid").read_text())
        os.kill(client, signal.SIGSTOP)
        saved = base / "run" / "ckpt" / "state.json"
        try:
            metadata.state.announce("terminate")
            wait_for(saved.exists, timeout=30)  # old code: never, while the client is frozen
        finally:
            os.kill(client, signal.SIGCONT)
        code = proc.wait(timeout=90)
    # 143 from the job; 127 when the frozen client resumed after `--rm` removed the container (see above).
    assert code in (143, 127), (base / "run" / "job.log").read_text() + (base / "boot.log").read_text()
    assert json.loads((base / "run" / "exit.json").read_text())["reason"] == "interrupted"
    state = json.loads(saved.read_text())
    assert state["signal"] == 15 and state["step"] > 0


def test_a_process_job_is_the_program_itself(tmp_path: Path) -> None:
    """The boot script's process runtime: job.pid is the program (exec'd), so a stop reaches it directly."""
    base = tmp_path / "machine"
    plan = BootPlan(run_id="r-execd", name="execd", base_dir=str(base), poweroff=False,
                    argv=["/bin/sh", "-c", 'python3 -c "import time; time.sleep(30)"'], max_hours=3 / 3600)
    (tmp_path / "boot.sh").write_text(render_boot_script(plan))
    proc = subprocess.Popen(["bash", str(tmp_path / "boot.sh")], cwd=tmp_path, start_new_session=True)
    pid_file = base / "run" / "job.pid"
    wait_for(lambda: pid_file.exists() and Path(f"/proc/{pid_file.read_text().strip()}/cmdline").exists())
    time.sleep(0.5)  # setsid, then the shell, then the exec
    cmdline = Path(f"/proc/{pid_file.read_text().strip()}/cmdline").read_bytes().split(b"\0")
    proc.wait(timeout=60)
    assert cmdline[0].endswith(b"python3"), cmdline  # old code: /bin/sh
