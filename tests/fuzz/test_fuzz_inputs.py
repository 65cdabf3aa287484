"""Property fuzz of every way in that issue 38's classes 6-8 came through, beyond the options (test_fuzz_options) and
the spec (test_fuzz_spec): special files in every file argument and file variable, every environment variable
gpuplan reads, every `[providers.NAME]` setting of the config file, and YAML 1.1 forms in the task files gpuplan
takes as they are (SkyPilot, dstack). Whatever the input: exit 0; exit 2 with exactly one `error:` line (bad input);
or exit 1 for a failure that is not the user's — never `error: unexpected` (a crash, class 6), and within the
bound of the bounded reader (class 5: a FIFO or /dev/zero must not hang or fill memory).
`make test` runs a small derandomized slice; `make fuzz` (GPUPLAN_FUZZ=1) the long run.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.clihelp import Result, run_cli
from support.fuzzing import HOSTILE, check_outcome, examples, hostile_text

SPEC = "name: fuzz\nruntime: process\ncommand: 'true'\n"


def check(where: object, result: Result) -> None:
    check_outcome(where, result.exit_code, result.stderr)


# ---- special files in every file argument and file variable ----------------------------------------------------

@pytest.fixture(scope="module")
def specials(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """Files a reader must refuse or bound: a FIFO nobody writes, a folder, a symlink loop, a 3 GB sparse file, a
    10 MB comment-only file, binary garbage, device and /proc files."""
    folder = tmp_path_factory.mktemp("special")
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    loop = folder / "loop"
    loop.symlink_to(loop)
    sparse = folder / "sparse.yaml"
    with open(sparse, "wb") as fh:
        fh.truncate(3 << 30)
    comments = folder / "comments.yaml"
    comments.write_text("# x\n" * (10 << 18))
    garbage = folder / "garbage.yaml"
    garbage.write_bytes(bytes(range(256)) * 64)
    (folder / "dir.yaml").mkdir()
    yield {"fifo": str(fifo), "dir": str(folder / "dir.yaml"), "loop": str(loop), "sparse": str(sparse),
           "comments": str(comments), "garbage": str(garbage), "zero": "/dev/zero", "urandom": "/dev/urandom",
           "kmsg": "/proc/kmsg", "environ": "/proc/self/environ", "null": "/dev/null", "missing": str(folder / "no")}


FILE_USES: dict[str, tuple[list[str], dict[str, str]]] = {
    "launch SPEC": (["launch", "{f}", "--dry-run"], {}),
    "plan SPEC": (["plan", "{f}"], {}),
    "convert TASK": (["convert", "{f}"], {}),
    "schedule add SPEC": (["schedule", "add", "{f}", "--cron", "0 2 * * *", "--name", "s"], {}),
    "schedule update SPEC": (["schedule", "update", "s", "{f}"], {}),
    "estimate --model-config": (["estimate", "--model-config", "{f}", "--gpu", "H100", "--tokens", "1B"], {}),
    "plan --model-config": (["plan", "{spec}", "--model-config", "{f}"], {}),
    "GPUPLAN_CONFIG": (["runs"], {"GPUPLAN_CONFIG": "{f}"}),
    "GPUPLAN_CONFIG launch": (["launch", "{spec}", "--dry-run"], {"GPUPLAN_CONFIG": "{f}"}),
    "GPUPLAN_DB": (["runs"], {"GPUPLAN_DB": "sqlite:///{f}"}),
    "GPUPLAN_CONFIG config set": (["config", "set", "defaults.provider", "local"], {"GPUPLAN_CONFIG": "{f}"}),
    # Files gpuplan writes: an existing regular file may be the user's choice, so only the contract holds.
    "report --plot": (["report", "--plot", "{f}"], {}),
    "convert -o": (["convert", "{task}", "-o", "{f}"], {}),
}
WRITES = {"report --plot", "convert -o"}
SPECIAL_NAMES = ["fifo", "dir", "loop", "sparse", "comments", "garbage", "zero", "urandom", "kmsg", "environ", "null",
                 "missing"]


@pytest.mark.parametrize("use", sorted(FILE_USES))
def test_a_special_file_anywhere_a_file_goes_is_refused_or_bounded(use: str, specials: dict[str, str],
                                                                   tmp_path: Path) -> None:
    """Each special file in each file argument, in a child process with a hard timeout: a FIFO or /dev/zero that
    hangs or eats memory fails here (the bounded reader answers in well under a second)."""
    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC)
    task = tmp_path / "task.yaml"
    task.write_text("name: sky\nrun: echo hi\nnum_nodes: 1\n")
    argv_t, env_t = FILE_USES[use]
    names = SPECIAL_NAMES if os.environ.get("GPUPLAN_FUZZ") == "1" else ["fifo", "zero", "sparse"]
    for name in names:
        if use in WRITES and name in ("sparse", "comments", "garbage"):
            continue  # regular files: writing over them is the user's choice (and would spoil them for the rest)
        path = specials[name]
        argv = [a.replace("{f}", path).replace("{spec}", str(spec)).replace("{task}", str(task)) for a in argv_t]
        env = {k: v.replace("{f}", path) for k, v in env_t.items()}
        proc = subprocess.run([sys.executable, "-m", "gpuplan", *argv], capture_output=True, text=True, timeout=60,
                              stdin=subprocess.DEVNULL, cwd=tmp_path, env={**os.environ, **env})
        result = Result(proc.returncode, proc.stdout, proc.stderr)
        check((use, name), result)
        if use not in WRITES and name in ("fifo", "zero", "urandom", "kmsg", "sparse", "dir", "loop", "garbage"):
            assert result.exit_code == 2, (use, name, result.exit_code, result.stderr)


# ---- every environment variable gpuplan reads ------------------------------------------------------------------

ENV_VARS = ["GPUPLAN_NOW", "GPUPLAN_LOCAL_PRICE_PER_HOUR", "GPUPLAN_SLURM_PRICE_PER_NODE_HOUR",
            "GPUPLAN_SLURM_PRICE_PER_GPU_HOUR", "GPUPLAN_CONTAINMENT", "GPUPLAN_AWS_REGIONS", "GPUPLAN_STORAGE_URL",
            "GPUPLAN_AWS_BUCKET", "GPUPLAN_GCS_BUCKET", "GPUPLAN_AWS_PROFILE_WAIT",
            "GOOGLE_CLOUD_PROJECT", "AWS_DEFAULT_REGION", "TZ", "COLUMNS", "XDG_DATA_HOME", "XDG_CONFIG_HOME"]
ENV_COMMANDS = [["runs"], ["report", "--format", "csv"], ["launch", "{spec}", "--dry-run"], ["budget", "list"],
                ["prices", "--limit", "1"], ["schedule", "list"], ["status"], ["config", "show"],
                ["estimate", "--params", "1B", "--gpu", "H100", "--tokens", "1B"], ["plan", "{spec}"],
                ["launch", "{slurm}", "--dry-run"], ["launch", "{aws}", "--dry-run"]]
ENV_VALUES = st.one_of(st.sampled_from([*HOSTILE, "1:30:00", "yes", "0x10", "1e-400", "-3", "nan", "Inf",
                                        "2026-02-30", "off", "cgroup", "none", "s3://", "gs://b/../..", "a,,b",
                                        "us-east-1,%", "/nonexistent/x", "0", "99999999999999999999999"]),
                       hostile_text(nul=False))


@examples(quick=10, long=800)
@given(var=st.sampled_from(ENV_VARS), value=ENV_VALUES, argv=st.sampled_from(ENV_COMMANDS))
def test_any_value_of_any_environment_variable(tmp_path_factory: Any, var: str, value: str, argv: list[str]) -> None:
    folder = Path(tmp_path_factory.mktemp("envvar"))
    specs = {"spec": SPEC, "slurm": SPEC + "resources: {clouds: [slurm], gpu: H100}\n",
             "aws": SPEC.replace("runtime: process\n", "") + "resources: {clouds: [aws], gpu: H100}\n"}
    paths = {}
    for key, text in specs.items():
        paths[key] = folder / f"{key}.yaml"
        paths[key].write_text(text)
    if var.startswith("XDG_") and value and not value.startswith("/"):
        value = str(folder / value.replace("/", "_")[:200])
    env = {var: value}
    if var.startswith("XDG_"):
        env.update(GPUPLAN_DB="", GPUPLAN_HOME="")
    argv = [a.format(**{k: str(v) for k, v in paths.items()}) if a.startswith("{") else a for a in argv]
    check((argv, env), run_cli(*argv, env=env))


# ---- every [providers.NAME] setting of the config file ---------------------------------------------------------

def _provider_settings() -> list[tuple[str, str]]:
    """(provider, setting) for every setting a config file may give a provider, and the constructor's other
    parameters (a config file naming one must be refused in one line, not crash the constructor)."""
    from gpuplan.providers.registry import load_provider_class, provider_names

    found = []
    for name in provider_names():
        params = inspect.signature(load_provider_class(name).__init__).parameters
        found += [(name, p) for p in params if p not in ("self", "args", "kwargs")]
    return sorted(found)


SETTINGS = _provider_settings()
TOML_VALUES = st.one_of(
    st.sampled_from(['"%"', '"$(id)"', '"\\u001b[2J"', "nan", "inf", "-3", "0", "1e308", "true", '""', "[]",
                     '["%"]', "{a = 1}", '"ftp://x"', '"/dev/zero"', '"1:30:00"', '"yes"', "99999999999999999999",
                     '"' + "x" * 5000 + '"', "-0.0", '"us-east-1"', '"10.0.0.0/33"', "2026-02-30T00:00:00Z"]),
    st.integers().map(str), st.floats(allow_nan=False, allow_infinity=False).map(repr),
    hostile_text(nul=False).map(lambda s: '"' + s.replace("\\", "\\\\").replace('"', '\\"')
                                .replace("\n", "\\n").replace("\t", "\\t") + '"'))


@examples(quick=10, long=800)
@given(setting=st.sampled_from(SETTINGS), value=TOML_VALUES,
       argv=st.sampled_from([["config", "show"], ["launch", "{spec}", "--dry-run"], ["prices", "--limit", "1"],
                             ["runs"]]))
def test_any_provider_setting_in_the_config_file(tmp_path_factory: Any, setting: tuple[str, str], value: str,
                                                argv: list[str]) -> None:
    folder = Path(tmp_path_factory.mktemp("provset"))
    provider, key = setting
    config = folder / "config.toml"
    config.write_text(f"[providers.{provider}]\n{key} = {value}\n")
    spec = folder / "job.yaml"
    spec.write_text(SPEC)
    argv = [str(spec) if a == "{spec}" else a for a in argv]
    env = {"GPUPLAN_CONFIG": str(config)}
    result = run_cli(*argv, env=env)
    check((argv, config.read_text()[:300]), result)
    if argv[:2] == ["config", "show"] and result.exit_code == 0 and provider == "local":
        launched = run_cli("launch", str(spec), "--dry-run", env=env)
        check(("launch after config show", config.read_text()[:300]), launched)
        assert launched.exit_code == 0 or "config file" not in launched.stderr, (config.read_text(), launched.stderr)


# ---- YAML 1.1 forms in the task files gpuplan runs as they are -------------------------------------------------

SKY_FIELDS = ["num_nodes: {v}", "resources: {{use_spot: {v}}}", "resources: {{disk_size: {v}}}",
              "resources: {{accelerators: {v}}}", "resources: {{cpus: {v}}}", "envs: {{A: {v}}}"]
DSTACK_FIELDS = ["nodes: {v}", "spot_policy: {v}", "resources: {{gpu: {v}}}", "max_duration: {v}",
                 "env: [{v}]"]
YAML11 = ["1:30:00", "1:30", "0777", "010", "0b101", "0x10", "yes", "no", "on", "off", "Y", "n", "~", "2026-02-30",
          "!!timestamp garbage", "!!binary AAAA", "9" * 5000, ".inf", "-.nan", "1e400", "A100:1:30", "{A100: 1:30}",
          "[A100:8, yes]", "&a x", "*a", "!!python/object:os.system x", "'%'", "\"\\e[2J\""]


@examples(quick=12, long=500)
@given(kind=st.sampled_from(["sky", "dstack"]), field=st.data(), value=st.sampled_from(YAML11),
       command=st.sampled_from([["launch", "{f}", "--dry-run"], ["convert", "{f}"], ["plan", "{f}"]]))
def test_yaml_1_1_forms_in_a_skypilot_or_dstack_task(tmp_path_factory: Any, kind: str, field: Any, value: str,
                                                     command: list[str]) -> None:
    if kind == "sky":
        head = "name: sky\nrun: echo hi\n"
        line = field.draw(st.sampled_from(SKY_FIELDS))
    else:
        head = "type: task\nname: dst\ncommands: [echo hi]\n"
        line = field.draw(st.sampled_from(DSTACK_FIELDS))
    path = Path(tmp_path_factory.mktemp("task")) / "task.yaml"
    path.write_text(head + line.format(v=value) + "\n")
    argv = [str(path) if a == "{f}" else a for a in command]
    result = run_cli(*argv)
    check((argv, path.read_text()[:300]), result)
    if value in ("1:30:00", "1:30", "0777", "010", "0b101") and line.split(":")[0] in ("num_nodes", "nodes"):
        assert result.exit_code == 2, (path.read_text(), result.stderr)
