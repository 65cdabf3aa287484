"""The job spec: what is accepted, and that every rejection names the YAML line."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.spec import JobSpec, SpecError, load_spec, parse_spec

ROOT = Path(__file__).resolve().parents[3]


def test_minimal_cpu_job() -> None:
    spec = parse_spec("name: hello\nruntime: process\ncommand: echo hi\n")
    assert spec.name == "hello"
    assert spec.argv == ["/bin/sh", "-c", "echo hi"]
    assert spec.resources.nodes == 1 and spec.resources.gpu is None and spec.resources.total_gpus == 0
    assert not spec.wants_container()


def test_full_spec_with_sizes_durations_and_money() -> None:
    spec = parse_spec(
        """
name: llama
image: localhost/train:1
run: |
  python train.py --lr 3e-4
  echo done
env: {PORT: 8080, DEBUG: true, MODE: fast}
secrets: [HF_TOKEN, WANDB_API_KEY]
resources:
  gpu: H100:8
  nodes: 2
  spot: true
  clouds: aws, gcp
  regions: [us-*]
  max_price_per_hour: "$40"
workload:
  model: llama-2-7b
  tokens: 2T
  seq_len: 4096
  precision: bf16
limits:
  budget_usd: 5000
  max_hours: 90m
  deadline: 2030-01-01T12:00:00Z
