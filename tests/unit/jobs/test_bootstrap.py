"""The boot script: shellcheck-clean, and every user value inert when the script really runs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, boot_plan_for, render_boot_script
from gpuplan.jobs.runner import NodeLaunch

from support.podmanhelp import busybox_image, podman_env

TRICKY = "it's \"$(touch PWNED1)\" `touch PWNED2` ${HOME} \\ ;touch PWNED3\nline2 | & > PWNED4 '\"' $((1+1))"
SECRET = "s3cr3t-$(touch PWNED5)-`id`-'\"-value"


def tricky_plan(base: Path, **overrides: object) -> BootPlan:
    values: dict = dict(
        run_id="r-0123456789", name=TRICKY,
        argv=["/bin/sh", "-c", 'printf "%s" "$TRICKY" > "$GPUPLAN_RUN_DIR/out.txt"; '
                               'printf "%s" "$API_TOKEN" > "$GPUPLAN_RUN_DIR/secret.txt"; echo "job ran: $1"',
              "arg0", TRICKY],
        env={"TRICKY": TRICKY, "PLAIN": "1"}, secrets={"API_TOKEN": SECRET},
        base_dir=str(base), poweroff=False, nnodes=2, node_rank=1, master_addr="10.0.0.5", master_port=29411,
    )
    values.update(overrides)
    return BootPlan(**values)  # type: ignore[arg-type]


@pytest.mark.parametrize("variant", ["process", "container-gpus-storage"])
def test_shellcheck_clean(tmp_path: Path, variant: str) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    extra = {} if variant == "process" else {
        "image": "ghcr.io/x/y:1 $(touch PWNED)", "gpus": 8, "nproc_per_node": 8, "max_hours": 1.5,
        "storage_url": "s3://bucket/runs/it's here", "workdir": "/work space/`x`", "checkpoint_dir": "ck pt"}
    script = render_boot_script(tricky_plan(tmp_path, **extra))
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_rendered_values_are_quoted() -> None:
    script = render_boot_script(tricky_plan(Path("/var/lib/gpuplan")))
    assert "export MASTER_ADDR=" not in script.split("# --- the master address")[0]
    assert "MASTER_ADDR_=10.0.0.5" in script
    assert "export NODE_RANK=1" in script and "export NNODES=2" in script and "export MASTER_PORT=29411" in script
    assert "export GPUPLAN_NODE_RANK=1" in script
    assert "set -x" not in script


def _run_script(script: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    path = cwd / "boot.sh"
    path.write_text(script)
    return subprocess.run(["bash", str(path)], cwd=cwd, capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})


def _assert_inert(tmp_path: Path, base: Path) -> None:
    run_dir = base / "run"
    assert (run_dir / "out.txt").read_text() == TRICKY
    assert (run_dir / "secret.txt").read_text() == SECRET
    assert json.loads((run_dir / "exit.json").read_text())["exit_code"] == 0
    log = (run_dir / "job.log").read_text()
    assert f"job ran: {TRICKY}" in log
    assert "would power off" in log
    for text in (log, (base / "boot.log").read_text()):
        assert "s3cr3t" not in text, "a secret value reached a log"
    assert not [p for p in tmp_path.rglob("PWNED*")], "a quoted value was executed"
    assert not list(Path.cwd().glob("PWNED*"))


def test_process_script_runs_and_values_are_inert(tmp_path: Path) -> None:
    base = tmp_path / "base"
    proc = _run_script(render_boot_script(tricky_plan(base, workdir=str(tmp_path / "w d"))), tmp_path)
    assert proc.returncode == 0, (base / "boot.log").read_text()
    _assert_inert(tmp_path, base)


def test_container_script_runs_with_podman_and_values_are_inert(tmp_path: Path) -> None:
    image = busybox_image()
    base = tmp_path / "base"
    plan = tricky_plan(base, image=image, runtime="podman", run_id=f"r-{os.getpid():x}bs")
    proc = _run_script(render_boot_script(plan), tmp_path, env=podman_env())
    assert proc.returncode == 0, (base / "boot.log").read_text() + (base / "run" / "job.log").read_text()
    _assert_inert(tmp_path, base)


def test_fail_safe_stops_a_hanging_job_at_max_hours(tmp_path: Path) -> None:
    base = tmp_path / "base"
    plan = BootPlan(run_id="r-failsafe", name="hang", argv=["/bin/sh", "-c", "sleep 60"], base_dir=str(base),
                    poweroff=False, max_hours=1.5 / 3600)
    proc = _run_script(render_boot_script(plan), tmp_path)
    record = json.loads((base / "run" / "exit.json").read_text())
    assert record["reason"] == "max_hours", record
    assert proc.returncode != 0
    assert "max_hours reached" in (base / "run" / "job.log").read_text()


def test_fail_safe_on_a_cloud_machine_counts_from_its_boot(tmp_path: Path) -> None:
    """On a cloud machine the bill starts at boot: the timer subtracts the uptime and the time to stop and power
    off, so the machine is off by max_hours. Here /proc/uptime is this host's: a max_hours of uptime + 48 s
    leaves a nap of about 3 s after the 30 s stop grace and 15 s shutdown allowance."""
    uptime = int(float(Path("/proc/uptime").read_text().split()[0]))
    base = tmp_path / "base"
    plan = BootPlan(run_id="r-boot", name="hang", argv=["/bin/sh", "-c", "sleep 60"], base_dir=str(base),
                    poweroff=False, count_from_boot=True, max_hours=(uptime + 48) / 3600)
    started = time.monotonic()
    proc = _run_script(render_boot_script(plan), tmp_path)
    assert time.monotonic() - started < 40  # stopped at ~3 s, not after the 60 s job
    assert json.loads((base / "run" / "exit.json").read_text())["reason"] == "max_hours"
    assert proc.returncode != 0
    log = (base / "run" / "job.log").read_text()
    assert "max_hours reached" in log
    assert re.search(r"booted (\d+) s ago; the job is stopped in [0-3] s", log), log


def test_only_a_machine_the_script_powers_off_counts_from_boot() -> None:
    common = {"run_id": "r", "name": "n", "argv": ["true"], "max_hours": 1.0}
    assert "COUNT_FROM_BOOT=1" in render_boot_script(BootPlan(**common))
    assert "COUNT_FROM_BOOT=0" in render_boot_script(BootPlan(**common, poweroff=False))


def test_missing_gpus_end_the_run_with_a_reason(tmp_path: Path) -> None:
    base = tmp_path / "base"
    plan = BootPlan(run_id="r-nogpu", name="gpu job", argv=["true"], base_dir=str(base), poweroff=False, gpus=8,
                    env={"PATH": "/usr/bin:/bin"})
    proc = _run_script(render_boot_script(plan), tmp_path, env={"PATH": "/usr/bin:/bin"})
    assert proc.returncode == 3
    assert json.loads((base / "run" / "exit.json").read_text())["reason"] == "missing GPUs"


def test_boot_plan_shares_the_local_contract() -> None:
    launch = NodeLaunch(run_id="r-1", name="n", argv=["a"], run_dir="/x", node_rank=1, nnodes=2, nproc_per_node=8,
                        master_port=1234, gpus=8, max_hours=2.0, image="img")
    plan = boot_plan_for(launch, secrets={"S": "v"}, storage_url="gs://b/r-1", master_addr="10.1.1.1")
    assert (plan.node_rank, plan.nnodes, plan.nproc_per_node, plan.gpus, plan.master_port) == (1, 2, 8, 8, 1234)
    script = render_boot_script(plan)
    assert "export NPROC_PER_NODE=8" in script and "STORAGE_URL=gs://b/r-1" in script
    assert "RANK=" not in script.replace("NODE_RANK", "").replace("LOCAL_RANK", "")  # torchrun sets RANK itself


def test_boot_script_for_a_launch_request() -> None:
    from gpuplan.jobs.spec import parse_spec
    from gpuplan.providers.base import LaunchRequest

    spec = parse_spec("name: j\nimage: img:1\ncommand: [python, train.py, --x, \"a b\"]\n"
                      "resources: {gpu: 'H100:8', nodes: 2}\nlimits: {max_hours: 1}\nsecrets: [TOKEN]\n")
    request = LaunchRequest(run_id="r-abc", name=spec.name, command=spec.shell_script, run_dir="/x", nodes=2,
                            gpus_per_node=8, image=spec.image, max_hours=1.0, secrets={"TOKEN": "v"},
                            options={"argv": spec.argv})
    script = render_boot_script_checked(request)
    assert "JOB_ARGV=(/bin/sh -c 'exec python train.py --x '\"'\"'a b'\"'\"'')" in script
    assert "export TOKEN=v" in script and "MAX_SECONDS=3600" in script and "export NODE_RANK=1" in script


def render_boot_script_checked(request: object) -> str:
    from gpuplan.launching.placements import boot_script_renderer

    script = boot_script_renderer(request)(1, "10.0.0.2")  # type: ignore[arg-type]
    if shutil.which("shellcheck"):
        proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout
    return script
