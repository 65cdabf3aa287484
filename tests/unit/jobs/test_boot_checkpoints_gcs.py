"""gs:// checkpoints and code with curl alone, run for real with bash against the fake Cloud Storage JSON API and a
fake metadata server (tests/support/fakes/gcs_server.py): the push uploads each changed file once with the VM's
token, a second machine restores them through a paged list, a hostile object name never lands outside the
checkpoint folder, and the job's code comes from gs://."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.gcp.boot import gcp_boot_cloud

from support.fakes.gcs_server import FakeGcs, Running, serve, serve_metadata
from support.reaper import reap

BUCKET = "gpuplan-runs"
TOKEN = "ya29.fake-token-$(touch PWNED)-value"
RUN = "gpuplan/r-ckpt"

# Resumes from $GPUPLAN_CHECKPOINT_DIR/step, counts to $1, keeps a nested file and a symlink beside it.
COUNTER_JOB = r"""
ck="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$ck/shards"
step=$(cat "$ck/step" 2>/dev/null || echo 0)
echo "resumed at $step"
while [ "$step" -lt "$1" ]; do
  step=$((step + 1)); echo "{\"step\": $step}" >> "$GPUPLAN_METRICS"
done
echo "$step" > "$ck/step"; echo "weights at $step" > "$ck/shards/model 1.bin"
ln -sf /etc/hostname "$ck/link"
echo "finished at $step"
"""


@pytest.fixture(autouse=True)
def no_job_outlives_its_test(tmp_path: Path) -> Iterator[None]:
    """The jobs run in their own session (see support.reaper): none may outlive its test."""
    yield
    reap(tmp_path)


@pytest.fixture
def gcs() -> Iterator[Running]:
    with serve(FakeGcs(buckets={BUCKET}, upload_token=TOKEN, read_token=TOKEN)) as fake:
        yield fake


@pytest.fixture
def metadata() -> Iterator[Running]:
    with serve_metadata(TOKEN) as fake:
        yield fake


def plan(base: Path, gcs: Running, metadata: Running, steps: int, **extra: object) -> BootPlan:
    values: dict = dict(run_id="r-ckpt", name="counter", argv=["/bin/bash", "-c", COUNTER_JOB, "job", str(steps)],
                        base_dir=str(base), poweroff=False, checkpoint_dir="ckpt",
                        checkpoint_url=f"gs://{BUCKET}/{RUN}/checkpoints", storage_url=f"gs://{BUCKET}/{RUN}/node-0",
                        cloud=gcp_boot_cloud(gcs_endpoint=gcs.url, metadata_url=f"{metadata.url}/computeMetadata/v1"))
    values.update(extra)
    return BootPlan(**values)


def run(boot: BootPlan, cwd: Path) -> int:
    path = cwd / f"boot-{time.monotonic_ns()}.sh"
    path.write_text(render_boot_script(boot))
    proc = subprocess.Popen(["bash", str(path)], cwd=cwd, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, env={**os.environ, "LANG": "C.UTF-8"})
    return proc.wait(timeout=90)


def checkpoint_names(state: FakeGcs) -> list[str]:
    return sorted(n for (_, n) in state.objects if n.startswith(f"{RUN}/checkpoints/"))


def test_a_gs_run_pushes_its_checkpoints_and_the_next_machine_restores_them_page_by_page(
        tmp_path: Path, gcs: Running, metadata: Running) -> None:
    state: FakeGcs = gcs.state
    m1 = tmp_path / "m1"
    assert run(plan(m1, gcs, metadata, 5), tmp_path) == 0, (m1 / "boot.log").read_text()
    prefix = f"{RUN}/checkpoints/"
    assert checkpoint_names(state) == [f"{prefix}shards/model 1.bin", f"{prefix}step"]  # the symlink stays home
    assert state.read(BUCKET, f"{prefix}step").strip() == b"5"
    assert state.uploads and all(had for _, had in state.uploads)  # every upload with the metadata token
    # Each file went up once: the final push skipped what the manifest says is unchanged.
    pushed = [n for n, _ in state.uploads if n.startswith(prefix)]
    assert sorted(pushed) == sorted(set(pushed)), pushed
    assert "fake-token" not in "".join(p.read_text(errors="replace") for p in m1.rglob("*") if p.is_file())

    # More objects than one page of the list (page size 2), one of them in a deeper folder.
    for i in range(4):
        state.put(BUCKET, f"{prefix}extra/part-{i}", f"part {i}".encode())
    state.page_size = 2
    state.media_reads.clear()
    m2 = tmp_path / "m2"
    assert run(plan(m2, gcs, metadata, 8), tmp_path) == 0, (m2 / "boot.log").read_text()
    log = (m2 / "run" / "job.log").read_text()
    assert "resumed at 5" in log and "finished at 8" in log and "restored checkpoints" in log, log
    ckpt = m2 / "run" / "ckpt"
    assert [(ckpt / "extra" / f"part-{i}").read_text() for i in range(4)] == [f"part {i}" for i in range(4)]
    assert set(state.media_reads) >= {f"{prefix}extra/part-{i}" for i in range(4)} | {f"{prefix}step"}
    assert state.read(BUCKET, f"{prefix}step").strip() == b"8"
    # The metrics kept beside the checkpoints came back too, so the loss curve is one file.
    metrics = state.read(BUCKET, f"{RUN}/node-0/metrics.jsonl").decode().splitlines()
    assert len(metrics) == 8
    # Restored files unchanged on this machine were not pushed back.
    assert [n for n, _ in state.uploads].count(f"{prefix}extra/part-0") == 0
    assert not list(tmp_path.rglob("PWNED*")), "the token was parsed as shell"


def test_a_copy_longer_than_a_token_lives_asks_for_a_fresh_token_per_object(tmp_path: Path) -> None:
    """The metadata server hands out its cached token, which may have only ~4 minutes left (the shortest cache it
    keeps), so a copy that takes longer than that must not ride on one token. Here each token lives 1 s and each
    transfer takes 0.4 s: six checkpoint files go up, and come back on the next machine, every one with a token
    that was still good."""
    job = ('ck="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$ck"; step=$(cat "$ck/step" 2>/dev/null || echo 0); '
           'echo "resumed at $step"; for i in 1 2 3 4 5; do echo "shard $i" > "$ck/shard-$i"; done; '
           'echo $((step + 1)) > "$ck/step"')
    with serve_metadata(TOKEN, lifetime_s=1.0) as metadata:
        state = FakeGcs(buckets={BUCKET}, accepts=metadata.state.valid, delay_s=0.4)
        with serve(state) as gcs:
            m1 = tmp_path / "m1"
            assert run(plan(m1, gcs, metadata, 0, argv=["/bin/bash", "-c", job]), tmp_path) == 0, \
                (m1 / "boot.log").read_text()
            prefix = f"{RUN}/checkpoints/"
            assert checkpoint_names(state) == [f"{prefix}shard-{i}" for i in range(1, 6)] + [f"{prefix}step"]
            assert all(had for _, had in state.uploads), state.uploads  # no upload with an expired token
            m2 = tmp_path / "m2"
            assert run(plan(m2, gcs, metadata, 0, argv=["/bin/bash", "-c", job]), tmp_path) == 0, \
                (m2 / "boot.log").read_text()
            assert "resumed at 1" in (m2 / "run" / "job.log").read_text()
            assert metadata.state.token_requests >= 12  # one per object each way, not one per pass


def test_a_hostile_object_name_never_lands_outside_the_checkpoint_folder(tmp_path: Path, gcs: Running,
                                                                         metadata: Running) -> None:
    state: FakeGcs = gcs.state
    prefix = f"{RUN}/checkpoints/"
    for bad in ("../../etc/x", "a/../../../x2", "/abs-x3", "./x4", "a//x5"):
        state.put(BUCKET, prefix + bad, b"hostile")
    state.put(BUCKET, f"{prefix}step", b"2\n")
    base = tmp_path / "m1"
    # A symlinked folder inside the checkpoint folder (left by an earlier job on this machine) is no way out.
    outside = tmp_path / "outside"
    outside.mkdir()
    (base / "run" / "ckpt").mkdir(parents=True)
    (base / "run" / "ckpt" / "via").symlink_to(outside)
    state.put(BUCKET, f"{prefix}via/x6", b"hostile")
    assert run(plan(base, gcs, metadata, 3), tmp_path) == 0, (base / "boot.log").read_text()
    assert "resumed at 2" in (base / "run" / "job.log").read_text()
    hostile = [p for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink() and p.read_bytes() == b"hostile"]
    assert hostile == [], hostile
    assert list(outside.iterdir()) == []
    assert "refused checkpoint object outside the checkpoint folder" in (base / "run" / "job.log").read_text()


def test_the_jobs_code_comes_from_gs(tmp_path: Path, gcs: Running, metadata: Running) -> None:
    from gpuplan.jobs.code_bundle import bundle

    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    (src / "sub" / "hello.sh").write_text('echo "hello from $(pwd)" > "$GPUPLAN_RUN_DIR/out.txt"\n')
    archive = tmp_path / "code.tar.gz"
    bundle(src, archive)
    gcs.state.put(BUCKET, f"{RUN}/code.tar.gz", archive.read_bytes())
    base = tmp_path / "m1"
    boot = BootPlan(run_id="r-code", name="n", argv=["/bin/sh", "-c", "sh hello.sh"], base_dir=str(base),
                    poweroff=False, workdir="sub", code_url=f"gs://{BUCKET}/{RUN}/code.tar.gz",
                    cloud=gcp_boot_cloud(gcs_endpoint=gcs.url, metadata_url=f"{metadata.url}/computeMetadata/v1"))
    assert run(boot, tmp_path) == 0, (base / "boot.log").read_text()
    assert (base / "run" / "out.txt").read_text().strip() == f"hello from {base / 'code' / 'sub'}"
    assert gcs.state.media_reads == [f"{RUN}/code.tar.gz"]


def test_the_largest_gs_boot_script_fits_gces_metadata_value_limit() -> None:
    """The startup-script is one metadata value: at most 256 KiB (the strict GCE layer refuses more)."""
    from support.strict_gce import MAX_METADATA_VALUE, metadata_error

    boot = BootPlan(run_id="r-" + "x" * 40, name="n" * 63, argv=["python", "train.py", "--x" * 200],
                    checkpoint_dir="ck", interruption_watch=True, cloud=gcp_boot_cloud(),
                    storage_url="gs://b/p/node-0", checkpoint_url="gs://b/p/checkpoints", code_url="gs://b/p/code.tar.gz")
    script = render_boot_script(boot)
    assert "gcs_pull_dir" in script and len(script.encode()) < MAX_METADATA_VALUE // 4
    assert metadata_error([{"key": "startup-script", "value": script}]) is None
    assert metadata_error([{"key": "startup-script", "value": "x" * (MAX_METADATA_VALUE + 1)}]) is not None


def test_the_periodic_push_uploads_only_what_changed_since_the_last_one(tmp_path: Path, gcs: Running,
                                                                          metadata: Running) -> None:
    job = ["/bin/bash", "-c", 'ck="$GPUPLAN_CHECKPOINT_DIR"; mkdir -p "$ck"; echo a > "$ck/a"; sleep 3.5; '
           'echo b > "$ck/b"; sleep 2.5']
    base = tmp_path / "m1"
    assert run(plan(base, gcs, metadata, 0, argv=job, checkpoint_sync_seconds=1), tmp_path) == 0
    pushes = (base / "run" / "job.log").read_text().count("checkpoints copied to the run's storage")
    assert pushes >= 4, (base / "run" / "job.log").read_text()
    names = [n for n, _ in gcs.state.uploads]
    prefix = f"{RUN}/checkpoints/"
    assert (names.count(f"{prefix}a"), names.count(f"{prefix}b")) == (1, 1), names
