"""GCP job secrets by reference: Secret Manager holds the values, the startup script only their names.

(a) A launch against the fake Compute API and the fake Secret Manager (tests/support/fakes/secretmanager_server.py, the
    real google-cloud-secret-manager client on REST): one labelled secret per name, the VM's service account has
    the cloud-platform scope, and its startup script holds no value (the CLI-wide "nowhere" check is in
    tests/e2e/test_secrets_nowhere.py).
(b) The boot script's fetch, run for real with bash and curl against the fake Secret Manager and the fake
    metadata server: the job gets every value byte for byte (shell metacharacters, newlines, trailing newlines),
    none is printed or written, the token rides on stdin; a refused read stops the job before it runs.
(c) The run's secrets are deleted when the run ends (stop from another process, the job's own power-off seen by
    a watch step) and when a launch fails; a failover to another zone keeps them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.base import LaunchRequest, ProviderError
from gpuplan.providers.gcp.boot import gcp_boot_cloud
from gpuplan.providers.gcp.outputs import CLOUD_PLATFORM_SCOPE, STORAGE_RW_SCOPE, vm_service_account
from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.secrets import secret_id

from support.fakes.gce_server import RunningFake
from support.fakes.gcs_server import Running, serve_metadata
from support.fakes.secretmanager_server import RunningSecretManager

RUN = "r-5ec2e75000"
ZONE = "us-central1-a"
TOKEN = "ya29.sm-token-$(touch PWNED_TOKEN)-`touch PWNED_TICK`"
HOSTILE = "v'$(touch PWNED)`id`;rm -rf ~ \"$HOME\" \\n\\\\ *\nsecond line\t|&>\n\n"  # ends in newlines
VALUES = {"HOSTILE": HOSTILE, "PLAIN": "hf_abc123", "EMPTY": "", "UNICODE": "pässwörd ✓"}


def digest(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@pytest.fixture
def metadata() -> Iterator[Running]:
    with serve_metadata(TOKEN) as fake:
        yield fake


def provider() -> GcpProvider:
    return GcpProvider(retry_initial=0.01, retry_timeout=5)


def request(**kw: object) -> LaunchRequest:
    base: dict[str, object] = dict(run_id=RUN, name="tiny-gpt", command="python train.py", run_dir="/tmp/run",
                                   gpu="T4", instance_type="n1-standard-8", gpus_per_node=1, zones=(ZONE,),
                                   price_per_hour=Decimal("0.5"), secrets=dict(VALUES), max_hours=1)
    base.update(kw)
    return LaunchRequest(**base)  # type: ignore[arg-type]


# ---- (a) a launch stores the secrets and names them -----------------------------------------------------------


def test_a_launch_keeps_the_values_in_secret_manager(gce: RunningFake, secretmanager: RunningSecretManager) -> None:
    from gpuplan.launching.placements import with_boot_scripts

    p = provider()
    [inst] = p.launch(with_boot_scripts(request(), p))
    [vm] = gce.state.live()
    script = {i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"]
    state = secretmanager.state
    assert sorted(state.secrets) == sorted(secret_id(RUN, n) for n in VALUES)
    for name, value in VALUES.items():
        assert state.value(secret_id(RUN, name)) == value.encode()
        assert f"projects/gpuplan-test/secrets/gpuplan-{RUN}-{name}" in script
        assert state.get(secret_id(RUN, name)).labels == {
            "gpuplan-created-by": "gpuplan", "gpuplan-run-id": RUN, "gpuplan-name": "tiny-gpt",
            **{k: v for k, v in vm["labels"].items() if k == "gpuplan-project"}}
    assert "hf_abc123" not in script and "second line" not in script and "pässwörd" not in script
    assert "store_secret() {" in script and f"SECRETMANAGER_ENDPOINT={secretmanager.url}" in script
    # Secret Manager has no narrower scope than cloud-platform; the VM says it keeps secrets there.
    assert vm["serviceAccounts"] == [{"email": "default", "scopes": [CLOUD_PLATFORM_SCOPE]}]
    assert vm["labels"]["gpuplan-secrets"] == "secret-manager" and inst.tags["gpuplan-secrets"] == "secret-manager"


def test_the_vm_account_and_scopes_with_secrets() -> None:
    assert vm_service_account(None, None, None, secrets=True) == ("default", [CLOUD_PLATFORM_SCOPE])
    assert vm_service_account("vm@p.iam.gserviceaccount.com", None, "b", secrets=True) == (
        "vm@p.iam.gserviceaccount.com", [CLOUD_PLATFORM_SCOPE])
    assert vm_service_account("vm@p", [STORAGE_RW_SCOPE], "b", secrets=True) == (
        "vm@p", [STORAGE_RW_SCOPE, CLOUD_PLATFORM_SCOPE])
    assert vm_service_account(None, None, None) is None  # no bucket, no secrets: no account at all


def test_secret_ids_follow_secret_managers_rules() -> None:
    assert secret_id("r-0a1b2c3d4e", "HF_TOKEN") == "gpuplan-r-0a1b2c3d4e-HF_TOKEN"
    with pytest.raises(ProviderError, match="at most 255"):
        secret_id("r-0a1b2c3d4e", "X" * 240)
    with pytest.raises(ProviderError, match="letters, digits"):
        secret_id("r.odd/run", "TOKEN")


def test_a_refused_create_names_the_secret_never_the_value(gce: RunningFake,
                                                           secretmanager: RunningSecretManager) -> None:
    secretmanager.state.fail_creates = 1
    with pytest.raises(ProviderError) as caught:
        provider().launch(request())
    assert "EMPTY" in str(caught.value) and "403" in str(caught.value)
    assert "hf_abc123" not in str(caught.value) and caught.value.__cause__ is None
    assert gce.state.live() == []  # no VM without its secrets


# ---- (b) the boot script reads them -------------------------------------------------------------------------


def boot_plan(base: Path, sm: RunningSecretManager, metadata: Running, params: dict[str, str]) -> BootPlan:
    job = "; ".join(f'printf "%s" "${name}" | sha256sum | cut -c1-64 > "$GPUPLAN_RUN_DIR/{name}.sha"'
                    for name in params)
    job += '; echo "job ran"'
    return BootPlan(run_id=RUN, name="secrets", argv=["/bin/sh", "-c", job], base_dir=str(base), poweroff=False,
                    secret_params=params, cloud=gcp_boot_cloud(secretmanager_endpoint=sm.url,
                                                               metadata_url=f"{metadata.url}/computeMetadata/v1"))


def run_script(script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "boot.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path)], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LANG": "C.UTF-8"})


def seed(sm: RunningSecretManager) -> dict[str, str]:
    """The secrets as a launch stores them (the real client), and the NAME -> resource map the script gets."""
    p = provider()
    p.secrets.put(RUN, VALUES, {"gpuplan-created-by": "gpuplan", "gpuplan-run-id": RUN})
    return {name: p.secret_parameter(RUN, name) for name in VALUES}


def test_the_boot_script_exports_each_value_and_prints_none(tmp_path: Path, secretmanager: RunningSecretManager,
                                                            metadata: Running) -> None:
    secretmanager.state.access_token = TOKEN
    params = seed(secretmanager)
    base = tmp_path / "base"
    script = render_boot_script(boot_plan(base, secretmanager, metadata, params))
    assert "hf_abc123" not in script and TOKEN not in script
    proc = run_script(script, tmp_path)
    assert proc.returncode == 0, (base / "boot.log").read_text()
    run_dir = base / "run"
    for name, value in VALUES.items():  # byte for byte, trailing newlines included
        assert (run_dir / f"{name}.sha").read_text().strip() == digest(value), name
    assert "job ran" in (run_dir / "job.log").read_text()
    # Every read carried the VM's token (on curl's stdin); nothing the script left holds a value or the token.
    assert len(secretmanager.state.accesses) == len(VALUES)
    assert all(had for _, had in secretmanager.state.accesses)
    left = proc.stdout + proc.stderr + "".join(p.read_text(errors="replace") for p in tmp_path.rglob("*")
                                               if p.is_file() and p.name != "boot.sh")
    for fragment in ("hf_abc123", "second line", "pässwörd", "sm-token"):
        assert fragment not in left
    assert not list(tmp_path.rglob("PWNED*"))


def test_a_refused_read_stops_the_job_before_it_runs(tmp_path: Path, secretmanager: RunningSecretManager,
                                                     metadata: Running) -> None:
    params = seed(secretmanager)
    secretmanager.state.access_token = "another-token"  # this VM's account may not read the secrets
    base = tmp_path / "base"
    proc = run_script(render_boot_script(boot_plan(base, secretmanager, metadata, params)), tmp_path)
    assert proc.returncode == 4
    log = (base / "run" / "job.log").read_text()
    assert "cannot read the secret" in log and "job ran" not in log
    assert metadata.state.guest_attributes["gpuplan/reason"] == "cannot read secrets"


def test_the_secret_manager_variant_is_shellcheck_clean(tmp_path: Path, secretmanager: RunningSecretManager,
                                                        metadata: Running) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    params = {"A": "projects/p/secrets/gpuplan-r-1-A", "B_2": "projects/p/secrets/gpuplan-r-1-B_2"}
    script = render_boot_script(boot_plan(tmp_path, secretmanager, metadata, params))
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


# ---- (c) they are deleted when the run ends or the launch fails ------------------------------------------------


def test_stop_from_another_process_deletes_the_runs_secrets(gce: RunningFake,
                                                            secretmanager: RunningSecretManager) -> None:
    provider().launch(request(nodes=2))
    other = secret_id("r-someone0ff", "HF_TOKEN")  # another run's secret stays
    provider().secrets.put("r-someone0ff", {"HF_TOKEN": "x"}, {"gpuplan-created-by": "gpuplan",
                                                              "gpuplan-run-id": "r-someone0ff"})
    ids = [f"{ZONE}/{vm['name']}" for vm in gce.state.live()]
    fresh = provider()  # `gpuplan stop` in a new process: it learns from the VMs' labels that secrets exist
    fresh.terminate(ids[:1])
    assert len(secretmanager.state.secrets) == len(VALUES) + 1  # one node still runs: they are still needed
    fresh.terminate(ids[1:])
    assert list(secretmanager.state.secrets) == [other]


def test_the_jobs_own_power_off_seen_by_a_watch_step_deletes_them(gce: RunningFake,
                                                                  secretmanager: RunningSecretManager,
                                                                  tmp_path: Path) -> None:
    provider().launch(request())
    [vm] = gce.state.live()
    gce.state.set_status(ZONE, vm["name"], "TERMINATED")  # the boot script powered the VM off
    watcher = provider()
    [inst] = watcher.describe([f"{ZONE}/{vm['name']}"])
    watcher.fetch_outputs(inst, str(tmp_path))
    assert secretmanager.state.secrets == {}


def test_a_failed_launch_deletes_them_and_a_failover_keeps_them(gce: RunningFake,
                                                                secretmanager: RunningSecretManager) -> None:
    p = provider()
    gce.state.fail_insert(ZONE, times=None)
    with pytest.raises(ProviderError):
        p.launch(request())
    assert secretmanager.state.secrets == {}
    assert sorted(secretmanager.state.deleted) == sorted(secret_id(RUN, n) for n in VALUES)
    # The next zone of the failover stores them again, and they stay with the running VM.
    p.launch(request(zones=("us-central1-b",)))
    assert sorted(secretmanager.state.secrets) == sorted(secret_id(RUN, n) for n in VALUES)
    assert secretmanager.state.value(secret_id(RUN, "PLAIN")) == b"hf_abc123"


def test_a_run_without_secrets_never_calls_secret_manager(gce: RunningFake) -> None:
    # The autouse environment points Secret Manager at a closed port: any call would log a warning or fail.
    p = provider()
    p.launch(request(secrets={}))
    p.terminate([f"{ZONE}/{vm['name']}" for vm in gce.state.live()])
    assert p.secrets._client is None


def test_importing_the_provider_does_not_import_the_secret_manager_client() -> None:
    code = ("import sys, gpuplan.providers.gcp.provider; "
            "print('google.cloud.secretmanager' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
