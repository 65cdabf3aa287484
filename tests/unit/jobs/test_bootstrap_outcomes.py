"""The boot script's outcome plumbing, run for real with bash: secrets fetched from SSM by name, outputs shipped
to the node's storage prefix, the exit code published as GCP guest attributes; shellcheck-clean and quoted.

`aws` and `curl` are small recording stand-ins on PATH (there is no cloud here): they log their argv and act
on local folders, so the test sees exactly which commands, with which arguments, the script ran.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.providers.aws.boot import AWS_HOOKS
from gpuplan.providers.gcp.boot import GUEST_ATTRIBUTES_HOOK

SECRET = "s3cr3t-$(touch PWNED1)-`id`-'\"-value"
STORAGE = "s3://bucket/gpuplan/r-out 'x'/node-0"  # a hostile prefix: must stay one argument

AWS_SHIM = r'''#!PYTHON
import json, os, shutil, sys
root = os.environ["SHIM_ROOT"]
args = sys.argv[1:]
with open(os.path.join(root, "aws.calls"), "a") as fh:
    fh.write(json.dumps(args) + "\n")
if args[:2] == ["ssm", "get-parameter"]:
    name = args[args.index("--name") + 1]
    with open(os.path.join(root, "ssm", name.strip("/").replace("/", "__"))) as fh:
        sys.stdout.write(fh.read())
elif args[:2] == ["s3", "cp"]:
    src, dst = args[-2], args[-1]
    target = os.path.join(root, "s3", dst[len("s3://"):])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(src, target)
'''

CURL_SHIM = r'''#!PYTHON
import json, os, sys
root = os.environ["SHIM_ROOT"]
args = sys.argv[1:]
with open(os.path.join(root, "curl.calls"), "a") as fh:
    fh.write(json.dumps(args) + "\n")
url = args[-1]
if "/guest-attributes/" in url:
    key = url.split("/guest-attributes/", 1)[1].replace("/", "__")
    with open(os.path.join(root, "guest", key), "w") as fh:
        fh.write(args[args.index("--data-binary") + 1])
elif url.endswith("/api/token"):
    sys.stdout.write("imds-token")
elif url.endswith("/placement/region"):
    sys.stdout.write("eu-west-1")
'''


@pytest.fixture
def shims(tmp_path: Path) -> Path:
    root = tmp_path / "shim"
    for sub in ("bin", "ssm", "s3", "guest"):
        (root / sub).mkdir(parents=True)
    for name, body in (("aws", AWS_SHIM), ("curl", CURL_SHIM)):
        path = root / "bin" / name
        path.write_text(body.replace("PYTHON", sys.executable, 1))
        path.chmod(0o755)
    (root / "ssm" / "gpuplan__r-out__API_TOKEN").write_text(SECRET)
    return root


# AWS's hooks (SSM, S3, IMDS) with GCP's exit-code report (guest attributes): both clouds' ways out in one script.
AWS_WITH_GUEST_ATTRIBUTES = BootCloud(functions=AWS_HOOKS + GUEST_ATTRIBUTES_HOOK,
                                      assignments={"IMDS_URL": "http://169.254.169.254",
                                                   "METADATA_URL": "http://metadata.google.internal/computeMetadata/v1"})


def plan(base: Path, code: int) -> BootPlan:
    return BootPlan(
        run_id="r-out", name="outcome", base_dir=str(base), poweroff=False,
        argv=["/bin/sh", "-c", 'printf "%s" "$API_TOKEN" > "$GPUPLAN_RUN_DIR/secret.txt"; '
                               'echo \'{"step": 1, "tokens": 10, "time": 1.0}\' >> "$GPUPLAN_METRICS"; '
                               f'echo "job says hi"; exit {code}'],
        storage_url=STORAGE, secret_params={"API_TOKEN": "/gpuplan/r-out/API_TOKEN"}, cloud=AWS_WITH_GUEST_ATTRIBUTES)


def run(script: str, cwd: Path, shims: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "boot.sh"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PATH=f"{shims / 'bin'}:{os.environ['PATH']}", SHIM_ROOT=str(shims))
    return subprocess.run(["bash", str(path)], cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def calls(shims: Path, tool: str) -> list[list[str]]:
    path = shims / f"{tool}.calls"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.mark.parametrize("code", [0, 3])
def test_secrets_by_name_outputs_shipped_exit_code_published(tmp_path: Path, shims: Path, code: int) -> None:
    base = tmp_path / "base"
    script = render_boot_script(plan(base, code))
    assert SECRET not in script and "s3cr3t" not in script  # only the name travels in user-data
    proc = run(script, tmp_path, shims)
    assert proc.returncode == code, (base / "boot.log").read_text()

    # The secret reached the job, read from SSM in the instance's own region (IMDSv2), never logged.
    assert (base / "run" / "secret.txt").read_text() == SECRET
    [ssm_call] = [c for c in calls(shims, "aws") if c[0] == "ssm"]
    assert ssm_call == ["ssm", "get-parameter", "--with-decryption", "--region", "eu-west-1",
                        "--name", "/gpuplan/r-out/API_TOKEN", "--query", "Parameter.Value", "--output", "text"]
    for log in (base / "run" / "job.log", base / "boot.log"):
        assert "s3cr3t" not in log.read_text()

    # Outputs shipped to the node's prefix, the hostile URL kept as one argument.
    shipped = shims / "s3" / STORAGE[len("s3://"):]
    assert "job says hi" in (shipped / "job.log").read_text()
    assert json.loads((shipped / "metrics.jsonl").read_text().splitlines()[0])["tokens"] == 10
    assert json.loads((shipped / "exit.json").read_text())["exit_code"] == code
    cps = [c for c in calls(shims, "aws") if c[:2] == ["s3", "cp"]]
    assert cps[-1] == ["s3", "cp", "--only-show-errors", "--", str(base / "run" / "exit.json"),
                       f"{STORAGE}/exit.json"]

    # GCP guest attributes: the exit code and a status, for gpuplan to read before deleting the VM.
    guest = {p.name: p.read_text() for p in (shims / "guest").iterdir()}
    assert guest["gpuplan__exit_code"] == str(code)
    assert guest["gpuplan__status"] == ("succeeded" if code == 0 else "failed")
    assert not list(tmp_path.rglob("PWNED*")), "a quoted value was executed"
    # Nothing the script started (the periodic shipper, the watchdog) outlives it.
    assert _wait_gone(tmp_path / "boot.sh"), _processes_running(tmp_path / "boot.sh")


def _processes_running(script: Path) -> list[str]:
    out = subprocess.run(["ps", "-eww", "-o", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if str(script) in line]


def _wait_gone(script: Path, timeout: float = 5.0) -> bool:
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _processes_running(script):
            return True
        time.sleep(0.1)
    return False


def test_a_secret_that_cannot_be_read_ends_the_run_with_a_reason(tmp_path: Path, shims: Path) -> None:
    (shims / "ssm" / "gpuplan__r-out__API_TOKEN").unlink()
    base = tmp_path / "base"
    proc = run(render_boot_script(plan(base, 0)), tmp_path, shims)
    assert proc.returncode == 4
    assert json.loads((base / "run" / "exit.json").read_text())["reason"] == "cannot read secrets"
    assert not (base / "run" / "secret.txt").exists()  # the job never started


def test_outcome_script_is_shellcheck_clean(tmp_path: Path) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    script = render_boot_script(plan(tmp_path, 0))
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_secret_names_must_be_variable_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="environment variable names"):
        render_boot_script(BootPlan(run_id="r", name="n", argv=["true"], secret_params={"A;B": "/x"}))


DOCKER_SHIM = r'''#!PYTHON
import json, os, sys
root = os.environ["SHIM_ROOT"]
args = sys.argv[1:]
with open(os.path.join(root, "docker.calls"), "a") as fh:
    fh.write(json.dumps(args) + "\n")
if args[:2] == ["image", "inspect"]:
    sys.exit(0)
if "--entrypoint" in args:  # the plugin probe: the test says whether the image has aws-ofi-nccl
    sys.exit(0 if os.environ.get("IMAGE_HAS_OFI") == "1" else 2)
'''


@pytest.mark.parametrize("has_plugin", [True, False])
def test_an_efa_machine_gives_the_container_its_devices_and_memlock(tmp_path: Path, shims: Path,
                                                                   has_plugin: bool) -> None:
    """Issue 32 item 3: with EFA devices on the machine, the container gets /dev/infiniband and unlimited locked
    memory, and the job log says when the image lacks the aws-ofi-nccl plugin (NCCL would not use EFA)."""
    docker = shims / "bin" / "docker"
    docker.write_text(DOCKER_SHIM.replace("PYTHON", sys.executable, 1))
    docker.chmod(0o755)
    devices = tmp_path / "infiniband"
    devices.mkdir()
    base = tmp_path / "base"
    from gpuplan.providers.aws.boot import aws_boot_cloud  # the AWS hooks give the fabric's arguments

    script = render_boot_script(BootPlan(run_id="r-efa", name="efa", base_dir=str(base), poweroff=False,
                                         argv=["true"], image="example/train:1", runtime="docker",
                                         cloud=aws_boot_cloud()))
    path = tmp_path / "boot.sh"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PATH=f"{shims / 'bin'}:{os.environ['PATH']}", SHIM_ROOT=str(shims), GPUPLAN_EFA_DEVICES=str(devices),
               IMAGE_HAS_OFI="1" if has_plugin else "0")
    subprocess.run(["bash", str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=60, env=env)
    [run_call] = [c for c in calls(shims, "docker") if c[0] == "run" and "--entrypoint" not in c]
    assert run_call[run_call.index("--device") + 1] == str(devices)
    assert run_call[run_call.index("--ulimit") + 1] == "memlock=-1:-1"
    log = (base / "run" / "job.log").read_text()
    assert ("no aws-ofi-nccl plugin" in log) is (not has_plugin)
    assert _wait_gone(path)
