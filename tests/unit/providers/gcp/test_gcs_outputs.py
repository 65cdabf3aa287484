"""GCP runs bring back their log, metrics and exit record through GCS, as AWS runs do through S3.

(a) The boot script's upload, run for real with bash and the real curl against the fake GCS JSON API and a fake
    metadata server (tests/support/fakes/gcs_server.py): the service account's token goes from the metadata server to
    the upload and nowhere else; hostile prefixes stay one object name; a refused upload never fails the job.
(b) `fetch_outputs` with the real google-cloud-storage client pulls those objects into the run folder, and
    `gpuplan status` / `gpuplan logs` show them for a run launched on the fake Compute API.
(c) Without a bucket a run that leaves no exit code says how to turn run storage on.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.base import Instance, InstanceState, LaunchRequest
from gpuplan.providers.gcp.boot import gcp_boot_cloud
from gpuplan.providers.gcp.outputs import CLOUD_PLATFORM_SCOPE, STORAGE_RW_SCOPE, vm_service_account
from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.rules import Endpoint, instance_name

from support.clihelp import run_subprocess
from support.fakes.gce_server import RunningFake
from support.fakes.gcs_server import FakeGcs, Running, serve, serve_metadata

BUCKET = "gpuplan-runs"
# Real tokens are base64url and dots; shell metacharacters here prove the script never parses it as shell.
TOKEN = "ya29.fake-token-$(touch PWNED_TOKEN)-`touch PWNED_TICK`-'-value"
ZONE = "us-central1-a"
JOB_LINES = "step 1 of 2\nstep 2 of 2\n"
JOB = """\
name: tiny-gpt-gcs
command: python train.py --steps 200
resources:
  gpu: L4
  gpus_per_node: 1
  regions: [us-central1]
limits:
  max_hours: 2