checkpoint: {dir: /ckpt, interval: 30m}
schedule: {cron: "0 2 * * *", tz: Europe/Berlin, window: "22:00-06:00", spot_only: true}
project: research
labels: {team: nlp}
"""
    )
    assert spec.resources.gpu == "H100" and spec.resources.gpus_per_node == 8 and spec.resources.total_gpus == 16
    assert spec.resources.clouds == ["aws", "gcp"]
    assert spec.resources.max_price_per_hour == Decimal("40")
    assert spec.workload is not None and spec.workload.tokens == 2 * 10**12
    assert spec.limits.max_hours == 1.5 and spec.limits.budget_usd == Decimal(5000)
    assert spec.limits.deadline == dt.datetime(2030, 1, 1, 12, tzinfo=dt.timezone.utc)
    assert spec.checkpoint is not None and spec.checkpoint.interval == 0.5
    assert spec.env == {"PORT": "8080", "DEBUG": "1", "MODE": "fast"}
    assert spec.shell_script.startswith("set -e\npython train.py")
    assert spec.wants_container()


@pytest.mark.parametrize(("value", "expected"), [("7B", 7 * 10**9), ("1.3e9", 1_300_000_000), ("125M", 125 * 10**6),
                                                 (350_000_000, 350_000_000)])
def test_sizes(value: object, expected: int) -> None:
    spec = parse_spec(f"name: x\ncommand: a\nworkload:\n  params: {value}\n  tokens: 2T\n")
    assert spec.workload is not None and spec.workload.params == expected


def test_deadline_relative_to_launch() -> None:
    spec = parse_spec("name: x\ncommand: a\nlimits: {deadline: 48h}\n")
    start = dt.datetime(2025, 1, 1, tzinfo=dt.timezone.utc)
    assert spec.limits.deadline_at(start) == start + dt.timedelta(hours=48)


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("name: x\ncommand: a\nresources:\n  gpu: A100\n  max_hour: 3\n", 5, "unknown key 'max_hour'"),
        ("name: x\ncommand: a\nlimts:\n  max_hours: 1\n", 3, "did you mean limits"),
        ("name: x\ncommand: a\nworkload:\n  params: 7Q\n", 4, "7B, 1.3e9"),
        ("name: x\ncommand: a\nresources:\n  nodes: 0\n", 4, "between 1 and 1,024 nodes"),
        ("name: x\ncommand: a\nenv:\n  A: 1\n  1B: x\n", 5, "not a valid environment variable"),
        ("name: x\ncommand: a\nsecrets:\n  - OK\n  - GPUPLAN_X\n", 5, "reserved prefix"),
        ("name: x\ncommand: a\nname: y\n", 3, "given twice"),
        ("name: [x\n", 2, "not valid YAML"),
        ("name: x\ncommand: a\nschedule:\n  cron: nope\n", 4, "cron"),
        ("name: x\ncommand: a\nworkload: {model: gpt3}\n", 3, "unknown model preset"),
        ("name: x\ncommand: a\nlimits:\n  budget_usd: -5\n", 4, "greater than zero"),
        ("name: x\nruntime: podman\ncommand: a\n", 1, "needs an image"),
        ("name: x\n", 1, "exactly one of command"),
        ("command: a\n", 1, "name: required"),
        ("name: x\nruntime: process\ncommand: true\n", 3, "command: must be a string or a list of strings"),
        ("name: x\ncommand: a\nresources:\n  nodes: 2\n  gpu: H100:-1\n", 5, "resources.gpu: gpu 'H100:-1': the "
         "count after ':' must be a whole number of GPUs per node, 1 or more"),
        ("name: x\ncommand: a\nresources:\n  gpu: H100:0\n", 4, "must be a whole number of GPUs per node"),
        ("name: x\ncommand: a\nresources:\n  gpu: H100\n  gpus_per_node: 0\n", 5, "needs at least 1 GPU per node"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  throughput: .inf\n", 6,
         "workload.throughput: Input should be a finite number"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  mfu: .nan\n", 6, "finite number"),
        ("name: x\ncommand: a\nworkload:\n  params: .inf\n", 4, "workload.params: size must be a finite number"),
        ("name: x\ncommand: a\nlimits:\n  max_hours: .inf\n", 4, "must be a finite number"),
        ("name: x\ncommand: a\nlimits:\n  budget_usd: 1e300\n", 4, "less than $10,000,000,000"),
        ("name: x\ncommand: a\nschedule:\n  cron: 0 0 30 2 *\n", 4, "never fires"),
        ("name: x\ncommand: a\nworkload:\n  params: " + "9" * 400 + "\n", 4, "size must be a finite number"),
        ("name: x\ncommand: a\nlimits:\n  max_hours: " + "9" * 400 + "\n", 4, "must be a finite number"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  tp: 0\n", 6, "workload.tp"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  pp: 5000\n", 6, "workload.pp"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  recompute: some\n", 6,
         "workload.recompute"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  tp_overlap: true\n", 3,
         "tp_overlap needs tp of 2 or more"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  dp_overlap: true\n", 3,
         "dp_overlap is the sharded optimizer's parameter all-gather: it needs sharding zero1 or zero2"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  interconnect: fast\n", 6,
         "interconnect 'fast': give one of ib-ndr"),
        ("name: x\ncommand: a\nworkload:\n  params: 7B\n  tokens: 1B\n  recompute: selective\n"
         "  activation_checkpointing: true\n", 3, "activation_checkpointing means recompute full"),
    ],
)
def test_errors_name_the_line(text: str, line: int, fragment: str) -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(text, source="job.yaml")
    message = str(info.value)
    assert message.startswith(f"job.yaml:{line}: "), message
    assert fragment in message, message
    assert "\n" not in message


def test_bad_gpu_count_and_infinite_throughput_are_exit_2_through_the_cli(tmp_path: Path) -> None:
    from support.clihelp import run_cli

    for body, line in (("resources:\n  gpu: H100:-1\n", 5), ("workload:\n  params: 7B\n  tokens: 1B\n"
                                                             "  throughput: .inf\n", 7)):
        spec = tmp_path / "job.yaml"
        spec.write_text(f"name: x\nruntime: process\ncommand: 'true'\n{body}")
        for command in (["launch", "--dry-run"], ["plan"]):
            result = run_cli(*command, str(spec))
            assert result.exit_code == 2, (command, result.stderr)
            assert result.stderr.startswith(f"error: {spec}:{line}: ") and result.stderr.count("\n") == 1


def test_missing_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "nope.yaml")


def test_examples_are_valid() -> None:
    examples = sorted((ROOT / "examples").glob("*.yaml"))
    assert examples, "examples/ holds job specs"
    for path in examples:
        assert isinstance(load_spec(path), JobSpec)


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_spec_works_with_the_cli(path: Path, request: pytest.FixtureRequest,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Each example dry-runs where it says it runs, plans when it has a workload, and schedules when it has a
    schedule section: an example that only parses can still be one no command accepts. An AWS example dry-runs
    against moto on 127.0.0.1 with the instance profile its secrets need (the launch checks it exists)."""
    from support.clihelp import run_cli

    spec = load_spec(path)
    clouds = list(spec.resources.clouds)
    provider = clouds[0] if len(clouds) == 1 else "local"
    if provider == "aws":
        import boto3

        from support.awsmoto import create_instance_profile

        request.getfixturevalue("moto_server")
        monkeypatch.setenv("GPUPLAN_AWS_INSTANCE_PROFILE", create_instance_profile(boto3.client("iam")))
    dry = run_cli("launch", str(path), "--provider", provider, "--dry-run", "--json")
    assert dry.exit_code == 0, dry.stderr
    assert dry.json()["nodes"] == spec.resources.nodes
    if provider == "aws":  # which machine image, for which architecture (item 6 of issue 20)
        assert dry.json()["machine"]["architecture"] == "x86_64" and dry.json()["instance_profile"]
    if spec.workload is not None and spec.resources.gpu:
        planned = run_cli("plan", str(path), "--json")
        assert planned.exit_code == 0 and planned.json(), planned.stderr
        est = dry.json()["est_cost_usd"]
        if spec.limits.budget_usd is not None:  # an example that cannot fit its own budget teaches nothing
            assert est is not None and Decimal(str(est)) <= spec.limits.budget_usd
    if spec.schedule is not None:
        added = run_cli("schedule", "add", str(path), "--json")
        assert added.exit_code == 0, added.stderr
        assert added.json()["cron"] == spec.schedule.cron


def test_example_scripts_compile() -> None:
    scripts = sorted((ROOT / "examples").glob("*.py"))
    assert scripts
    for script in scripts:
        compile(script.read_text(), str(script), "exec")  # a SyntaxError fails the test
