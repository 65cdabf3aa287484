"""A local run with a folder storage: the wrapper restores and keeps the job's checkpoints there, and
`gpuplan checkpoints` lists and downloads them after the run (the CLI as a child process)."""

from __future__ import annotations

from pathlib import Path

from support.clihelp import run_subprocess

JOB = """\
name: local-ckpt
runtime: process
run: |
  mkdir -p "$GPUPLAN_CHECKPOINT_DIR/sub"
  echo 7 > "$GPUPLAN_CHECKPOINT_DIR/step"
  echo w > "$GPUPLAN_CHECKPOINT_DIR/sub/w.pt"
checkpoint: {{dir: ckpt, interval: 1h}}
storage: {storage}
limits:
  max_hours: 0.1
"""


def test_a_local_runs_checkpoints_are_kept_in_its_folder_storage_and_listed(tmp_path: Path) -> None:
    storage = tmp_path / "shared"
    spec = tmp_path / "job.yaml"
    spec.write_text(JOB.format(storage=storage))
    launched = run_subprocess("launch", str(spec), "-y", "--json", timeout=120)
    assert launched.exit_code == 0, launched.stderr
    run = launched.json()
    assert run["state"] == "succeeded", run
    kept = storage / run["run_id"] / "checkpoints"
    assert (kept / "step").read_text().strip() == "7" and (kept / "sub" / "w.pt").exists()

    listed = run_subprocess("checkpoints", run["run_id"], "--json")
    assert listed.exit_code == 0, listed.stderr
    assert listed.json()["location"] == str(kept)
    assert [f["name"] for f in listed.json()["files"]] == ["step", "sub/w.pt"]
    shown = run_subprocess("checkpoints", run["run_id"], "--download", str(tmp_path / "dl"))
    assert shown.exit_code == 0, shown.stderr
    assert "sub/w.pt" in shown.stdout and (tmp_path / "dl" / "sub" / "w.pt").read_text().strip() == "w"


def test_checkpoints_of_a_run_without_a_checkpoint_is_one_line_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("name: plain\nruntime: process\ncommand: 'true'\nlimits: {max_hours: 0.1}\n")
    launched = run_subprocess("launch", str(spec), "-y", "--json", timeout=120)
    assert launched.exit_code == 0, launched.stderr
    result = run_subprocess("checkpoints", launched.json()["run_id"])
    assert result.exit_code == 2 and "no checkpoint:" in result.stderr and "Traceback" not in result.stderr
