"""Hostile values stay data in every script gpuplan writes, proved by running the scripts with bash.

Extends tests/unit/jobs/test_bootstrap.py and tests/unit/providers/slurm/test_slurm_script.py (which cover quotes,
`$()`, backticks and newlines in names, env values and argv) with what they leave out: leading dashes, unicode, a
hostile run id and workdir in a boot script that really runs, a Slurm batch script that really runs (srun and
scontrol replaced by shims), the `bench --on` job script, and image/workdir values that would be read as options.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.jobs.runner import NodeLaunch, container_argv
from gpuplan.jobs.spec import SpecError, parse_spec
from gpuplan.launching.remote_bench_job import RESULT_MARKER, job_script
from gpuplan.providers.aws.boot import aws_boot_cloud
from gpuplan.providers.slurm.script import JobShape, ScriptError, render_script

# Every way into a shell: quotes, $(), backticks, ${}, ;, |, &, >, newline, a leading dash, unicode (including
# a right-to-left mark and a fullwidth dollar), a glob.
EVIL = ("-rf --privileged 'q' \"d\" $(touch PWNED1) `touch PWNED2` ${HOME} ; touch PWNED3 | touch PWNED4 & "
        "> PWNED5\nnewline ü日本\u200f＄(touch PWNED6) *")


def no_markers(*folders: Path) -> None:
    for folder in (*folders, Path.cwd()):
        assert not list(folder.rglob("PWNED*")), f"a quoted value was executed in {folder}"


def shellcheck(script: str, *exclude: str) -> None:
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    excluded = ["-e", ",".join(exclude)] if exclude else []
    proc = subprocess.run(["shellcheck", "-s", "bash", *excluded, "-"], input=script, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout


def shim(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/bash\n" + body)
    path.chmod(0o755)


def test_boot_script_with_hostile_run_id_workdir_and_dashes_runs_inert(tmp_path: Path) -> None:
    base = tmp_path / "base"
    workdir = tmp_path / f"w {EVIL.replace('/', '_')}"
    plan = BootPlan(
        run_id=f"r-1\ntouch PWNED0\n{EVIL}", name=EVIL, base_dir=str(base), poweroff=False, workdir=str(workdir),
        argv=["/bin/sh", "-c", 'printf "%s\\n" "$@" > "$GPUPLAN_RUN_DIR/argv.txt"; pwd > "$GPUPLAN_RUN_DIR/pwd.txt";'
              ' printf "%s" "$EVIL_ENV" > "$GPUPLAN_RUN_DIR/env.txt"', "sh", "-n", EVIL],
        env={"EVIL_ENV": EVIL}, storage_url=f"s3://bucket/{EVIL}", cloud=aws_boot_cloud(),
    )
    script = render_boot_script(plan)
    shellcheck(script)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}"}
    (tmp_path / "bin").mkdir()
    shim(tmp_path / "bin", "aws", 'printf "%s\\n" "$@" >> "$SHIM_LOG"\n')  # what `ship` hands the CLI
    env["SHIM_LOG"] = str(tmp_path / "aws-args.txt")
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    run = base / "run"
    assert proc.returncode == 0, (base / "boot.log").read_text()
    assert (run / "argv.txt").read_text() == f"-n\n{EVIL}\n"
    assert (run / "env.txt").read_text() == EVIL
    assert Path((run / "pwd.txt").read_text().strip()) == workdir
    # The storage URL reached the CLI as one argument after `--`, never as options.
    args = (tmp_path / "aws-args.txt").read_text()
    assert f"s3://bucket/{EVIL}/job.log" in args and "--\n" in args
    no_markers(tmp_path)


def test_slurm_batch_script_runs_inert_with_shims(tmp_path: Path) -> None:
    run_dir = tmp_path / f"run {EVIL.replace('/', '_')}"
    start = tmp_path / f"src {EVIL.replace('/', '_')}"
    start.mkdir()
    text = render_script(JobShape(
        run_id="r-0123456789", name=EVIL, run_dir=str(run_dir), source_dir=str(start),
        command='printf "%s" "$EVIL_ENV" > env.txt; printf "%s" "$GPUPLAN_JOB_NAME" > name.txt',
        env={"EVIL_ENV": EVIL}, secret_names=["API_TOKEN"], runtime_note=EVIL, checkpoint_dir=EVIL,
    ))
    shellcheck(text)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # srun: drop its options and run the task as Slurm would (/bin/sh -c TEXT); scontrol: one host.
    shim(bin_dir, "srun", 'while [ "${1#--}" != "$1" ]; do shift; done\nexec "$@"\n')
    shim(bin_dir, "scontrol", "echo node1\n")
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST":
           "node1", "SLURM_JOB_NUM_NODES": "1", "SLURM_NODEID": "0", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
    proc = subprocess.run(["bash", "-c", text], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (start / "env.txt").read_text() == EVIL and (start / "name.txt").read_text() == EVIL
    assert f"gpuplan: {EVIL}" in proc.stderr  # the runtime note is echoed as text
    no_markers(tmp_path)


def test_bench_job_script_hands_argv_over_verbatim(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # A python3 that records its arguments and writes the result file the script then prints.
    shim(bin_dir, "python3", 'case "$1" in -c) exit 0 ;; esac\nprintf "%s\\n" "$@" > "$GPUPLAN_RUN_DIR/argv.txt"\n'
         'echo "{}" > "$GPUPLAN_RUN_DIR/bench.json"\n')
    script = job_script(["--model", EVIL, "--tag", "-x"], f"gpuplan @ file://{EVIL}")
    shellcheck("#!/bin/bash\n" + script, "SC2016")  # single quotes that keep `$(...)` literal: the point
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin", "GPUPLAN_RUN_DIR": str(tmp_path)}
    proc = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert f"{RESULT_MARKER}{{}}" in proc.stdout
    argv = (tmp_path / "argv.txt").read_text().split("\n")
    assert argv[:8] == ["-m", "gpuplan", "bench", "--model", *EVIL.split("\n"), "--tag", "-x"]
    no_markers(tmp_path)


@pytest.mark.parametrize(("key", "value", "fragment"), [
    ("image", "--privileged", "not an image reference"),
    ("image", "'busybox -v /:/host'", "not an image reference"),
    ("workdir", "-P", "must be a folder path"),
])
def test_spec_refuses_images_and_workdirs_that_would_be_options(key: str, value: str, fragment: str) -> None:
    with pytest.raises(SpecError, match=fragment):
        parse_spec(f"name: x\ncommand: a\n{key}: {value}\n")


def test_renderers_refuse_option_like_images_and_workdirs() -> None:
    with pytest.raises(ValueError, match="read as an option"):
        render_boot_script(BootPlan(run_id="r-1", name="x", argv=["true"], image="--privileged"))
    with pytest.raises(ValueError, match="read as an option"):
        render_boot_script(BootPlan(run_id="r-1", name="x", argv=["true"], workdir="-P"))
    with pytest.raises(ValueError, match="read as an option"):
        container_argv(NodeLaunch(run_id="r-1", name="x", argv=["true"], run_dir="/r", image="--privileged"),
                       "podman", {})
    with pytest.raises(ScriptError, match="read as an option"):
        render_script(JobShape(run_id="r-1", name="x", command="true", run_dir="/r", image="--pwd",
                               runtime="apptainer"))