"""


@pytest.fixture
def gcs() -> Iterator[Running]:
    with serve(FakeGcs(buckets={BUCKET}, upload_token=TOKEN)) as fake:
        yield fake


@pytest.fixture
def metadata() -> Iterator[Running]:
    with serve_metadata(TOKEN) as fake:
        yield fake


def boot_plan(base: Path, storage_url: str, gcs: Running, metadata: Running, *, run_id: str = "r-gcs00001",
              code: int = 0) -> BootPlan:
    """A process job (no image, no GPU) that logs, writes metrics and exits `code`; no power-off here."""
    job = (f"printf '{JOB_LINES}'; "
           'echo \'{"step": 1, "tokens": 4096, "time": 1.0}\' >> "$GPUPLAN_METRICS"; '
           'echo \'{"step": 2, "tokens": 8192, "time": 2.0}\' >> "$GPUPLAN_METRICS"; '
           f"exit {code}")
    return BootPlan(run_id=run_id, name="gcs", argv=["/bin/sh", "-c", job], base_dir=str(base), poweroff=False,
                    storage_url=storage_url,
                    cloud=gcp_boot_cloud(gcs_endpoint=gcs.url, metadata_url=f"{metadata.url}/computeMetadata/v1"))


def run_boot_script(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "boot.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path)], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LANG": "C.UTF-8"})


def every_file_text(root: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in root.rglob("*") if p.is_file())


# ---- (a) the boot script's upload ----------------------------------------------------------------------------


@pytest.mark.parametrize("code", [0, 3])
def test_boot_script_uploads_each_output_with_the_metadata_token(tmp_path: Path, gcs: Running, metadata: Running,
                                                                 code: int) -> None:
    base = tmp_path / "base"
    prefix = "gpuplan/r-gcs00001/node-0"
    script = render_boot_script(boot_plan(base, f"gs://{BUCKET}/{prefix}", gcs, metadata, code=code))
    assert TOKEN not in script and "gsutil cp" not in script and "gcloud storage" not in script
    proc = run_boot_script(script, tmp_path)
    assert proc.returncode == code, (base / "boot.log").read_text()

    state: FakeGcs = gcs.state
    assert JOB_LINES in state.read(BUCKET, f"{prefix}/job.log").decode()
    assert [json.loads(line)["tokens"] for line in state.read(BUCKET, f"{prefix}/metrics.jsonl").splitlines()] \
        == [4096, 8192]
    assert json.loads(state.read(BUCKET, f"{prefix}/exit.json"))["exit_code"] == code
    assert state.get(BUCKET, f"{prefix}/exit.json").content_type == "application/json"
    # Every upload carried the VM's token, which the script asked the metadata server for (Metadata-Flavor).
    assert state.uploads and all(had_token for _, had_token in state.uploads)
    assert [name for name, _ in state.uploads][-1] == f"{prefix}/exit.json"  # the exit record goes last
    assert metadata.state.token_requests >= 1
    assert metadata.state.guest_attributes["gpuplan/exit_code"] == str(code)
    # The token is never written anywhere: not in the logs, not in any file the script left.
    assert "fake-token" not in every_file_text(tmp_path)
    assert not list(tmp_path.rglob("PWNED*")), "the token was parsed as shell"


def test_a_hostile_prefix_stays_one_object_name(tmp_path: Path, gcs: Running, metadata: Running) -> None:
    prefix = "gpuplan/r 'x' $(touch PWNED) é/node-0"
    proc = run_boot_script(render_boot_script(boot_plan(tmp_path / "base", f"gs://{BUCKET}/{prefix}/", gcs,
                                                        metadata)), tmp_path)
    assert proc.returncode == 0
    assert sorted(n for (_, n) in gcs.state.objects) == [f"{prefix}/{f}" for f in
                                                         ("exit.json", "job.log", "metrics.jsonl")]
    assert not list(tmp_path.rglob("PWNED*"))


def test_a_refused_upload_or_no_service_account_never_fails_the_job(tmp_path: Path, gcs: Running) -> None:
    # roles/storage.objectCreator alone: the first copy of a file lands, replacing it is refused (403).
    prefix = "gpuplan/r-gcs00001/node-0"
    gcs.state.put(BUCKET, f"{prefix}/job.log", b"an earlier ship\n")
    gcs.state.can_overwrite = False
    with serve_metadata(TOKEN) as metadata:
        proc = run_boot_script(render_boot_script(boot_plan(tmp_path / "a", f"gs://{BUCKET}/{prefix}", gcs,
                                                            metadata, code=5)), tmp_path)
    assert proc.returncode == 5
    assert gcs.state.read(BUCKET, f"{prefix}/job.log") == b"an earlier ship\n"
    assert "403" in (tmp_path / "a" / "boot.log").read_text()
    assert json.loads(gcs.state.read(BUCKET, f"{prefix}/exit.json"))["exit_code"] == 5  # a new object: allowed

    # A VM without a service account: the metadata server has no token; the job still ends with its code.
    gcs.state.objects.clear()
    with serve_metadata(None) as no_account:
        proc = run_boot_script(render_boot_script(boot_plan(tmp_path / "b", f"gs://{BUCKET}/{prefix}", gcs,
                                                            no_account, code=0)), tmp_path)
    assert proc.returncode == 0 and gcs.state.objects == {}
    assert "no access token" in (tmp_path / "b" / "boot.log").read_text()


def test_the_gcs_upload_part_is_shellcheck_clean(tmp_path: Path, gcs: Running, metadata: Running) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    script = render_boot_script(boot_plan(tmp_path, f"gs://{BUCKET}/gpuplan/r/node-0", gcs, metadata))
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


# ---- (b) fetch_outputs and the CLI -----------------------------------------------------------------------------


def provider(gcs: Running) -> GcpProvider:
    return GcpProvider(bucket=BUCKET, storage_endpoint=f"{gcs.url}/storage/v1/", retry_initial=0.01,
                       retry_timeout=5)


def test_fetch_outputs_copies_only_what_changed(tmp_path: Path, gcs: Running) -> None:
    p = provider(gcs)
    assert p.outputs_url("r-abc") == f"gs://{BUCKET}/gpuplan/r-abc"
    assert p.outputs_endpoint() == gcs.url
    inst = Instance(provider="gcp", instance_id=f"{ZONE}/vm", state=InstanceState.RUNNING, run_id="r-abc",
                    node_rank=1)
    gcs.state.put(BUCKET, "gpuplan/r-abc/node-1/job.log", b"first\n")
    gcs.state.put(BUCKET, "gpuplan/r-abc/node-1/metrics.jsonl", b'{"step": 1}\n')
    gcs.state.put(BUCKET, "gpuplan/r-abc/node-1/not-ours.bin", b"ignored")
    gcs.state.put(BUCKET, "gpuplan/r-abc/node-10/job.log", b"another node's log")
    p.fetch_outputs(inst, str(tmp_path))
    assert (tmp_path / "node-1" / "job.log").read_text() == "first\n"
    assert (tmp_path / "node-1" / "metrics.jsonl").read_text() == '{"step": 1}\n'  # rank 1: in its own folder
    assert not (tmp_path / "node-1" / "not-ours.bin").exists() and not (tmp_path / "node-10").exists()

    gcs.state.put(BUCKET, "gpuplan/r-abc/node-1/job.log", b"first\nsecond\n")
    p.fetch_outputs(inst, str(tmp_path))
    assert (tmp_path / "node-1" / "job.log").read_text() == "first\nsecond\n"
    assert sorted(gcs.state.media_reads) == ["gpuplan/r-abc/node-1/job.log", "gpuplan/r-abc/node-1/job.log",
                                             "gpuplan/r-abc/node-1/metrics.jsonl"]  # metrics not fetched twice


def test_a_bucket_gives_the_vm_a_storage_scope_and_its_script_the_bucket(gce: RunningFake, gcs: Running,
                                                                        tmp_path: Path,
                                                                        caplog: pytest.LogCaptureFixture) -> None:
    from gpuplan.launching.placements import with_boot_scripts

    p = provider(gcs)
    request = with_boot_scripts(LaunchRequest(
        run_id="r-bucket0001", name="tiny", command="python train.py", run_dir=str(tmp_path), gpu="T4",
        instance_type="n1-standard-8", gpus_per_node=1, zones=(ZONE,), price_per_hour=Decimal("0.5")), p)
    with caplog.at_level(logging.WARNING, logger="gpuplan.providers.gcp.instance"):
        p.launch(request)
    [vm] = gce.state.live()
    assert vm["serviceAccounts"] == [{"email": "default", "scopes": [STORAGE_RW_SCOPE]}]
    # Falling back to the default account (often Editor) is allowed, but not silently.
    assert [r.getMessage() for r in caplog.records if "default service account" in r.getMessage()] == [
        f"GCS outputs use the project's default service account (often Editor); set service_account in "
        f"[providers.gcp] to one allowed to write only to gs://{BUCKET}"]
    script = {i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"]
    assert f"STORAGE_URL=gs://{BUCKET}/gpuplan/r-bucket0001/node-0" in script
    assert f"GCS_ENDPOINT={gcs.url}" in script


def test_service_account_and_scopes_follow_the_bucket() -> None:
    assert vm_service_account(None, None, None) is None  # no bucket, no account: least privilege, as before
    assert vm_service_account("sa@p.iam", None, None) == ("sa@p.iam", [CLOUD_PLATFORM_SCOPE])
    assert vm_service_account(None, None, BUCKET) == ("default", [STORAGE_RW_SCOPE])
    assert vm_service_account("sa@p.iam", ["x"], BUCKET) == ("sa@p.iam", ["x", STORAGE_RW_SCOPE])
    assert vm_service_account("sa@p.iam", [CLOUD_PLATFORM_SCOPE], BUCKET) == ("sa@p.iam", [CLOUD_PLATFORM_SCOPE])
    storage = Endpoint.parse("http://127.0.0.1:4443/storage/v1/", "storage")
    assert (storage.api_endpoint, storage.loopback) == ("http://127.0.0.1:4443", True)
    assert Endpoint.parse("https://storage.example.com/storage/v1/", "storage").loopback is False


def vm_job_ends(gce: RunningFake, name: str, exit_code: int | None) -> None:
    """The boot script's record_exit (guest attributes, unless None) and power-off on the VM."""
    if exit_code is not None:
        for key, value in (("reason", ""), ("exit_code", str(exit_code)),
                           ("status", "succeeded" if exit_code == 0 else "failed")):
            gce.state.set_guest_attribute(ZONE, name, f"gpuplan/{key}", value)
    gce.state.set_status(ZONE, name, "TERMINATED")


