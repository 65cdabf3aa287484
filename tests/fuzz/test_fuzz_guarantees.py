"""Property fuzz of the inputs issue 38 found crashing or accepted as garbage: environment variables, the config
file, YAML 1.1 forms in the spec, dates, huge numbers, special files. Whatever the input, a command ends with
success, a failure it explains, or one `error:` line and exit 2: never a traceback, never `error: unexpected`
(class 6); a config file `config show` accepts is one a launch can use (class 7); a YAML 1.1 surprise is refused
with how to quote it. In-process for breadth, and the recorded cases once more as separate processes.
`make test` runs a small derandomized slice; `make fuzz` (GPUPLAN_FUZZ=1) the long run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from support.clihelp import Result, run_cli, run_subprocess
from support.fuzzing import HOSTILE, check_outcome, examples, hostile_text

SPEC = "name: fuzz\nruntime: process\ncommand: 'true'\n"
SPECIAL_FILES = ["/dev/zero", "/dev/urandom", "/proc/kmsg", "/proc/self/environ", "/", "/dev/null"]
DATES = ["2026-02-30", "9999-12-31T23:59:59-12:00", "0001-01-01", "10000-01-01", "2026-13-01", "garbage", "",
         "2026-11-01", "1e400", "-1", "2026-11-01T25:00", "2026-11-01T12:00+25:00"]
HUGE = ["9" * 5000, "9" * 100_000, "1e400", "-" + "9" * 4301, "1e-400"]


def check(argv: list[str], result: Result, env: dict[str, str] | None = None) -> None:
    check_outcome((argv, env), result.exit_code, result.stderr)


# ---- environment variables ------------------------------------------------------------------------------------

ENV_VARS = ["GPUPLAN_NOW", "GPUPLAN_LOCAL_PRICE_PER_HOUR", "GPUPLAN_CONFIG", "GPUPLAN_HOME", "GPUPLAN_DB"]
ENV_COMMANDS = [["runs"], ["report"], ["launch", "{spec}", "--dry-run"], ["budget", "list"], ["prices", "--limit", "1"]]


@examples(quick=8, long=600)
@given(var=st.sampled_from(ENV_VARS), value=st.one_of(st.sampled_from(HOSTILE + DATES + HUGE + SPECIAL_FILES),
                                                     hostile_text(nul=False)),
       argv=st.sampled_from(ENV_COMMANDS))
def test_any_environment_value_is_used_or_refused_in_one_line(tmp_path_factory: Any, var: str, value: str,
                                                              argv: list[str]) -> None:
    folder = Path(tmp_path_factory.mktemp("env"))
    spec = folder / "job.yaml"
    spec.write_text(SPEC)
    if var == "GPUPLAN_HOME" and value and not value.startswith("/"):
        value = str(folder / value.replace("/", "_")[:200])
    env = {var: value, **({"GPUPLAN_DB": ""} if var == "GPUPLAN_HOME" else {})}
    argv = [a.replace("{spec}", str(spec)) for a in argv]
    check(argv, run_cli(*argv, env=env), env)


# ---- the config file: what `config show` accepts, a launch can use ---------------------------------------------

DEFAULT_VALUES = st.one_of(st.sampled_from(["local", "aws", "%", "$(id)", "\x1b[2J", "mars", "ftp://x", "/tmp/x",
                                            "s3://bucket/p", "x" * 1000]),
                           hostile_text(nul=False), st.lists(hostile_text(nul=False), max_size=3),
                           st.floats(allow_nan=True), st.integers())
LOCAL_VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.booleans(),
                         hostile_text(nul=False), st.sampled_from(["nan", "-3", "1e-400", "0", "2.5"]))


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return "nan" if value != value else ("inf" if value == float("inf") else
                                             "-inf" if value == float("-inf") else repr(value))
    if isinstance(value, (int, str, list)):
        return json.dumps(value)
    raise TypeError(value)


@examples(quick=8, long=600)
@given(defaults=st.dictionaries(st.sampled_from(["provider", "clouds", "regions", "project", "budget", "storage"]),
                                DEFAULT_VALUES, max_size=3),
       local=st.dictionaries(st.sampled_from(["price_per_hour", "root", "python"]), LOCAL_VALUES, max_size=2))
def test_a_config_that_config_show_accepts_is_one_a_launch_can_use(tmp_path_factory: Any, defaults: dict[str, Any],
                                                                   local: dict[str, Any]) -> None:
    folder = Path(tmp_path_factory.mktemp("config"))
    lines = ["[defaults]", *(f"{k} = {toml_value(v)}" for k, v in defaults.items()),
             "[providers.local]", *(f"{k} = {toml_value(v)}" for k, v in local.items())]
    config = folder / "config.toml"
    config.write_text("\n".join(lines) + "\n")
    spec = folder / "job.yaml"
    spec.write_text(SPEC)
    env = {"GPUPLAN_CONFIG": str(config)}
    shown = run_cli("config", "show", env=env)
    check(["config", "show"], shown, env)
    if shown.exit_code != 0:
        return
    launched = run_cli("launch", str(spec), "--dry-run", env=env)
    check(["launch", "--dry-run"], launched, env)
    # Accepted by `config show`: the launch may refuse the job for what it is (no GPU, a budget), never the file.
    assert launched.exit_code == 0 or "config file" not in launched.stderr, (config.read_text(), launched.stderr)


# ---- YAML 1.1 surprises in the spec ----------------------------------------------------------------------------

NUMBER_FIELDS = ["limits: {max_hours: %s}", "workload: {tp: %s}", "workload: {lora: %s}", "resources: {nodes: %s}",
                 "workload: {tokens: %s}", "limits: {budget_usd: %s}", "resources: {spot: %s}"]
SURPRISES = ["1:30:00", "1:30", "0777", "010", "0b101", "yes", "no", "on", "off", "Yes", "OFF", "y", "n", "2026-02-30",
             "!!timestamp garbage", "9" * 5000, "true"]


@examples(quick=12, long=400)
@given(field=st.sampled_from(NUMBER_FIELDS), value=st.sampled_from(SURPRISES))
def test_yaml_1_1_surprises_are_refused_with_how_to_write_them(tmp_path_factory: Any, field: str, value: str) -> None:
    spec = Path(tmp_path_factory.mktemp("yaml")) / "job.yaml"
    spec.write_text(SPEC + field % value + "\n")
    result = run_cli("launch", str(spec), "--dry-run")
    check(["launch", field % value], result)
    if value in ("true", "y", "n") and "spot" in field:
        return  # a yes/no field takes true (and pydantic reads the text y/n as one; YAML 1.1's yes/on are refused)
    assert result.exit_code == 2, (field % value, result.stderr)
    if value in ("1:30:00", "1:30", "0777", "010", "0b101", "yes", "no", "on", "off", "Yes", "OFF"):
        assert "quote it" in result.stderr, result.stderr


# ---- the recorded cases, as separate processes -----------------------------------------------------------------

def _model_config(folder: Path, **extra: Any) -> str:
    path = folder / "config.json"
    path.write_text(json.dumps({"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                                "vocab_size": 100, "intermediate_size": 128, **extra}))
    return str(path)


RECORDED: dict[str, tuple[list[str], dict[str, str], str]] = {
    "deadline 2026-02-30": (["launch", "{spec:limits: {deadline: 2026-02-30}}", "--dry-run"], {}, ""),
    "timestamp garbage": (["launch", "{spec:limits: {deadline: !!timestamp garbage}}", "--dry-run"], {}, ""),
    "100,000 digits": (["launch", "{spec:resources: {nodes: " + "9" * 100_000 + "}}", "--dry-run"], {}, ""),
    "--since far": (["runs", "--since", "9999-12-31T23:59:59-12:00"], {}, ""),
    "report --since far": (["report", "--since", "9999-12-31T23:59:59-12:00"], {}, ""),
    "GPUPLAN_NOW far": (["report"], {"GPUPLAN_NOW": "9999-12-31T23:59:59-12:00"}, ""),
    "home with % and #": (["runs"], {"GPUPLAN_HOME": "{tmp}/a%b#c", "GPUPLAN_DB": ""}, "ok"),
    "long model config": (["estimate", "--model-config", "{tmp}/" + "m" * 300 + ".json", "--gpu", "H100",
                           "--tokens", "1B"], {}, ""),
    "deep JSON": (["estimate", "--model-config", "{deepjson}", "--gpu", "H100", "--tokens", "1B"], {}, ""),
    "deep TOML": (["runs"], {"GPUPLAN_CONFIG": "{deeptoml}"}, ""),
    "root = 5": (["launch", "{spec:}", "--dry-run"], {"GPUPLAN_CONFIG": "{config:[providers.local]\nroot = 5}"}, ""),
    "price 1e-400": (["launch", "{spec:}", "--dry-run"], {"GPUPLAN_LOCAL_PRICE_PER_HOUR": "1e-400"}, ""),
    "price nan in config": (["config", "show"], {"GPUPLAN_CONFIG": "{config:[providers.local]\nprice_per_hour = nan}"},
                            ""),
    "price -3 in config": (["config", "show"], {"GPUPLAN_CONFIG": "{config:[providers.local]\nprice_per_hour = -3}"},
                           ""),
    "clouds mars": (["config", "show"], {"GPUPLAN_CONFIG": "{config:[defaults]\nclouds = [\"mars\"]}"}, ""),
    "storage ftp": (["config", "show"], {"GPUPLAN_CONFIG": "{config:[defaults]\nstorage = \"ftp://x\"}"}, ""),
    "config set provider %": (["config", "set", "defaults.provider", "%"], {"GPUPLAN_CONFIG": "{tmp}/c.toml"}, ""),
    "max_hours 1:30:00": (["launch", "{spec:limits: {max_hours: 1:30:00}}", "--dry-run"], {}, ""),
    "tp: true": (["launch", "{spec:workload: {tp: true}}", "--dry-run"], {}, ""),
    "lora: yes": (["launch", "{spec:workload: {lora: yes}}", "--dry-run"], {}, ""),
    "num_local_experts -8": (["estimate", "--model-config", "{moe}", "--gpu", "H100", "--tokens", "1B"], {}, ""),
    "--module sys:exit": (["estimate", "--module", "sys:exit", "--gpu", "H100", "--tokens", "1B"], {}, ""),
    "schedule rm nosuch": (["schedule", "rm", "nosuch"], {}, ""),
    "db path a folder": (["runs"], {"GPUPLAN_DB": "sqlite:///{tmp}"}, ""),
    # Found by this session's fuzz (tests/fuzz/test_fuzz_inputs.py), kept as recorded cases:
    "db path a symlink loop": (["runs"], {"GPUPLAN_DB": "sqlite:///{loop}"}, ""),
    "config set into a folder": (["config", "set", "defaults.provider", "local"], {"GPUPLAN_CONFIG": "{tmp}"}, ""),
    "aws session in config": (["config", "show"], {"GPUPLAN_CONFIG": "{config:[providers.aws]\nsession = 0.0}"}, ""),
    "dstack nodes .inf": (["launch", "{task:type: task\nname: d\ncommands: [echo hi]\nnodes: .inf}", "--dry-run"],
                          {}, ""),
    "skypilot num_nodes 1.5": (["launch", "{task:name: s\nrun: echo hi\nnum_nodes: 1.5}", "--dry-run"], {}, ""),
    "nodes 0b101": (["launch", "{spec:resources: {nodes: 0b101}}", "--dry-run"], {}, ""),
}


SEPARATE = {"home with % and #", "deep TOML", "--module sys:exit", "max_hours 1:30:00", "db path a folder"}


def _expand(text: str, folder: Path) -> str:
    if text.startswith("{spec:"):
        path = folder / "job.yaml"
        path.write_text(SPEC + text[6:-1] + "\n")
        return str(path)
    if text.startswith("{task:"):
        path = folder / "task.yaml"
        path.write_text(text[6:-1] + "\n")
        return str(path)
    if "{loop}" in text:
        (folder / "loop.db").symlink_to(folder / "loop.db")
        return text.replace("{loop}", str(folder / "loop.db"))
    if text.startswith("{config:"):
        path = folder / "config.toml"
        path.write_text(text[8:-1] + "\n")
        return str(path)
    if text == "{deepjson}":
        path = folder / "deep.json"
        path.write_text("[" * 100_000 + "]" * 100_000)
        return str(path)
    if text == "{deeptoml}":
        path = folder / "deep.toml"
        path.write_text("x = " + "[" * 100_000 + "]" * 100_000 + "\n")
        return str(path)
    if text == "{moe}":
        return _model_config(folder, num_local_experts=-8, num_experts_per_tok=2)
    return text.replace("{tmp}", str(folder))


@pytest.mark.parametrize("case", sorted(RECORDED))
def test_the_recorded_crashes_and_garbage_are_one_line_exit_2(tmp_path: Path, case: str) -> None:
    argv, env, expect = RECORDED[case]
    argv = [_expand(a, tmp_path) for a in argv]
    env = {k: _expand(v, tmp_path) for k, v in env.items()}
    # In-process (fast); a few, where the process itself matters, as separate processes.
    separate = case in SEPARATE
    result = run_subprocess(*argv, env=env, input="") if separate else run_cli(*argv, env=env, input="")
    check(argv, result, env)
    if expect == "ok":
        assert result.exit_code == 0, result.stderr
    else:
        assert result.exit_code == 2, (case, result.exit_code, result.stderr)
    if case.startswith("home"):
        assert os.path.exists(env["GPUPLAN_HOME"])
