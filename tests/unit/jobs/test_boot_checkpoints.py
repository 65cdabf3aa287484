"""The boot script's checkpoints and interruption watch, run for real with bash (a folder as the run's storage, a
fake metadata server on 127.0.0.1 announcing the interruption)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.aws.boot import aws_boot_cloud
from gpuplan.providers.gcp.boot import gcp_boot_cloud

from support.fakes.interruption_metadata import serve_interruption_metadata
from support.reaper import reap


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> object:
    """The jobs run in their own session (see support.reaper): a killed "machine" must not leave them running."""
    yield
    reap(tmp_path)

# A job that checkpoints like a real one: resumes from $GPUPLAN_CHECKPOINT_DIR/step, counts, saves on SIGTERM.
COUNTER_JOB = r"""
ck="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$ck"
step=$(cat "$ck/step" 2>/dev/null || echo 0)
echo "resumed at $step"
trap 'echo "$step" > "$ck/step.tmp" && mv "$ck/step.tmp" "$ck/step"; echo "saved at $step"; exit 143' TERM
while [ "$step" -lt "$1" ]; do
  step=$((step + 1)); echo "{\"step\": $step}" >> "$GPUPLAN_METRICS"; sleep 0.1
done
echo "$step" > "$ck/step"; echo "finished at $step"
"""


def run_script(plan: BootPlan, cwd: Path) -> subprocess.Popen[str]:
    path = cwd / f"boot-{time.monotonic_ns()}.sh"
    path.write_text(render_boot_script(plan))
    return subprocess.Popen(["bash", str(path)], cwd=cwd, text=True, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def plan(base: Path, storage: Path, steps: int, **extra: object) -> BootPlan:
    values: dict = dict(run_id="r-ckpt", name="counter", argv=["/bin/bash", "-c", COUNTER_JOB, "job", str(steps)],
                        base_dir=str(base), poweroff=False, checkpoint_dir="ckpt",
                        checkpoint_url=str(storage / "r-ckpt" / "checkpoints"),
                        storage_url=str(storage / "r-ckpt" / "node-0"))
    values.update(extra)
    return BootPlan(**values)


@pytest.mark.parametrize("checkpoint_dir", ["ckpt", "/gpuplan/run/ckpt"])
def test_a_process_job_gets_an_absolute_checkpoint_dir_in_the_run_folder(tmp_path: Path, checkpoint_dir: str) -> None:
    """The old `${GPUPLAN_CHECKPOINT_DIR/#/gpuplan/run/$RUN_DIR}` made `gpuplan/run//var/...`: a relative path."""
    base = tmp_path / "base"
    job = ["/bin/sh", "-c", 'printf %s "$GPUPLAN_CHECKPOINT_DIR" > "$GPUPLAN_RUN_DIR/ckpt-path"']
    proc = run_script(BootPlan(run_id="r-abs", name="n", argv=job, base_dir=str(base), poweroff=False,
                               checkpoint_dir=checkpoint_dir, workdir=str(tmp_path / "w")), tmp_path)
    assert proc.wait(timeout=60) == 0, (base / "boot.log").read_text()
    seen = (base / "run" / "ckpt-path").read_text()
    assert os.path.isabs(seen) and seen == str(base / "run" / "ckpt"), seen


def test_checkpoints_and_outputs_go_to_a_shared_folder_and_come_back_on_the_next_machine(tmp_path: Path) -> None:
    storage = tmp_path / "shared"
    first = run_script(plan(tmp_path / "m1", storage, 5), tmp_path)
    assert first.wait(timeout=60) == 0, (tmp_path / "m1" / "boot.log").read_text()
    assert (storage / "r-ckpt" / "checkpoints" / "step").read_text().strip() == "5"
    shipped = storage / "r-ckpt" / "node-0"
    assert json.loads((shipped / "exit.json").read_text())["exit_code"] == 0
    assert "finished at 5" in (shipped / "job.log").read_text()

    # A fresh machine (a new base folder) with more steps to do: it starts from the stored checkpoint and the
    # node's stored metrics, so the metrics continue in one file.
    second = run_script(plan(tmp_path / "m2", storage, 8), tmp_path)
    assert second.wait(timeout=60) == 0, (tmp_path / "m2" / "boot.log").read_text()
    log = (tmp_path / "m2" / "run" / "job.log").read_text()
    assert "resumed at 5" in log and "finished at 8" in log and "restored checkpoints" in log
    steps = [json.loads(line)["step"] for line in (shipped / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 9))


@pytest.mark.parametrize("cloud", ["aws", "gce"])
def test_an_interruption_notice_stops_the_job_which_saves_and_the_checkpoint_is_stored(tmp_path: Path,
                                                                                       cloud: str) -> None:
    storage = tmp_path / "shared"
    with serve_interruption_metadata() as metadata:
        hooks = (aws_boot_cloud(metadata.imds_url) if cloud == "aws"
                 else gcp_boot_cloud(metadata_url=metadata.metadata_url))
        machine = tmp_path / "m1"
        proc = run_script(plan(machine, storage, 100000, interruption_watch=True, notice_poll_seconds=1,
                               checkpoint_sync_seconds=3600, cloud=hooks), tmp_path)
        metrics = machine / "run" / "metrics.jsonl"
        wait_for(lambda: metrics.exists() and len(metrics.read_text().splitlines()) >= 5)
        assert proc.poll() is None
        metadata.state.announce("terminate")
        code = proc.wait(timeout=30)
        statuses = [s for _m, _p, s in metadata.state.requests]
        requests = list(metadata.state.requests)
    assert code == 143, (machine / "boot.log").read_text()
    record = json.loads((machine / "run" / "exit.json").read_text())
    assert (record["exit_code"], record["reason"]) == (143, "interrupted")
    notice = json.loads((storage / "r-ckpt" / "node-0" / "interruption.json").read_text())
    assert notice["cloud"] == cloud and notice["action"] == ("terminate" if cloud == "aws" else "preempted")
    saved = int((storage / "r-ckpt" / "checkpoints" / "step").read_text())
    assert saved >= 5
    assert f"saved at {saved}" in (machine / "run" / "job.log").read_text()
    assert 401 not in statuses and 403 not in statuses  # IMDSv2 token first; GCE's Metadata-Flavor header
    if cloud == "aws":
        assert requests[0][:2] == ("PUT", "/latest/api/token")
        assert ("GET", "/latest/meta-data/spot/instance-action", 200) in requests
    else:
        assert ("GET", "/computeMetadata/v1/instance/preempted", 200) in requests


def test_checkpoints_are_copied_every_interval_so_a_killed_machine_loses_at_most_one(tmp_path: Path) -> None:
    """No notice (the machine just dies): what the periodic copy stored is what the next machine resumes from."""
    storage = tmp_path / "shared"
    machine = tmp_path / "m1"
    job = ["/bin/bash", "-c", 'mkdir -p "$GPUPLAN_CHECKPOINT_DIR"; i=0; while :; do i=$((i + 1)); '
           'echo "$i" > "$GPUPLAN_CHECKPOINT_DIR/step"; sleep 0.2; done']
    proc = run_script(plan(machine, storage, 0, argv=job, checkpoint_sync_seconds=1), tmp_path)
    stored = storage / "r-ckpt" / "checkpoints" / "step"
    wait_for(lambda: stored.exists() and int(stored.read_text() or 0) >= 3)
    os.killpg(proc.pid, signal.SIGKILL)  # the machine is gone: no exit record, no final copy
    proc.wait(timeout=10)
    assert not (storage / "r-ckpt" / "node-0" / "exit.json").exists()
    assert int(stored.read_text()) >= 3


def test_the_jobs_code_is_unpacked_and_a_relative_workdir_is_inside_it(tmp_path: Path) -> None:
    from gpuplan.jobs.code_bundle import bundle

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "hello.sh").write_text('echo "hello from $(pwd)" > "$GPUPLAN_RUN_DIR/out.txt"\n')
    storage = tmp_path / "shared" / "r-code"
    storage.mkdir(parents=True)
    bundle(src, storage / "code.tar.gz")
    base = tmp_path / "m1"
    proc = run_script(BootPlan(run_id="r-code", name="n", argv=["/bin/sh", "-c", "sh hello.sh"], base_dir=str(base),
                               poweroff=False, workdir="sub", code_url=str(storage / "code.tar.gz")), tmp_path)
    assert proc.wait(timeout=60) == 0, (base / "boot.log").read_text()
    assert (base / "run" / "out.txt").read_text().strip() == f"hello from {base / 'code' / 'sub'}"


def test_only_a_run_with_gs_storage_carries_the_json_api_copies(tmp_path: Path) -> None:
    """gs:// checkpoints and code go through curl and the JSON API, GCP's hooks (run for real in
    test_boot_checkpoints_gcs.py);
    no script calls the Cloud SDK, which the image may not have."""
    import shutil

    common = {"run_id": "r-gs", "name": "n", "argv": ["true"], "checkpoint_dir": "ck", "interruption_watch": True}
    plain = render_boot_script(BootPlan(**common, checkpoint_url="/shared/r-gs/checkpoints"))
    with_gs = render_boot_script(BootPlan(**common, checkpoint_url="gs://bkt/runs/r-gs/checkpoints",
                                          code_url="gs://bkt/runs/r-gs/code.tar.gz", cloud=gcp_boot_cloud()))
    for script in (plain, with_gs):
        assert "gcloud" not in script and "gsutil" not in script
    assert "gcs_push_dir" not in plain and "gcs_pull_dir" not in plain
    assert 'gs://*) gcs_push_dir "$1" "$2" ;;' in with_gs and '*) gcs_pull_dir "$1" "$2" ;;' in with_gs
    assert '"$GCS_ENDPOINT/storage/v1/b/$(urlencode "$bucket")/o?$query"' in with_gs
    assert "?alt=media" in with_gs and "uploadType=media" in with_gs
    if shutil.which("shellcheck"):
        for script in (plain, with_gs):
            proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
            assert proc.returncode == 0, proc.stdout
    else:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")


def test_a_job_that_ignores_the_notice_still_gets_its_checkpoints_copied_before_the_machine_goes(
        tmp_path: Path) -> None:
    storage = tmp_path / "shared"
    machine = tmp_path / "m1"
    # The job saves as a careful job does (write, then rename): a copy caught mid-write would read an empty file.
    job = ["/bin/bash", "-c", 'trap "" TERM; d="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$d"; i=0; while :; do '
           'i=$((i + 1)); echo "$i" > "$d/.step"; mv "$d/.step" "$d/step"; sleep 0.2; done']
    with serve_interruption_metadata() as metadata:
        proc = run_script(plan(machine, storage, 0, argv=job, checkpoint_sync_seconds=3600, interruption_watch=True,
                               notice_poll_seconds=1, cloud=gcp_boot_cloud(metadata_url=metadata.metadata_url)),
                          tmp_path)
        try:
            wait_for(lambda: (machine / "run" / "ckpt" / "step").exists())
            metadata.state.announce()
            stored = storage / "r-ckpt" / "checkpoints" / "step"
            wait_for(lambda: stored.exists() and stored.read_text().strip() != "", timeout=40)  # GCE: 15 s
            assert int(stored.read_text()) > 0
            assert "still running 15 s after the notice" in (machine / "run" / "job.log").read_text()
        finally:
            os.killpg(proc.pid, signal.SIGKILL)  # the cloud takes the machine
            proc.wait(timeout=10)