def launch(tmp_path: Path) -> str:
    job = tmp_path / "job.yaml"
    job.write_text(JOB)
    launched = run_subprocess("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    return str(launched.json()["run_id"])


def test_status_and_logs_of_a_gcp_run_show_what_its_vm_shipped(gce: RunningFake, gcs: Running, metadata: Running,
                                                              tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GPUPLAN_GCS_BUCKET", BUCKET)
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE", f"{gcs.url}/storage/v1/")
    run_id = launch(tmp_path)
    [vm] = gce.state.live()
    storage_url = f"gs://{BUCKET}/gpuplan/{run_id}/node-0"
    startup = {i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"]
    assert f"STORAGE_URL={storage_url}" in startup
    # What the VM's boot script does, here with bash: the job runs, its outputs go to the run's prefix in GCS.
    proc = run_boot_script(render_boot_script(boot_plan(tmp_path / "vm", storage_url, gcs, metadata,
                                                        run_id=run_id, code=0)), tmp_path)
    assert proc.returncode == 0
    vm_job_ends(gce, instance_name(run_id, 0), 0)

    status = run_subprocess("status", run_id, "--json")
    assert status.exit_code == 0, status.stderr
    final = status.json()
    assert (final["state"], final["exit_code"]) == ("succeeded", 0), final
    assert final["tokens_per_s"] == pytest.approx(4096.0)  # measured from the shipped metrics
    run_dir = Path(final["run_dir"])
    assert json.loads((run_dir / "node-0" / "exit.json").read_text())["exit_code"] == 0
    logs = run_subprocess("logs", run_id)
    assert logs.exit_code == 0, logs.stderr
    assert JOB_LINES in logs.stdout and "job ended with exit code 0" in logs.stdout


# ---- (c) no bucket -----------------------------------------------------------------------------------------------


def test_without_a_bucket_a_run_that_left_no_exit_code_says_how_to_ship_outputs(gce: RunningFake,
                                                                                tmp_path: Path) -> None:
    run_id = launch(tmp_path)
    [vm] = gce.state.live()
    assert "serviceAccounts" not in vm or not vm["serviceAccounts"]  # no bucket: no service account, as before
    vm_job_ends(gce, instance_name(run_id, 0), None)  # powered off before its boot script wrote an exit code
    final = run_subprocess("status", run_id, "--json").json()
    assert final["state"] == "lost" and final["exit_code"] is None, final
    assert "GPUPLAN_GCS_BUCKET" in final["state_reason"]
    assert "storage.objects.delete" in final["state_reason"]


def test_the_bucket_comes_from_the_config_file_or_the_environment(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplan.providers.registry import make_provider

    config = tmp_path / "config.toml"
    config.write_text(f'[providers.gcp]\nbucket = "gs://{BUCKET}/"\n')
    monkeypatch.setenv("GPUPLAN_CONFIG", str(config))
    assert make_provider("gcp").outputs_url("r-1") == f"gs://{BUCKET}/gpuplan/r-1"
    config.write_text("[providers.gcp]\n")
    assert make_provider("gcp").outputs_url("r-1") is None
    monkeypatch.setenv("GPUPLAN_GCS_BUCKET", "from-env")
    assert make_provider("gcp").outputs_url("r-1") == "gs://from-env/gpuplan/r-1"
