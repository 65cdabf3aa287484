"""`gpuplan launch` on the local provider, end to end through the real CLI in child processes.

Covers: the JSON contract, runs/status/logs, secrets never stored, a failing job's exit code, stop, the
max_hours and budget caps (following and via `watch --once`), kill -9 of the following CLI, and two ranks
training with torch.distributed over gloo.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from support.clihelp import Result, interruptible_children, run_cli, run_subprocess

ROOT = Path(__file__).resolve().parents[2]
SECRET_VALUE = "tok-$(id)-`whoami`-s3cr3t-VALUE"
JSON_KEYS = {"run_id", "name", "provider", "state", "started_at", "ended_at", "cost_usd", "est_hours",
             "est_cost_usd", "tokens_per_s"}


def write_spec(tmp_path: Path, text: str, name: str = "job.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def gp(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> Result:
    """The CLI in a child process: what a user runs (launch always goes through here)."""
    return run_subprocess(*args, env=env, timeout=timeout)


def q(*args: str) -> Result:
    """The CLI in-process, for the quick queries around a launch (runs, status, logs): same code, no start-up."""
    return run_cli(*args)


def db_path() -> Path:
    return Path(os.environ["GPUPLAN_DB"].removeprefix("sqlite:///"))


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.2):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting")


CPU_JOB = """\
name: metrics-job
runtime: process
secrets: [API_TOKEN]
env: {GREETING: "hello 'world'"}
workload: {params: 1M, tokens: 4000, throughput: 2000}
run: |
  echo "$GREETING from rank $RANK of $WORLD_SIZE"
  test "$API_TOKEN" = "$EXPECTED_TOKEN" && echo "secret arrived"
  for step in 1 2 3 4; do
    python -c "from gpuplan.jobs.metrics import log_metrics; log_metrics($step, tokens=$step * 1000, loss=1.0/$step)"
    sleep 0.1
  done
