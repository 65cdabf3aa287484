"""`gpuplan exec` and `gpuplan ssh` into live runs: for real on the local provider (process and podman container)
and on the test Slurm cluster; for AWS and GCE the built command line (no cloud is ever called), and the shell
line those run on the machine, executed here with stand-ins for sudo and docker."""

from __future__ import annotations

import json
import os
import re
import shlex
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.providers.attach_base import AttachTarget, remote_snippet

from support.clihelp import Result, run_cli, run_subprocess
from support.slurmhelp import SlurmCluster, wait_for

SLEEPER = "name: sleeper\nruntime: process\nrun: sleep 120\n"


def gp(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> Result:
    return run_subprocess(*args, env=env, input=input, timeout=120)


def launch_detached(tmp_path: Path, text: str, *extra: str, env: dict[str, str] | None = None) -> dict:
    spec = tmp_path / "job.yaml"
    spec.write_text(text)
    launched = gp("launch", str(spec), "-y", "--detach", "--json", *extra, env=env)
    assert launched.exit_code == 0, launched.stderr
    return launched.json()


def test_exec_and_ssh_into_a_local_process_run(tmp_path: Path) -> None:
    run = launch_detached(tmp_path, SLEEPER)
    run_id = run["run_id"]
    try:
        out = gp("exec", run_id, "--", "sh", "-c", 'pwd; echo "$GPUPLAN_RUN_ID rank $RANK"; exit 3')
        assert out.exit_code == 3, out.stderr  # the command's own status
        assert out.stdout.splitlines() == [str(tmp_path), f"{run_id} rank 0"]
        assert f"{run_id} node 0: a process in {tmp_path}" in out.stderr
        shell = gp("ssh", run_id, input="echo shell in $PWD for $GPUPLAN_RUN_ID\n")
        assert shell.exit_code == 0 and f"shell in {tmp_path} for {run_id}" in shell.stdout
        line = gp("ssh", run_id, "--print")
        assert line.exit_code == 0 and line.stdout.startswith(f"cd {tmp_path} && env ")
        for args, needle in ((("exec", run_id, "--node", "1", "--", "true"), "run has 1 node"),
                             (("exec", run_id, "--via", "ssh", "--", "true"), "the local provider has one way in"),
                             (("exec", run_id, "ls", "-la"), "No such option '-l'")):
            bad = run_cli(*args)
            assert bad.exit_code == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
            assert needle.replace("run has", f"run {run_id} has") in bad.stderr or needle in bad.stderr
    finally:
        assert run_cli("stop", run_id).exit_code == 0
    ended = run_cli("exec", run_id, "--", "true")
    assert ended.exit_code == 2 and f"run {run_id} is stopped: there is no machine to get into" in ended.stderr


def test_exec_goes_into_a_local_runs_container(tmp_path: Path) -> None:
    from support.podmanhelp import busybox_image, podman_env

    image = busybox_image()
    env = podman_env()
    run = launch_detached(tmp_path, f"name: boxed\nimage: {image}\nruntime: podman\nrun: sleep 120\n", env=env)
    run_id = run["run_id"]
    try:
        wait_for(lambda: "starting (podman)" in run_cli("logs", run_id).stdout, timeout=60)
        wait_for(lambda: gp("exec", run_id, "--", "sh", "-c", ":", env=env).exit_code == 0, timeout=60)
        out = gp("exec", run_id, "--", "sh", "-c", 'echo "$GPUPLAN_RUN_DIR"; ls /gpuplan/run', env=env)
        assert out.exit_code == 0, out.stderr
        assert out.stdout.splitlines()[0] == "/gpuplan/run"  # the container's view of the run
        assert f"podman exec into container gpuplan-{run_id}-0" in out.stderr
        line = gp("ssh", run_id, "--print", env=env).stdout
        assert shlex.split(line)[:3] == ["podman", "exec", "-i"]
    finally:
        run_cli("stop", run_id)


def test_exec_and_ssh_into_a_slurm_run(slurm: SlurmCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in slurm.env().items():
        monkeypatch.setenv(key, value)
    run = launch_detached(tmp_path, "name: slurm-sleeper\nruntime: process\nrun: sleep 120\n", "--provider",
                          "slurm")
    run_id, job_id = run["run_id"], run["instances"][0]["instance_id"]
    try:
        running = lambda: slurm.run("squeue", "-h", "-j", job_id, "-o", "%T").stdout.strip() == "RUNNING"  # noqa: E731
        wait_for(running)
        out = gp("exec", run_id, "--", "sh", "-c", 'echo "job $SLURM_JOB_ID in $PWD"; exit 5')
        assert out.exit_code == 5, out.stderr
        assert out.stdout.strip() == f"job {job_id} in {run['run_dir']}"
        assert f"a step in Slurm job {job_id} on its node 0" in out.stderr
        argv = shlex.split(gp("ssh", run_id, "--print").stdout)
        srun = argv.index(next(a for a in argv if a.endswith("srun")))
        assert argv[srun + 1:srun + 8] == [f"--jobid={job_id}", "--overlap", "--nodes=1", "--ntasks=1",
                                           "--relative=0", "--quiet", "--pty"]
        shell = gp("ssh", run_id, input="echo shell $SLURM_JOB_ID\n")
        assert f"shell {job_id}" in shell.stdout, shell.stderr
        assert running()  # the job itself was not disturbed
    finally:
        run_cli("stop", run_id)


def _record_cloud_run(run_id: str, provider: str, instance_id: str, *, region: str, zone: str | None) -> None:
    from gpuplan.store.db import Store
    from gpuplan.store.models import InstanceRow, Run

    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        s.add(Run(id=run_id, name="cloudy", provider=provider, cloud=provider, state="running", spec_text="",
                  spec_hash="", region=region, zone=zone, nodes=2))
        for rank in (0, 1):
            s.add(InstanceRow(run_id=run_id, provider=provider, provider_instance_id=f"{instance_id}{rank}",
                              cloud=provider, region=region, zone=zone, node_rank=rank, price_per_hour=1,
                              state="running"))
    store.close()


def test_aws_exec_is_a_session_manager_command_line() -> None:
    _record_cloud_run("r-aws", "aws", "i-0abc", region="eu-west-1", zone="euw1-az1")
    out = run_cli("exec", "r-aws", "--node", "1", "--print", "--", "nvidia-smi", "-L")
    assert out.exit_code == 0, out.stderr
    argv = shlex.split(out.stdout)
    assert argv[:9] == ["aws", "ssm", "start-session", "--region", "eu-west-1", "--target", "i-0abc1",
                        "--document-name", "AWS-StartInteractiveCommand"]
    (command,) = json.loads(argv[argv.index("--parameters") + 1])["command"]
    assert command.startswith("sudo -i sh -c ") and "gpuplan-r-aws-1" in command and "nvidia-smi -L" in command
    assert re.search(r"; echo __gpuplan_exit_[0-9a-f]{16}__=\$\?$", command)  # exec's status comes back
    via_ssh = shlex.split(run_cli("ssh", "r-aws", "--via", "ssh", "--print").stdout)
    assert via_ssh[:3] == ["ssh", "-t", "-o"] and via_ssh[4] == "ubuntu@i-0abc0"
    assert via_ssh[3] == ("ProxyCommand=aws ssm start-session --region eu-west-1 --target %h --document-name "
                          "AWS-StartSSHSession --parameters portNumber=%p")


FAKE_AWS = """\
import json, os, subprocess, sys
args = sys.argv[1:]
(line,) = json.loads(args[args.index("--parameters") + 1])["command"]
print("\\nStarting session with SessionId: test-1\\n", flush=True)  # what the plugin prints around a session
if os.environ.get("FAKE_SSM") != "drop":  # "drop": the session ends before the command does
    subprocess.call(["sh", "-c", line])
print("\\n\\nExiting session with sessionId: test-1.\\n", flush=True)
sys.exit(0)  # start-session's own status, whatever the command did (aws/session-manager-plugin#59)
"""


def test_aws_exec_exits_with_the_commands_status_though_session_manager_says_0(tmp_path: Path) -> None:
    """A stand-in `aws` runs the Session Manager line here (as the SSM agent would, with sudo as a pass-through)
    and, like the real plugin, always exits 0: gpuplan exits with the command's own status, read from the
    one-time marker line, which it leaves out of the output."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "aws").write_text(f"#!{sys.executable}\n{FAKE_AWS}")
    (bin_dir / "sudo").write_text('#!/bin/sh\n[ "$1" = -i ] && shift\nexec "$@"\n')
    for tool in ("aws", "sudo"):
        (bin_dir / tool).chmod(0o755)
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}"}
    _record_cloud_run("r-ssm", "aws", "i-0ssm", region="eu-west-1", zone="euw1-az1")
    out = gp("exec", "r-ssm", "--", "sh", "-c", "echo from the machine; printf 'no newline'; exit 7", env=env)
    assert out.exit_code == 7, out.stderr
    assert "from the machine" in out.stdout and "no newline" in out.stdout and "__gpuplan_exit_" not in out.stdout
    # A command printing something marker-like does not choose gpuplan's status: the marker is new each call.
    fake = gp("exec", "r-ssm", "--", "sh", "-c", "echo __gpuplan_exit_0123456789abcdef__=0; exit 3", env=env)
    assert fake.exit_code == 3 and "__gpuplan_exit_0123456789abcdef__=0" in fake.stdout
    ok = gp("exec", "r-ssm", "--", "true", env=env)
    assert ok.exit_code == 0, ok.stderr
    dropped = gp("exec", "r-ssm", "--", "true", env={**env, "FAKE_SSM": "drop"})
    assert dropped.exit_code == 255 and "did not report the command's exit status" in dropped.stderr


def test_gce_ssh_is_an_iap_command_line() -> None:
    _record_cloud_run("r-gce", "gcp", "us-central1-a/gpuplan-r-gce-", region="us-central1", zone="us-central1-a")
    argv = shlex.split(run_cli("ssh", "r-gce", "--print").stdout)
    assert argv[:6] == ["gcloud", "compute", "ssh", "gpuplan-r-gce-0", "--zone=us-central1-a",
                        "--tunnel-through-iap"]
    assert "--project=gpuplan-test" in argv and argv[-2:] == ["--", "-t"]
    out = run_cli("exec", "r-gce", "--node", "1", "--print", "--", "cat", "/etc/hostname")
    argv = shlex.split(out.stdout)
    assert argv[3] == "gpuplan-r-gce-1" and argv[-1].startswith("--command=cd /var/lib/gpuplan/run")
    assert run_cli("exec", "r-gce", "--via", "ssm", "--print", "--", "true").exit_code == 2


def test_the_machine_side_line_quotes_every_word(tmp_path: Path) -> None:
    """Run the line a cloud machine runs, here, with stand-ins: sudo runs its arguments, docker says what it got."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in (("sudo", 'exec "$@"'),
                       ("docker", 'if [ "$1" = container ]; then exit 0; fi; printf "[%s]" "$@"')):
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    target = AttachTarget(run_id="r-1", provider="aws", instance_id="i-1", node_rank=0, nodes=1)
    tricky = ["sh", "-c", "echo \"$1\" 'a b' $(id)", "x;y"]
    line = remote_snippet(target, tricky)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    out = subprocess.run(["sh", "-c", line], capture_output=True, text=True, env=env, timeout=30, check=False)
    assert out.stdout == "[exec][-i][gpuplan-r-1-0][sh][-c][echo \"$1\" 'a b' $(id)][x;y]"
    (bin_dir / "docker").unlink()  # no container runtime: the command runs on the machine itself
    no_container = subprocess.run(["sh", "-c", remote_snippet(target, ["echo", "plain $HOME"])], capture_output=True,
                                  text=True, env={**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}, timeout=30)
    assert no_container.stdout == "plain $HOME\n"
