"""A sweep over the whole command tree for the CLI's promises (DESIGN.md "CLI").

The tree is walked from `gpuplan.cli.cli` through the LazyGroup registry, so a new command or subcommand is
covered automatically, and the coverage tests at the bottom fail until it gets a JSON case and a bad-input
case here (or a stated reason why it has none).

Promises checked:
  (a) every command and subcommand has a `--help` that explains it (and every option says what it does);
  (b) every data command's `--json` prints exactly one JSON document on stdout, nothing else;
  (c) bad input -> exactly one `error: ...` line on stderr, exit status 2, no traceback, nothing on stdout;
  (d) bad input never changes the database (every table dumped before and after);
  (e) an unexpected exception -> one line with a hint that -v shows the traceback, exit status 1.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest

from gpuplan.cli import COMMANDS, LazyGroup, cli

from support.clihelp import Result, run_cli, run_subprocess
from support.clitree import Path_, command_tree

# ---------------------------------------------------------------------------------------------------------------
# The command tree


TREE = command_tree()
COMMAND_PATHS = sorted(p for p in TREE if p)
GLOBAL_OPTIONS_WITH_VALUE = {"--db"}


def resolve(argv: list[str]) -> Path_:
    """The command path an argv invokes (global options skipped), e.g. ['budget', 'set', 'x'] -> budget set."""
    path: Path_ = ()
    args = iter(argv)
    for token in args:
        if token in GLOBAL_OPTIONS_WITH_VALUE and not path:
            next(args, None)
            continue
        if token.startswith("-"):
            continue
        if (*path, token) in TREE:
            path += (token,)
        elif path:
            break
    return path


def has_json(cmd: click.Command) -> bool:
    return any("--json" in getattr(p, "opts", []) for p in cmd.params)


def test_tree_is_the_registry() -> None:
    """The walk starts from the LazyGroup registry: every registered name is a top-level command."""
    assert isinstance(cli, LazyGroup)
    assert {p[0] for p in COMMAND_PATHS} == set(COMMANDS)
    assert any(len(p) == 2 for p in COMMAND_PATHS), "groups' subcommands are walked too"


# ---------------------------------------------------------------------------------------------------------------
# (a) --help


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=lambda p: " ".join(p))
def test_help_explains_every_command(path: Path_) -> None:
    cmd = TREE[path]
    result = run_cli(*path, "--help")
    assert result.exit_code == 0, result.stderr
    # CliRunner names the program after the function ("cli"); the installed script says "gpuplan".
    assert result.stdout.split(" ", 2)[0] == "Usage:" and f" {' '.join(path)} " in result.stdout.splitlines()[0]
    assert result.stderr == ""
    description = " ".join((cmd.help or "").split())
    assert len(description) >= 25 and len(description.split()) >= 4, f"help too thin: {description!r}"
    first_words = " ".join(description.split()[:4])
    assert first_words in " ".join(result.stdout.split()), "the description is shown by --help"
    silent = [p.opts[0] for p in cmd.params
              if isinstance(p, click.Option) and not p.hidden and not (p.help or "").strip()]
    assert not silent, f"options without help text: {silent}"
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(click.Context(cmd)):
            assert f"  {name} " in result.stdout, f"{name} is not listed in the group's help"


def test_top_level_help_lists_every_command_with_a_line() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    for name, (_, line) in COMMANDS.items():
        assert len(line.split()) >= 4, f"registry help line for {name} is too thin"
        assert f"  {name} " in result.stdout


# ---------------------------------------------------------------------------------------------------------------
# Fixture files: a good spec, specs that are wrong in the ways users get them wrong


GOOD_SPEC = "name: sweep-job\nruntime: process\nrun: echo sweep\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    specs = {
        "good": GOOD_SPEC,
        "with_workload": GOOD_SPEC + "workload:\n  model: gpt2\n  tokens: 1B\n",
        "unknown_key": GOOD_SPEC + "bogus_key: 1\n",
        "broken": "name: [\n",
        "empty": "",
        "not_mapping": "- a\n- b\n",
    }
    paths = {}
    for key, text in specs.items():
        path = tmp_path / f"{key}.yaml"
        path.write_text(text)
        paths[key] = str(path)
    (tmp_path / "latin1.yaml").write_bytes(b"name: caf\xe9\nruntime: process\nrun: echo\n")
    paths["not_utf8"] = str(tmp_path / "latin1.yaml")
    paths["missing"] = str(tmp_path / "no-such-spec.yaml")
    (tmp_path / "bad.toml").write_text("[providers\n")
    paths["bad_config"] = str(tmp_path / "bad.toml")
    (tmp_path / "a-file").write_text("not a folder")
    paths["not_a_folder"] = str(tmp_path / "a-file")
    (tmp_path / "bad.json").write_text("{")
    paths["bad_json"] = str(tmp_path / "bad.json")
    return paths


def fill(argv: tuple[str, ...], files: dict[str, str], **extra: str) -> list[str]:
    values = {**files, **extra}
    return [a.format(**values) if "{" in a else a for a in argv]


def assert_json_only(result: Result, argv: list[str]) -> Any:
    assert result.exit_code == 0, (argv, result.stderr)
    assert "Traceback" not in result.stderr
    try:
        return json.loads(result.stdout)
    except json.JSONDecodeError as exc:  # pragma: no cover - the failure message is the point
        pytest.fail(f"gpuplan {' '.join(argv)} --json printed more than JSON ({exc}):\n{result.stdout[:500]}")


# ---------------------------------------------------------------------------------------------------------------
# (b) --json on an empty database: nothing but JSON on stdout

# Read-only data commands, on the empty database the autouse fixture gives each test; no cloud needed.
EMPTY_DB_JSON: list[tuple[str, ...]] = [
    ("runs", "--json"),
    ("setup", "gcp", "--json"),
    ("runs", "--state", "succeeded", "--json"),
    ("budget", "list", "--json"),
    ("budget", "status", "--json"),
    ("schedule", "list", "--json"),
    ("bench", "list", "--json"),
    ("calibrate", "--show", "--json"),
    ("calibrate", "--update", "--json"),
    ("report", "--json"),
    ("report", "--accuracy", "--json"),
    ("report", "--by", "cloud", "--since", "2026-01-01", "--until", "2026-02-01", "--json"),
    ("prices", "--gpu", "H100", "--limit", "3", "--json"),  # warns about stale shipped prices on stderr
    ("estimate", "--params", "1B", "--tokens", "10B", "--gpu", "H100", "--json"),
    ("estimate", "--model", "gpt2", "--tokens", "1B", "--gpu", "L4", "--mode", "inference", "--json"),
    ("plan", "--params", "1B", "--tokens", "1B", "--limit", "3", "--json"),
    ("plan", "{with_workload}", "--limit", "2", "--json"),
    ("db", "current", "--json"),
    ("db", "history", "--json"),
    ("db", "upgrade", "--json"),
    ("reconcile", "--json"),  # no runs, no --cloud: nothing to check, a note on stderr
    ("watch", "--once", "--json"),
    ("scheduler", "tick", "--at", "2026-11-23T02:00:00Z", "--json"),
    ("launch", "{good}", "--dry-run", "--json"),
    ("gpus", "--json"),
    ("gpus", "L4", "--json"),
    ("models", "--json"),
    ("status", "--json"),
    ("config", "path", "--json"),
    ("config", "show", "--all", "--json"),
    ("runs", "--since", "3d", "--project", "x", "--state", "live", "--json"),
]


@pytest.mark.parametrize("argv", EMPTY_DB_JSON, ids=lambda a: " ".join(a))
def test_json_on_empty_database(argv: tuple[str, ...], files: dict[str, str]) -> None:
    args = fill(argv, files)
    assert_json_only(run_cli(*args), args)


# Write commands in the order a user would use them; each step's --json is checked for the fields the step set.
LIFECYCLE_JSON: list[tuple[tuple[str, ...], dict[str, Any]]] = [
    (("budget", "set", "team", "--amount", "100", "--period", "month", "--cloud", "aws,local", "--json"),
     {"name": "team", "amount_usd": 100.0, "period": "month", "clouds": ["aws", "local"]}),
    (("budget", "status", "team", "--json"),
     {"name": "team", "amount_usd": 100.0, "spent_usd": 0.0, "free_usd": 100.0, "live_runs": 0}),
    (("budget", "rm", "team", "--json"), {"removed": "team"}),
    (("schedule", "add", "{good}", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--name", "nightly", "--json"),
     {"name": "nightly", "cron": "0 2 * * *", "tz": "Europe/Berlin", "paused": False, "last_fire_at": None}),
    (("schedule", "show", "nightly", "--json"), {"name": "nightly", "cron": "0 2 * * *", "fires": []}),
    (("schedule", "pause", "nightly", "--json"), {"name": "nightly", "paused": True, "next_fire_at": None}),
    (("schedule", "resume", "nightly", "--json"), {"name": "nightly", "paused": False}),
    (("schedule", "update", "nightly", "--cron", "30 3 * * 1-5", "--json"),
     {"name": "nightly", "cron": "30 3 * * 1-5", "tz": "Europe/Berlin"}),
    (("schedule", "rm", "nightly", "-y", "--json"), {"name": "nightly", "removed": True}),
    (("config", "set", "defaults.project", "nlp", "--json"), {"key": "defaults.project", "value": "nlp"}),
    (("config", "set", "defaults.project", "--unset", "--json"), {"key": "defaults.project", "value": None}),
]


def test_json_through_a_budget_and_a_schedule_lifecycle(files: dict[str, str]) -> None:
    for argv, expected in LIFECYCLE_JSON:
        args = fill(argv, files)
        out = assert_json_only(run_cli(*args), args)
        row = out[0] if isinstance(out, list) and len(out) == 1 else out  # `budget status NAME` is a list of one
        assert {key: row.get(key) for key in expected} == expected, (args, out)
    assert run_cli("budget", "list", "--json").json() == [] and run_cli("schedule", "list", "--json").json() == []


def test_json_for_a_recorded_run(files: dict[str, str]) -> None:
    """launch (as a user runs it, in a child process), then status, stop, runs and report on that run: each
    names the same run, with the same state, machines and cost."""
    launched = run_subprocess("launch", files["good"], "-y", "--json")
    run = assert_json_only(launched, ["launch"])
    run_id = run["run_id"]
    same = {"run_id": run_id, "name": "sweep-job", "provider": "local", "state": "succeeded", "exit_code": 0,
            "nodes": 1, "cost_usd": 0.0}
    assert {key: run[key] for key in same} == same
    [machine] = run["instances"]
    assert (machine["instance_id"], machine["state"]) == (f"{run_id}/node-0", "succeeded")

    status = assert_json_only(run_cli("status", run_id, "--json"), ["status"])
    assert {key: status[key] for key in same} == same and status["instances"] == run["instances"]
    kinds = [e["kind"] for e in status["events"]]
    assert kinds[0] == "created" and "launch_plan" in kinds and "launched" in kinds, kinds
    assert kinds.index("launch_plan") < kinds.index("launched")  # the plan is recorded before the machines start
    assert status["events"][0]["data"] == {"provider": "local", "instance_type": "localhost", "region": "local",
                                           "nodes": 1, "est_hours": None}
    # stopping a run that already ended changes nothing
    stopped = assert_json_only(run_cli("stop", run_id, "--json"), ["stop"])
    assert {key: stopped[key] for key in same} == same and stopped["ended_at"] == status["ended_at"]
    [listed] = assert_json_only(run_cli("runs", "--json"), ["runs"])
    assert {key: listed[key] for key in same} == same
    report = assert_json_only(run_cli("report", "--by", "run", "--json"), ["report"])
    [row] = report["rows"]
    assert (row["keys"], row["instances"], row["cost_usd"]) == ({"run": run_id}, 1, 0.0)
    assert report["total"] == {"cost_usd": 0.0, "billed_hours": row["billed_hours"], "instances": 1}
    span = dt.datetime.fromisoformat(machine["terminated_at"]) - dt.datetime.fromisoformat(machine["launched_at"])
    assert row["billed_hours"] == pytest.approx(span.total_seconds() / 3600, abs=1e-6)  # the machine's own span
    logs = run_cli("logs", run_id)
    assert logs.exit_code == 0 and "sweep" in logs.stdout.splitlines()


def test_json_for_bench(files: dict[str, str]) -> None:
    """The bench group itself is a data command: one real (tiny, CPU) PyTorch step, not saved."""
    argv = ["bench", "--model", "gpt-tiny", "--steps", "1", "--warmup", "0", "--device", "cpu", "--no-save",
            "--json"]
    out = assert_json_only(run_cli(*argv), argv)
    assert out["model_name"] == "gpt-tiny"


# Data commands with --json this sweep cannot run without a cloud, and why.
JSON_NEEDS_A_CLOUD = {
    ("catalog", "refresh"): "reads the clouds' price APIs (covered by test_refresh_aws/gcp against moto/fake)",
    ("setup", "aws"): "reads and writes IAM (covered by tests/unit/cli/test_setup_cli.py against moto)",
    ("checkpoints",): "needs a run with checkpoints in a storage (covered by tests/e2e/test_local_storage_e2e.py "
                      "and test_spot_resume_e2e.py, against moto's S3)",
}
JSON_COVERED_ELSEWHERE_HERE = {("launch",), ("status",), ("stop",), ("bench",)}


# Commands that print no data of their own, so have no --json, and why.
NO_JSON: dict[Path_, str] = {
    ("logs",): "prints the job's own log text as it was written",
    ("scheduler", "run"): "a long-running loop; what it fired is read with `schedule show --json`",
    ("completion",): "prints a shell script to be sourced, not data",
    ("exec",): "runs the user's command on the machine; its output is the command's own",
    ("ssh",): "an interactive shell on the machine",
    ("convert",): "prints a job spec (YAML) to be saved and launched, not data",
    ("scheduler", "install"): "prints a systemd unit or a crontab line to be installed, not data",
    ("ui",): "serves the dashboard; its JSON is the /api endpoints (tests/e2e/test_ui_http.py)",
}


def test_every_command_that_prints_data_has_json() -> None:
    runnable = [p for p in COMMAND_PATHS
                if not isinstance(TREE[p], click.Group) or TREE[p].invoke_without_command]
    missing = [" ".join(p) for p in runnable if not has_json(TREE[p]) and p not in NO_JSON]
    assert not missing, f"commands without --json: {missing}"
    assert all(not has_json(TREE[p]) for p in NO_JSON), "NO_JSON lists a command that has --json now"


def test_every_json_command_is_covered() -> None:
    swept = [*EMPTY_DB_JSON, *(argv for argv, _ in LIFECYCLE_JSON)]
    covered = {resolve(list(a)) for a in swept} | JSON_COVERED_ELSEWHERE_HERE
    missing = [" ".join(p) for p in COMMAND_PATHS
               if has_json(TREE[p]) and p not in covered and p not in JSON_NEEDS_A_CLOUD]
    assert not missing, f"--json commands without a JSON case in this sweep: {missing}"


# ---------------------------------------------------------------------------------------------------------------
# (c) bad input: one `error:` line, exit 2, no traceback

# (argv, a fragment the one error line must contain); env overrides go in BAD_INPUT_ENV below.
BAD_INPUT: list[tuple[tuple[str, ...], str]] = [
    # a run that does not exist
    (("status", "r-0000000000"), "no run 'r-0000000000'"),
    (("status", "nope", "--json"), "no run 'nope'"),
    (("logs", "r-0000000000"), "no run"),
    (("convert", "no-such-task.yaml"), "does not exist"),
    (("scheduler", "install", "--interval", "0"), "--interval"),
    (("checkpoints", "r-0000000000"), "no run"),
    (("logs", "nope", "--node", "-1"), "--node"),
    (("stop", "r-0000000000"), "no run"),
    (("stop", "nope", "--json"), "no run"),
    # not an IAM name / not a KMS key ARN (checked before any AWS call)
    (("setup", "aws", "--name", "no spaces"), "not an IAM role name"),
    (("setup", "aws", "--kms-key", "alias/mine", "--json"), "--kms-key must be a KMS key ARN"),
    (("setup", "gcp", "--project", "x"), "No such option"),
    # unknown names
    (("estimate", "--params", "7B", "--tokens", "1B", "--gpu", "H900"), "unknown GPU 'H900'"),
    (("estimate", "--model", "gpt-99", "--tokens", "1B", "--gpu", "H100"), "unknown model preset"),
    (("prices", "--gpu", "H900"), "unknown GPU"),
    (("gpus", "H900"), "unknown GPU 'H900'"),
    (("models", "--jsn"), "--jsn"),
    (("completion", "powershell"), "'powershell' is not one of"),
    (("exec", "r-0000000000", "--", "true"), "no run 'r-0000000000'"),
    (("ssh", "r-0000000000", "--node", "-1"), "--node"),
    (("config", "path", "--jsn"), "--jsn"),
    (("config", "show", "--jsn"), "--jsn"),
    (("config", "set", "defaults.regoins", "x"), "did you mean 'regions'"),
    (("prices", "--cloud", "azure"), "unknown cloud 'azure'"),
    (("plan", "--params", "1B", "--tokens", "1B", "--gpu", "H900"), "unknown GPU"),
    (("plan", "--params", "1B", "--tokens", "1B", "--cloud", "azure"), "unknown cloud"),
    (("runs", "--state", "sucess"), "unknown run state 'sucess'"),
    (("runs", "--since", "soon"), "--since: not a date or an age"),
    (("status", "--ended", "-1"), "--ended"),
    (("budget", "status", "nope"), "no budget named 'nope'"),
    (("budget", "rm", "nope"), "no budget named 'nope'"),
    (("budget", "set", "b", "--amount", "5", "--period", "month", "--cloud", "awz"), "unknown cloud 'awz'"),
    (("budget", "set", "b", "--amount", "5", "--period", "fortnight"), "--period"),
    (("schedule", "show", "nope"), "no schedule named 'nope'"),
    (("schedule", "pause", "nope"), "no schedule named"),
    (("schedule", "resume", "nope"), "no schedule named"),
    (("schedule", "rm", "nope", "-y"), "no schedule named"),
    (("schedule", "update", "nope", "--cron", "0 * * * *"), "no schedule named"),
    (("schedule", "add", "{good}", "--cron", "0 * * * *", "--tz", "Mars/Olympus"), "unknown time zone"),
    (("report", "--by", "planet"), "unknown grouping 'planet'"),
    (("reconcile", "--cloud", "azure"), "unknown provider 'azure'"),
    (("catalog", "refresh", "--cloud", "azure"), "--cloud"),
    (("launch", "{good}", "--provider", "azure", "-y"), "unknown provider 'azure'"),
    (("bench", "--on", "azure"), "unknown provider 'azure'"),
    (("bench", "--model", "gpt-99"), "unknown model preset"),
    (("bench", "--device", "tpu"), "--device"),
    # malformed values
    (("estimate", "--params", "seven", "--tokens", "1B", "--gpu", "H100"), "--params"),
    (("estimate", "--params", "7B", "--tokens", "-1B", "--gpu", "H100"), "--tokens"),
    (("estimate", "--params", "7B", "--tokens", "1B", "--gpu", "H100", "--mfu", "2"), "--mfu"),
    (("estimate", "--params", "7B", "--tokens", "1B", "--gpu", "H100", "--gpus", "0"), "--gpus"),
    (("prices", "--max-price", "-1"), "--max-price"),
    (("prices", "--limit", "-1"), "--limit"),
    (("plan", "--params", "1B", "--tokens", "1B", "--deadline", "soon"), "--deadline"),
    (("plan", "--params", "1B", "--tokens", "1B", "--budget", "-5"), "--budget"),
    (("plan", "--params", "1B", "--tokens", "1B", "--interruption-rate", "11"), "--interruption-rate"),
    (("budget", "set", "b", "--amount", "-5", "--period", "month"), "positive number of dollars"),
    (("budget", "set", "b", "--amount", "lots", "--period", "month"), "not a number of dollars"),
    (("budget", "set", "b", "--amount", "nan", "--period", "month"), "positive number"),
    (("budget", "set", "b", "--amount", "5"), "Choose from: month, week, total"),
    (("budget", "set", "b", "--amount", "5", "--period", "month", "--project", ""), "--project"),
    (("schedule", "add", "{good}", "--cron", "every night"), "cron expression 'every night'"),
    (("schedule", "add", "{good}", "--cron", "61 * * * *"), "invalid cron expression"),
    (("schedule", "show", "nope", "--fires", "-1"), "--fires"),
    (("scheduler", "tick", "--at", "tomorrow"), "--at"),
    (("scheduler", "run", "--once", "--interval", "0"), "--interval"),
    (("report", "--since", "yesterday"), "--since"),
    (("report", "--until", "2026-13-01"), "--until"),
    (("report", "--now", "noon"), "--now"),
    (("runs", "--limit", "0"), "--limit"),
    (("bench", "list", "--limit", "-1"), "--limit"),
    (("bench", "--steps", "0"), "--steps"),
    (("watch", "--once", "--interval", "0"), "--interval"),
    (("logs", "r-0000000000", "--node", "x"), "--node"),
    # contradictory flags
    (("estimate", "--params", "7B", "--model", "gpt2", "--tokens", "1B", "--gpu", "H100"), "not --params and"),
    (("estimate", "--params", "7B", "--tokens", "1B", "--samples", "10", "--gpu", "H100"), "not both"),
    (("plan", "{good}", "--params", "1B"), "not both"),
    (("report", "--since", "2026-02-01", "--until", "2026-01-01"), "before --until"),
    (("report", "--format", "csv", "--json"), "not both"),
    # files: missing, malformed, unknown keys, not UTF-8
    (("launch", "{missing}", "-y"), "does not exist"),
    (("launch", "{unknown_key}", "-y"), "unknown key 'bogus_key'"),
    (("launch", "{broken}", "-y"), "not valid YAML"),
    (("launch", "{empty}", "--dry-run"), "empty"),
    (("launch", "{not_mapping}", "--dry-run"), "mapping"),
    (("launch", "{not_utf8}", "--dry-run"), "cannot read"),
    (("plan", "{missing}"), "does not exist"),
    (("plan", "{unknown_key}"), "unknown key"),
    (("schedule", "add", "{missing}", "--cron", "0 * * * *"), "cannot read"),
    (("schedule", "add", "{unknown_key}", "--cron", "0 * * * *"), "unknown key"),
    (("schedule", "add", "{not_utf8}", "--cron", "0 * * * *"), "not UTF-8"),
    (("estimate", "--model-config", "{missing}", "--tokens", "1B", "--gpu", "H100"), "does not exist"),
    (("estimate", "--model-config", "{bad_json}", "--tokens", "1B", "--gpu", "H100"), "not valid JSON"),
    (("bench", "--model-config", "{missing}"), "does not exist"),
    (("bench", "--model", "gpt-tiny", "--output", "{not_a_folder}/bench.json"), "--output"),
    (("report", "--plot", "{not_a_folder}/spend.png"), "cannot write"),
    # a malformed database URL, for commands that take no other input
    (("--db", "not a url", "db", "current"), "not a database URL"),
    (("--db", "postgresql://u@localhost:port/x", "runs"), "not a database URL"),
    (("db", "history", "--limit", "3"), "No such option"),  # it reads the migration scripts, not the database
    (("--db", "postgresql://u@[::1/x", "db", "upgrade"), "not a database URL"),
    (("--db", "nosuchdb+driver://x/y", "runs"), "no database driver"),
    (("--db", "sqlite:///{not_a_folder}", "db", "current"), "is not a database"),
    (("--db", "sqlite:///{not_a_folder}", "report"), "is not a database"),
    (("--db", "not a url", "calibrate", "--show"), "not a database URL"),
    (("--db", "not a url", "budget", "list"), "not a database URL"),
    (("--db", "not a url", "schedule", "list"), "not a database URL"),
    (("--db", "not a url", "bench", "list"), "not a database URL"),
    # a malformed config file at $GPUPLAN_CONFIG (env set in the test)
    (("launch", "{good}", "-y"), "config file"),
    (("reconcile", "--cloud", "aws"), "config file"),
    (("launch", "{good}", "--dry-run"), "does not exist"),  # $GPUPLAN_CONFIG names a file that is not there
    # unknown commands and options
    (("lanch",), "No such command"),
    (("budget", "sett"), "No such command"),
    (("runs", "--jsn"), "--jsn"),
    (("ui", "--no-browser", "--token", "short"), "--token"),
    (("ui", "--port", "70000"), "--port"),
    (("--db", "not a url", "ui", "--no-browser"), "not a database URL"),
]
# Cases that run with $GPUPLAN_CONFIG pointing at a malformed TOML file, or at no file at all.
CASE_CONFIG = {("launch", "{good}", "-y"): "bad_config", ("reconcile", "--cloud", "aws"): "bad_config",
               ("launch", "{good}", "--dry-run"): "missing"}


def assert_one_error_line(result: Result, argv: list[str], fragment: str) -> None:
    where = f"gpuplan {' '.join(argv)}"
    assert "Traceback" not in result.stderr, f"{where} leaked a traceback:\n{result.stderr}"
    assert result.exit_code == 2, f"{where}: exit {result.exit_code}, stderr {result.stderr!r}"
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), f"{where}: stderr {result.stderr!r}"
    assert fragment in lines[0], f"{where}: {lines[0]!r} does not say {fragment!r}"
    assert result.stdout == "", f"{where} printed on stdout: {result.stdout!r}"


@pytest.mark.parametrize("argv,fragment", BAD_INPUT, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_bad_input_is_one_line_exit_2(argv: tuple[str, ...], fragment: str, files: dict[str, str]) -> None:
    env = {"GPUPLAN_CONFIG": files[CASE_CONFIG[argv]]} if argv in CASE_CONFIG else None
    args = fill(argv, files)
    assert_one_error_line(run_cli(*args, env=env), args, fragment)


# Commands whose only input is the global --db (covered by the malformed URL cases) are still in the table;
# these few take no user input a sweep could get wrong without a cloud.
NO_BAD_INPUT_CASE: dict[Path_, str] = {}


def test_every_command_has_a_bad_input_case() -> None:
    covered = {resolve(list(argv)) for argv, _ in BAD_INPUT}
    groups_only = {p for p in COMMAND_PATHS if isinstance(TREE[p], click.Group) and not TREE[p].invoke_without_command}
    missing = [" ".join(p) for p in COMMAND_PATHS
               if p not in covered and p not in groups_only and p not in NO_BAD_INPUT_CASE]
    assert not missing, f"commands without a bad-input case in this sweep: {missing}"


GROUPS = [p for p in TREE if isinstance(TREE[p], click.Group) and not TREE[p].invoke_without_command]


@pytest.mark.skipif(not hasattr(click.exceptions, "NoArgsIsHelpError"), reason="Click < 8.2 prints the help")
@pytest.mark.parametrize("path", GROUPS, ids=lambda p: " ".join(p) or "gpuplan")
def test_a_bare_group_names_its_commands(path: Path_) -> None:
    result = run_cli(*path)
    names = ", ".join(TREE[path].list_commands(click.Context(TREE[path])))
    assert_one_error_line(result, list(path), f"missing command: one of {names}")


SUBPROCESS_CASES: list[tuple[tuple[str, ...], str]] = [
    (("status", "r-0000000000"), "no run"),
    (("launch", "{unknown_key}", "-y"), "unknown key"),
    (("--db", "postgresql://u@localhost:port/x", "runs"), "not a database URL"),
    (("budget",), "missing command: one of list, rm, set, status"),
    (("schedule", "add", "{not_utf8}", "--cron", "0 * * * *"), "not UTF-8"),
    (("budget", "set", "b", "--amount", "-5", "--period", "month"), "positive number"),
]


@pytest.mark.parametrize("argv,fragment", SUBPROCESS_CASES, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_bad_input_in_a_real_process(argv: tuple[str, ...], fragment: str, files: dict[str, str]) -> None:
    """As the user's shell sees it: nothing past Click's handling may print a traceback."""
    args = fill(argv, files)
    assert_one_error_line(run_subprocess(*args, timeout=60), args, fragment)


# ---------------------------------------------------------------------------------------------------------------
# (d) bad input never changes the database


def dump_database() -> dict[str, list[tuple[str, ...]]]:
    """Every row of every table, as sorted tuples of reprs (stable across SQLite's row order)."""
    from sqlalchemy import MetaData, create_engine, select

    engine = create_engine(os.environ["GPUPLAN_DB"])
    try:
        meta = MetaData()
        meta.reflect(engine)
        with engine.connect() as conn:
            return {name: sorted(tuple(repr(v) for v in row) for row in conn.execute(select(table)))
                    for name, table in meta.tables.items()}
    finally:
        engine.dispose()


BAD_WRITES: list[tuple[str, ...]] = [
    ("budget", "set", "cap", "--amount", "-5", "--period", "month"),
    ("budget", "set", "cap", "--amount", "lots", "--period", "week"),
    ("budget", "set", "cap", "--amount", "50", "--period", "month", "--cloud", "awz"),
    ("budget", "set", "cap", "--amount", "50", "--period", "month", "--project", " "),
    ("budget", "rm", "nope"),
    ("schedule", "add", "{good}", "--cron", "bad cron", "--name", "other"),
    ("schedule", "add", "{good}", "--cron", "0 2 * * *", "--name", "nightly"),
    ("schedule", "update", "nightly", "--cron", "61 * * * *"),
    ("schedule", "update", "nightly", "--tz", "Mars/Olympus"),
    ("schedule", "update", "nightly", "{unknown_key}"),
    ("schedule", "rm", "nope", "-y"),
    ("schedule", "pause", "nope"),
    ("launch", "{unknown_key}", "-y"),
    ("launch", "{broken}", "-y"),
    ("launch", "{good}", "-y", "--provider", "azure"),
    ("stop", "r-0000000000"),
    ("stop", "{run_id}x"),
    ("scheduler", "tick", "--at", "tomorrow"),
    ("reconcile", "--cloud", "azure", "--terminate", "-y"),
    ("db", "upgrade", "--jsn"),
]


@pytest.fixture
def seeded(files: dict[str, str]) -> Iterator[dict[str, str]]:
    """A database with a budget, a schedule and one finished run (launched as a user would)."""
    for argv in (("budget", "set", "cap", "--amount", "100", "--period", "month"),
                 ("schedule", "add", files["good"], "--cron", "0 2 * * *", "--name", "nightly")):
        assert run_cli(*argv).exit_code == 0
    launched = run_subprocess("launch", files["good"], "-y", "--json")
    assert launched.exit_code == 0, launched.stderr
    yield {**files, "run_id": launched.json()["run_id"]}


def test_bad_input_never_changes_the_database(seeded: dict[str, str]) -> None:
    before = dump_database()
    assert before["runs"] and before["budgets"] and before["schedules"]
    for argv in BAD_WRITES:
        args = fill(argv, seeded)
        result = run_cli(*args)
        assert result.exit_code == 2 and "Traceback" not in result.stderr, (args, result.stderr)
        assert dump_database() == before, f"gpuplan {' '.join(args)} changed the database"
    result = run_cli("launch", seeded["good"], "-y", env={"GPUPLAN_CONFIG": seeded["bad_config"]})
    assert result.exit_code == 2
    assert dump_database() == before, "a launch refused for a malformed config file left rows behind"


# ---------------------------------------------------------------------------------------------------------------
# (e) an unexpected exception: one line, a hint about -v, exit 1; -v shows the traceback


def test_unexpected_exception_is_one_line_with_a_hint(capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The real LazyGroup.main error mapping, on a group with one command that fails the way a bug would."""
    @click.command("boom")
    def boom() -> None:
        """Fail like a bug in a command would."""
        raise RuntimeError("the disk caught fire")

    group = LazyGroup(name="gpuplan", commands={"boom": boom})
    with pytest.raises(SystemExit) as exited:
        group.main(["boom"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.strip().splitlines() == [
        "error: unexpected RuntimeError: the disk caught fire (a bug in gpuplan: run with -v for the traceback)"]

    monkeypatch.setenv("GPUPLAN_DEBUG", "1")
    with pytest.raises(SystemExit):
        group.main(["boom"])
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: unexpected RuntimeError")



def test_db_current_calls_a_newer_revision_unknown(tmp_path: Path) -> None:
    """A database from a newer gpuplan is refused by every command (exit 1, nothing touched), and `db current`
    says it is unknown rather than telling the user the database is behind."""
    from sqlalchemy import create_engine, text

    url = f"sqlite:///{tmp_path / 'newer.db'}"
    assert run_cli("--db", url, "db", "upgrade").exit_code == 0
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '0099_future'"))
    engine.dispose()
    current = run_cli("--db", url, "db", "current")
    assert current.exit_code == 0
    assert "unknown to this gpuplan" in current.stdout and "behind" not in current.stdout
    refused = run_cli("--db", url, "budget", "set", "x", "--amount", "5", "--period", "month")
    assert refused.exit_code == 1 and "newer version" in refused.stderr
    assert run_cli("--db", url, "db", "current", "--json").json()["revision"] == "0099_future"