"""


def test_launch_cpu_job_end_to_end_and_secrets_never_stored(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, CPU_JOB)
    env = {"API_TOKEN": SECRET_VALUE, "EXPECTED_TOKEN": SECRET_VALUE}
    launched = gp("launch", str(spec), "-y", "--json", env=env)
    assert launched.exit_code == 0, launched.stderr
    data = launched.json()
    assert set(data) >= JSON_KEYS
    assert data["state"] == "succeeded" and data["provider"] == "local" and data["exit_code"] == 0
    assert data["started_at"] and data["ended_at"] and data["cost_usd"] == 0
    # The spec's throughput, plus the local start-up allowance (no history yet: the documented default).
    assert data["startup_source"] == "default" and data["mfu_source"] == "user"
    assert data["est_hours"] == pytest.approx((data["startup_s"] + 4000 / 2000) / 3600)
    assert data["tokens_done"] == 4000 and data["tokens_per_s"] > 0
    assert "ETA" in launched.stderr or "%" in launched.stderr  # the progress bar went to stderr

    run_id = data["run_id"]
    listed = q("runs", "--json").json()
    assert [r["run_id"] for r in listed] == [run_id]
    status = q("status", run_id[:6], "--json").json()
    assert set(status) >= JSON_KEYS and status["state"] == "succeeded"
    logs = q("logs", run_id)
    assert logs.exit_code == 0
    assert "hello 'world' from rank 0 of 1" in logs.stdout and "secret arrived" in logs.stdout
    human = q("status", run_id)
    assert "succeeded" in human.stdout and "estimate" in human.stdout

    # The secret's value is nowhere: not in the database, not in any file of the run, not in the CLI output.
    con = sqlite3.connect(db_path())
    dump = "\n".join(con.iterdump())
    con.close()
    assert "API_TOKEN" in dump  # the spec names it...
    assert "s3cr3t" not in dump  # ...but never holds its value
    for path in Path(os.environ["GPUPLAN_HOME"]).rglob("*"):
        if path.is_file() and path.suffix != ".db":
            assert b"s3cr3t" not in path.read_bytes(), path
    assert "s3cr3t" not in launched.stdout + launched.stderr + logs.stdout


def test_missing_secret_is_refused_before_anything_is_recorded(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, CPU_JOB)
    result = gp("launch", str(spec), "-y")
    assert result.exit_code == 2 and "API_TOKEN not set" in result.stderr
    assert q("runs", "--json").json() == []


def test_failing_job_reports_its_exit_code(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "name: fails\nruntime: process\ncommand: echo about to fail; exit 7\n")
    result = gp("launch", str(spec), "-y", "--json")
    assert result.exit_code == 1
    data = result.json()
    assert data["state"] == "failed" and data["exit_code"] == 7 and "exit code 7" in data["state_reason"]


def test_dry_run_records_nothing(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, CPU_JOB)
    result = gp("launch", str(spec), "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["dry_run"] is True and result.json()["est_hours"] > 0
    assert q("runs", "--json").json() == []


def test_unknown_key_is_a_one_line_error(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "name: x\ncommand: echo\nlimits:\n  max_hour: 1\n")
    result = gp("launch", str(spec), "-y")
    assert result.exit_code == 2
    expected = f"error: {spec}:4: limits.max_hour: unknown key 'max_hour' (did you mean max_hours?)"
    assert result.stderr.strip() == expected


SLEEPER = "name: sleeper\nruntime: process\ncommand: echo started; sleep 60\n"


def test_stop_a_detached_run(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SLEEPER)
    launched = gp("launch", str(spec), "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    run_id = launched.json()["run_id"]
    assert launched.json()["state"] == "running"
    pid = int((Path(launched.json()["run_dir"]) / "node-0" / "wrapper.pid").read_text())
    stopped = q("stop", run_id, "--json")
    assert stopped.exit_code == 0, stopped.stderr
    data = stopped.json()
    assert data["state"] == "stopped" and data["ended_at"] is not None
    assert all(i["terminated_at"] is not None for i in data["instances"])
    wait_for(lambda: not Path(f"/proc/{pid}").exists() or _is_zombie(pid), timeout=10)
    assert q("status", run_id, "--json").json()["state"] == "stopped"


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_max_hours_cap_while_following(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SLEEPER + "limits: {max_hours: 0.0008}\n")  # ~2.9 s
    started = time.monotonic()
    result = gp("launch", str(spec), "-y", "--json", "--interval", "0.3")
    assert time.monotonic() - started < 30
    data = result.json()
    assert result.exit_code == 1
    assert data["state"] == "capped" and "max_hours" in data["state_reason"], data
    events = _events(data["run_id"])
    assert ("cap" in events) or any("max_hours" in m for m in events.values())


def test_budget_cap_by_watch_for_a_detached_run(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, SLEEPER + "limits: {budget_usd: 1.5}\n")
    env = {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "3600"}  # $1 per second
    launched = gp("launch", str(spec), "-y", "--detach", "--json", env=env)
    run_id = launched.json()["run_id"]
    assert launched.json()["state"] == "running"
    time.sleep(1.8)
    watched = q("watch", "--once", "--json")
    assert watched.exit_code == 0, watched.stderr
    (data,) = [r for r in watched.json() if r["run_id"] == run_id]
    assert data["state"] == "capped" and data["state_reason"].startswith("budget"), data
    # The machine's own timer (set from the $1.50) ends the job by the time it has cost that, never later.
    assert 1.0 <= data["cost_usd"] <= 1.5
    assert q("watch", "--once", "--json").json() == []  # nothing left to look after


def _events(run_id: str) -> dict[str, str]:
    con = sqlite3.connect(db_path())
    rows = con.execute("SELECT kind, message FROM events WHERE run_id = ?", (run_id,)).fetchall()
    con.close()
    return dict(rows)


def test_kill_9_of_the_following_cli_leaves_the_truth(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, "name: survivor\nruntime: process\nrun: |\n  echo begin\n"
                                '  while [ ! -f "$GPUPLAN_RUN_DIR/go" ]; do sleep 0.1; done\n'
                                "  echo end\n  exit 5\n")
    cli = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(spec), "-y"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, env=dict(os.environ))
    run = wait_for(lambda: (q("runs", "--json").json() or [None])[0], timeout=30)
    wait_for(lambda: q("status", run["run_id"], "--json").json()["state"] == "running", timeout=30)
    cli.send_signal(signal.SIGKILL)
    cli.wait(timeout=10)
    during = q("status", run["run_id"], "--json").json()
    assert during["state"] == "running", during
    assert "begin" in wait_for(lambda: q("logs", run["run_id"]).stdout, timeout=10)
    (Path(during["run_dir"]) / "go").touch()  # let the job finish while nobody follows it
    final = wait_for(lambda: (s := q("status", run["run_id"], "--json").json())["state"] != "running" and s,
                     timeout=30)
    assert final["state"] == "failed" and final["exit_code"] == 5, final
    assert "end" in q("logs", run["run_id"]).stdout


@pytest.mark.slow
def test_two_nodes_train_with_torch_distributed_gloo(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    spec = ROOT / "examples" / "ddp-gloo.yaml"
    result = gp("launch", str(spec), "-y", "--json", timeout=180)
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["state"] == "succeeded" and data["nodes"] == 2 and len(data["instances"]) == 2
    run_dir = Path(data["run_dir"])
    results = [json.loads((run_dir / f"result-rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["rank"] for r in results] == [0, 1]
    assert all(r["world_size"] == 2 and r["all_reduce_sum"] == 3.0 for r in results)  # 1 + 2
    assert all(r["weights_identical"] for r in results)
    assert results[0]["weights"] == pytest.approx(results[1]["weights"])  # DDP kept the replicas in step
    log1 = q("logs", data["run_id"], "--node", "1").stdout
    assert "rank 1 of 2" in log1


@pytest.mark.slow
def test_tiny_gpt_trains_checkpoints_and_reports_throughput(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    text = (ROOT / "examples" / "tiny-gpt.yaml").read_text().replace(
        "--steps 200 --batch 16 --seq-len 64", "--steps 20 --batch 4 --seq-len 32").replace(
        "tokens: 204800", "tokens: 2560")
    spec = write_spec(ROOT / "examples", text, name=f".test-tiny-gpt-{os.getpid()}.yaml")
    try:
        result = gp("launch", str(spec), "-y", "--json", timeout=180)
    finally:
        spec.unlink()
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["state"] == "succeeded" and data["tokens_done"] == 2560 and data["tokens_per_s"] > 0
    assert (Path(data["run_dir"]) / "checkpoints" / "tiny-gpt.pt").exists()


def test_launch_a_container_job_with_podman(tmp_path: Path) -> None:
    from support.podmanhelp import busybox_image, podman_env

    image = busybox_image()
    spec = write_spec(tmp_path, f"name: boxed\nimage: {image}\nruntime: podman\nsecrets: [API_TOKEN]\n"
                                "env: {GREETING: \"hi $(there)\"}\n"
                                "run: |\n  echo \"$GREETING in $GPUPLAN_RUN_DIR\"\n"
                                "  printf %s \"$API_TOKEN\" > \"$GPUPLAN_RUN_DIR/token\"\n"
                                "  echo '{\"time\": 1, \"step\": 1, \"tokens\": 10}' >> \"$GPUPLAN_METRICS\"\n")
    result = gp("launch", str(spec), "-y", "--json",
                env={**podman_env(), "API_TOKEN": SECRET_VALUE})
    assert result.exit_code == 0, result.stderr
    data = result.json()
    assert data["state"] == "succeeded" and data["tokens_done"] == 10
    log = q("logs", data["run_id"]).stdout
    assert "hi $(there) in /gpuplan/run" in log and "(podman)" in log
    assert (Path(data["run_dir"]) / "token").read_text() == SECRET_VALUE  # reached the container by name
    assert "s3cr3t" not in log


@pytest.mark.parametrize("price", ["nan", "inf", "-1", "abc", "1e300"])
def test_a_bad_local_price_is_bad_input_and_records_nothing(price: str) -> None:
    """GPUPLAN_LOCAL_PRICE_PER_HOUR=nan priced every local run at $nan/h; `abc` crashed with a decimal error."""
    spec = Path(__file__).resolve().parents[2] / "examples" / "cpu-hello.yaml"
    result = run_cli("launch", str(spec), "-y", env={"GPUPLAN_LOCAL_PRICE_PER_HOUR": price})
    assert result.exit_code == 2, result.stderr
    assert result.stderr == ("error: the local price per hour (GPUPLAN_LOCAL_PRICE_PER_HOUR or [providers.local] "
                             f"price_per_hour) must be an amount of dollars, 0 or more, not {price!r}\n")
    assert run_cli("runs", "--json").json() == []
    assert run_cli("launch", str(spec), "--dry-run", env={"GPUPLAN_LOCAL_PRICE_PER_HOUR": "$2.50"}).exit_code == 0


def test_ctrl_c_twice_while_following_exits_130_and_the_run_keeps_going(tmp_path: Path) -> None:
    """An impatient double Ctrl-C: the first stops following (one line, exit 130), the second is ignored instead
    of turning the exit into a traceback or a death by SIGINT; the run stays recorded and running."""
    spec = write_spec(tmp_path, SLEEPER)
    with interruptible_children():
        cli = subprocess.Popen([sys.executable, "-m", "gpuplan", "launch", str(spec), "-y", "--interval", "0.2"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        run = wait_for(lambda: (q("runs", "--json").json() or [None])[0], timeout=60)
        wait_for(lambda: q("status", run["run_id"], "--json").json()["state"] == "running", timeout=30)
        cli.send_signal(signal.SIGINT)
        time.sleep(0.05)
        cli.send_signal(signal.SIGINT)
        _, stderr = cli.communicate(timeout=60)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 130, stderr
    assert stderr.strip().splitlines()[-1].startswith(f"stopped following; run {run['run_id']} keeps going")
    assert "Traceback" not in stderr
    assert q("status", run["run_id"], "--json").json()["state"] == "running"
    assert q("stop", run["run_id"], "--json").json()["state"] == "stopped"
