"""Shell completion as the shell drives it: `gpuplan completion SHELL` prints Click's script, and the script's
callback (`_GPUPLAN_COMPLETE=..._complete` in a child process) offers GPU names, presets, run ids, schedules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.estimating.architecture import PRESETS
from gpuplan.hardware.gpus import all_gpus

from support import ledger_fixture as lf
from support.clihelp import run_cli


def gpus_starting(prefix: str) -> list[str]:
    """The GPU table's names TAB should offer for `prefix`, in the table's order."""
    return [g.name for g in all_gpus() if g.name.lower().startswith(prefix.lower())]


def complete(words: str, shell: str = "bash", env: dict[str, str] | None = None) -> list[str]:
    """What TAB offers after `words` (the last word is the one being completed; a trailing space starts a new
    one), as Click's bash/zsh/fish callback prints it."""
    parts = words.split(" ")
    full_env = {**os.environ, **(env or {}), "_GPUPLAN_COMPLETE": f"{shell}_complete", "COMP_WORDS": words,
                "COMP_CWORD": str(len(parts) - 1) if shell != "fish" else parts[-1]}
    proc = subprocess.run([sys.executable, "-m", "gpuplan"], capture_output=True, text=True, env=full_env,
                          timeout=60, check=False)
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr
    if shell == "bash":
        return [line.split(",", 1)[1] for line in proc.stdout.splitlines() if line]
    if shell == "fish":
        return [line.split(",", 1)[1].split("\t")[0] for line in proc.stdout.splitlines() if line]
    lines = proc.stdout.splitlines()  # zsh: type, value, help per item
    return [lines[i + 1] for i in range(0, len(lines), 3)]


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_shell_script(shell: str) -> None:
    out = run_cli("completion", shell)
    assert out.exit_code == 0, out.stderr
    assert f"_GPUPLAN_COMPLETE={shell}_source" not in out.stdout and f"{shell}_complete" in out.stdout
    bad = run_cli("completion", "powershell")
    assert bad.exit_code == 2 and "'powershell' is not one of 'bash', 'zsh', 'fish'" in bad.stderr


def test_commands_gpu_names_and_presets_complete() -> None:
    assert {"status", "stop"} <= set(complete("gpuplan st"))
    assert complete("gpuplan estimate --gpu H1") == gpus_starting("H1") and "H100" in gpus_starting("H1")
    assert complete("gpuplan gpus a100-8") == ["A100-80GB"]
    assert set(complete("gpuplan plan --gpu H100,L")) == {f"H100,{name}" for name in gpus_starting("L")}
    assert complete("gpuplan estimate --model llama-3") == [n for n in PRESETS if n.startswith("llama-3")]
    assert "llama-3-8b" in complete("gpuplan estimate --model llama-3")
    assert set(complete("gpuplan bench --model ")) == set(PRESETS)
    assert "defaults.regions" in complete("gpuplan config set defaults.")
    assert "providers.aws.bucket" in complete("gpuplan config set providers.aws.b")


@pytest.mark.parametrize("shell", ["zsh", "fish"])
def test_zsh_and_fish_get_the_same_values(shell: str) -> None:
    assert complete("gpuplan estimate --gpu H1", shell) == gpus_starting("H1")


def test_run_ids_and_schedule_names_come_from_the_database(tmp_path: Path) -> None:
    lf.seed(os.environ["GPUPLAN_DB"])
    assert set(complete("gpuplan status r-")) == {"r-1", "r-2", "r-3", "r-4"}
    assert complete("gpuplan stop r-") == ["r-3"]  # only a live run can be stopped
    spec = tmp_path / "job.yaml"
    spec.write_text("name: nightly\nruntime: process\nrun: echo hi\n")
    assert run_cli("schedule", "add", str(spec), "--cron", "@daily").exit_code == 0
    assert complete("gpuplan schedule show n") == ["nightly"]
    other = tmp_path / "other.db"
    assert complete(f"gpuplan --db sqlite:///{other} status r-") == []  # --db is honoured
    assert not other.exists()  # and TAB never creates a database


def test_bash_itself_completes_through_the_printed_script() -> None:
    bin_dir = Path(sys.executable).parent
    if not (bin_dir / "gpuplan").exists() or shutil.which("bash") is None:
        pytest.skip("needs the installed gpuplan script and bash")
    script = ('source <(gpuplan completion bash); COMP_WORDS=(gpuplan gpus H1); COMP_CWORD=2; '
              '_gpuplan_completion gpuplan; printf "%s\\n" "${COMPREPLY[@]}"')
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env, timeout=60, check=False)
    assert proc.stdout.split() == gpus_starting("H1"), proc.stderr
