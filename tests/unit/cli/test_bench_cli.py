"""`gpuplan bench` end to end on the CPU with real torch steps, `bench list`, bad input, and Ctrl-C."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from support.clihelp import interruptible_children, run_cli, run_subprocess

pytest.importorskip("torch")

from gpuplan.estimating.architecture import PRESETS

QUICK = ("--steps", "3", "--warmup", "1", "--micro-batch", "2", "--seq-len", "64")


def test_cpu_bench_measures_counts_and_stores() -> None:
    result = run_cli("bench", "--model", "gpt-tiny", *QUICK, "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    arch = PRESETS["gpt-tiny"]
    assert out["id"] >= 1
    assert out["tokens_per_s"] > 0 and out["samples_per_s"] == pytest.approx(out["tokens_per_s"] / 64)
    assert 0 < out["step_time_p50_s"] <= out["step_time_p90_s"]
    assert out["params"] == arch.param_count()
    assert out["device"] == "cpu" and out["gpu"] is None and out["precision"] == "fp32"
    tokens = 2 * 64
    attention = 12 * arch.num_layers * arch.hidden_size * 64 * tokens
    assert out["flops_per_step"] == pytest.approx(6 * arch.non_embedding_params() * tokens + attention, rel=0.05)
    assert out["attention_flops_per_step"] == attention and out["attention_flops_source"] == "counted"
    assert out["achieved_tflops"] > 0
    assert out["mfu"] is None  # a CPU has no table peak; MFU only with --peak-tflops
    assert out["peak_memory_gb"] > 0 and out["peak_memory_kind"] == "process_peak_rss"
    assert out["torch_version"].startswith("2.")

    listed = run_cli("bench", "list", "--json")
    assert listed.exit_code == 0
    records = listed.json()["benchmarks"]
    assert [r["id"] for r in records] == [out["id"]]
    record = records[0]
    assert record["model"] == "gpt-tiny" and record["model_signature"] == arch.signature()
    assert record["tokens_per_s"] == pytest.approx(out["tokens_per_s"])
    assert record["seq_len"] == 64 and record["micro_batch"] == 2 and record["steps"] == 3


def test_peak_tflops_gives_mfu_and_layers_make_a_proxy() -> None:
    result = run_cli("bench", "--model", "gpt-tiny", "--layers", "1", *QUICK, "--peak-tflops", "2", "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["layers"] == 1 and out["full_layers"] == 2
    assert out["model_signature"] == PRESETS["gpt-tiny"].signature()  # recorded for the full model ...
    assert out["params"] == PRESETS["gpt-tiny"].with_layers(1).param_count()  # ... measured on the proxy
    assert out["mfu"] == pytest.approx(out["achieved_tflops"] / 2)
    assert out["peak_tflops_source"] == "user"


def test_human_output_and_list_table() -> None:
    result = run_cli("bench", *QUICK)
    assert result.exit_code == 0, result.stderr
    assert "tokens/s" in result.stdout and "bench #1" in result.stdout
    assert "pass --peak-tflops" in result.stdout
    listed = run_cli("bench", "list")
    assert "gpt-tiny" in listed.stdout and "fp32" in listed.stdout


def test_users_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "my_lm.py").write_text(textwrap.dedent("""
        import torch
        from torch import nn

        class TinyLM(nn.Module):
            def __init__(self):
                super().__init__()
                self.embed = nn.Embedding(200, 32)
                self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
                self.head = nn.Linear(32, 200)

            def forward(self, tokens):
                x = self.embed(tokens)
                x, _ = self.attn(x, x, x, need_weights=False)
                return self.head(x)

        def make():
            return TinyLM()
    """))
    monkeypatch.chdir(tmp_path)
    result = run_cli("bench", "--module", "my_lm:make", *QUICK, "--json")
    assert result.exit_code == 0, result.stderr
    out = result.json()
    assert out["model_kind"] == "module" and out["model_signature"] == "module:my_lm:make"
    assert out["params"] == 200 * 32 + 4 * 32 * 32 + 4 * 32 + 32 * 200 + 200
    assert out["tokens_per_s"] > 0 and out["flops_per_step"] > 0


@pytest.mark.parametrize("args, message", [
    (("--steps", "0"), "'--steps': must be between 1 and"),
    (("--model", "gpt-2"), "unknown model preset"),
    (("--model", "gpt-tiny", "--layers", "3"), "more than gpt-tiny's 2 layers"),
    (("--layers", "0"), "'--layers': must be between 1 and"),
    (("--model", "gpt2", "--module", "a.b:c"), "give only one of"),
    (("--module", "not a module"), "--module must look like"),
    (("--module", "no_such_pkg_xyz:make"), "cannot import no_such_pkg_xyz"),
    (("--device", "tpu"), "--device must be"),
    (("--seq-len", "999"), "exceeds gpt-tiny's 256 learned positions"),
    (("--peak-tflops", "-1"), "'--peak-tflops': must be greater than 0"),
    (("--model-config", "/no/such/config.json"), "does not exist"),
    (("--precision", "int4"), "Invalid value for '--precision'"),
    (("--steps", "2", "list"), "belong to a bench run"),
])
def test_bad_input_is_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    result = run_cli("bench", *args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and result.stdout == ""
    assert run_cli("bench", "list", "--json").json() == {"benchmarks": []}


def test_help_does_not_import_torch() -> None:
    code = ("import sys\nfrom click.testing import CliRunner\nfrom gpuplan.cli import cli\n"
            "r = CliRunner().invoke(cli, ['bench', '--help'])\nassert r.exit_code == 0, r.output\n"
            "CliRunner().invoke(cli, ['calibrate', '--help'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_ctrl_c_leaves_no_record(tmp_path: Path) -> None:
    """SIGINT in the middle of the timed steps: exit 130, and the benchmarks table stays empty."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with interruptible_children():
        proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "bench", "--steps", "100000", "--warmup", "1",
                                 "--micro-batch", "2", "--seq-len", "64"], env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr], daemon=True)
    reader.start()
    seen: list[str] = []
    try:
        # The bench names the model once torch is imported and the model built (the store was opened before);
        # wait for that line however slow a loaded machine is, then give the steps a moment and interrupt.
        deadline = time.monotonic() + 300
        while not any("tokens per step" in line for line in seen):
            assert time.monotonic() < deadline and proc.poll() is None, "".join(seen)
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=1))
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=120)
        reader.join(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    while not lines.empty():
        seen.append(lines.get())
    stderr = "".join(seen)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr
    assert run_subprocess("bench", "list", "--json").json() == {"benchmarks": []}




def test_ctrl_c_inside_code_built_by_exec_still_exits_130(tmp_path: Path) -> None:
    """Ctrl-C landing in code compiled from a string (how dataclasses and namedtuple build their methods, so it
    happens whenever Ctrl-C hits one of torch's lazy imports) used to end `python -m gpuplan` by SIGINT (-2):
    CPython marks such an interrupt as unhandled even though gpuplan handles it. Here a user's module, imported by
    the bench, receives the SIGINT inside exec'd code, deterministically."""
    (tmp_path / "interrupted_lm.py").write_text(textwrap.dedent("""
        exec("import os, signal\\nos.kill(os.getpid(), signal.SIGINT)\\nwhile True:\\n    pass\\n")
    """))
    with interruptible_children():
        proc = subprocess.run([sys.executable, "-m", "gpuplan", "bench", "--module", "interrupted_lm:make", *QUICK],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == "error: interrupted" and "Traceback" not in proc.stderr
    assert run_subprocess("bench", "list", "--json").json() == {"benchmarks": []}
