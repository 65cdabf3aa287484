"""Property fuzz of the job spec: whatever the YAML, parsing ends in a JobSpec or one SpecError line (exit 2),
never another exception, and in well under a second; through the CLI (`launch --dry-run`, `plan`, in child
processes) the same holds: exit 0 or 2, one `error:` line, no traceback."""

from __future__ import annotations

import gc
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.jobs.spec import JobSpec, SpecError, parse_spec

from support.fuzzing import HOSTILE, examples, hostile_text

SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), hostile_text(nul=True))
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(hostile_text(), inner, max_size=4)),
                      max_leaves=20)
FIELDS = {
    "name": SCALARS, "command": st.one_of(SCALARS, st.lists(SCALARS, max_size=4)), "run": SCALARS,
    "image": SCALARS, "runtime": st.sampled_from(["process", "podman", "docker", "auto", "vm", ""]),
    "project": SCALARS, "env": VALUES, "labels": VALUES, "secrets": VALUES, "workdir": SCALARS,
    "resources": st.fixed_dictionaries({}, optional={k: SCALARS for k in (
        "gpu", "gpus", "nodes", "cpus", "memory", "clouds", "regions", "zones", "spot", "max_price_per_hour")}),
    "workload": st.fixed_dictionaries({}, optional={k: SCALARS for k in (
        "model", "params", "tokens", "throughput", "seq_len", "global_batch", "precision")}),
    "limits": st.fixed_dictionaries({}, optional={k: SCALARS for k in ("max_hours", "budget_usd", "deadline")}),
    "schedule": VALUES, "checkpoint": VALUES, "storage": VALUES,
}
# A valid name and command unless the draw replaces them, so most examples get past the first checks.
SPECS = st.fixed_dictionaries({}, optional=FIELDS).map(lambda d: {"name": "fuzz", "command": "echo hi", **d})


def dump(data: Any) -> str:
    return yaml.safe_dump(data, allow_unicode=True, sort_keys=False)


# Raw texts that are YAML only in part: anchors, aliases, flow collections and hostile fragments glued together.
FRAGMENTS = ["name: x\n", "command: echo\n", "labels: &a {k: v}\n", "env: *a\n", "x: &b [*b]\n", "[" * 70,
             "{a: " * 70, "- - - -\n", "? [a]\n: b\n", "!!python/object:os.system\n", "%YAML 1.1\n---\n", "\t",
             "*undefined\n", "&a &b x\n", "'\n", "\"\\u0000\"\n", "---\n...\n", "<<: *a\n"]
RAW = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.sampled_from(HOSTILE), st.text(max_size=30)),
               max_size=12).map("".join)


def outcome(text: str) -> str:
    """Parse `text`: 'ok' or 'refused'; any other exception fails the property. Also bounded in CPU time (the
    machine is shared: wall time measures the neighbours), with the collector paused, so a full collection of
    a long test process's heap is not charged to one example; a bomb or a quadratic path takes far longer."""
    gc.disable()
    started = time.process_time()
    try:
        spec = parse_spec(text, source="fuzz.yaml")
    except SpecError as exc:
        message = str(exc)
        assert message.startswith("fuzz.yaml") and "\n" not in message, message
        result = "refused"
    else:
        assert isinstance(spec, JobSpec)
        result = "ok"
    finally:
        elapsed = time.process_time() - started
        gc.enable()
    assert elapsed < 2.0, f"parsing took {elapsed:.1f} s of CPU"
    return result


@examples(quick=150, long=5000)
@given(SPECS)
def test_any_spec_mapping_parses_or_is_one_line(data: dict[str, Any]) -> None:
    outcome(dump(data))


@examples(quick=150, long=5000)
@given(RAW)
def test_any_text_parses_or_is_one_line(text: str) -> None:
    outcome(text)


@examples(quick=4, long=200)
@given(st.one_of(SPECS.map(dump), RAW).filter(lambda t: "\x00" not in t))
def test_the_cli_refuses_or_plans_any_spec_without_a_traceback(tmp_path_factory: Any, text: str) -> None:
    spec = Path(tmp_path_factory.mktemp("spec")) / "job.yaml"
    spec.write_text(text)
    for argv in (["launch", str(spec), "--dry-run", "--provider", "local"], ["plan", str(spec)]):
        proc = subprocess.run([sys.executable, "-m", "gpuplan", *argv], capture_output=True, text=True, timeout=120,
                              cwd=spec.parent)
        assert proc.returncode in (0, 2), (argv, proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr and "unexpected" not in proc.stderr, proc.stderr
        if proc.returncode == 2:
            assert len([line for line in proc.stderr.splitlines() if line.startswith("error:")]) == 1, proc.stderr
