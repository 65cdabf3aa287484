"""The config file through the CLI: `config path|show|set`, and every command refusing a typo'd file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuplan.cli.config_edit import edit_text
from gpuplan.config import default_setting, load_config

from support.clihelp import run_cli, run_subprocess


def config_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "gpuplan" / "config.toml"


def test_path_is_the_xdg_file_and_set_creates_it() -> None:
    out = run_cli("config", "path", "--json")
    assert out.json() == {"path": str(config_file()), "exists": False}
    assert run_cli("config", "set", "defaults.provider", "aws").exit_code == 0
    assert run_cli("config", "set", "defaults.clouds", "aws, gcp").exit_code == 0
    assert run_cli("config", "set", "defaults.budget", "250").exit_code == 0
    assert run_cli("config", "set", "defaults.regions", '["us-*", "europe-west4"]').exit_code == 0
    out = run_cli("config", "set", "providers.aws.bucket", "my-runs", "--json")
    assert out.exit_code == 0, out.stderr
    assert out.json()["value"] == "my-runs"
    assert run_cli("config", "set", "providers.slurm.command_timeout", "30").exit_code == 0
    data = load_config()
    assert data["defaults"] == {"provider": "aws", "clouds": ["aws", "gcp"], "budget": 250,
                                "regions": ["us-*", "europe-west4"]}
    assert data["providers"] == {"aws": {"bucket": "my-runs"}, "slurm": {"command_timeout": 30}}
    assert default_setting("clouds") == ["aws", "gcp"] and default_setting("storage") is None
    shown = run_cli("config", "show")
    assert 'defaults.provider = "aws"' in shown.stdout and 'providers.aws.bucket = "my-runs"' in shown.stdout
    assert run_cli("config", "show", "--json").json()["defaults"]["budget"] == 250


def test_set_keeps_comments_and_order_and_unset_removes() -> None:
    path = config_file()
    path.parent.mkdir(parents=True)
    path.write_text("# my settings\n[defaults]\nproject = \"nlp\"  # the team\n\n[providers.gcp]\n"
                    "project = \"p\"\n")
    assert run_cli("config", "set", "defaults.project", "vision").exit_code == 0
    assert run_cli("config", "set", "defaults.storage", "gs://my-runs/runs").exit_code == 0
    text = path.read_text()
    assert text.startswith("# my settings\n[defaults]\nproject = \"vision\"\nstorage = \"gs://my-runs/runs\"\n\n"
                           "[providers.gcp]")
    assert run_cli("config", "set", "defaults.project", "--unset").exit_code == 0
    assert "project" not in load_config()["defaults"] and load_config()["providers"]["gcp"]["project"] == "p"


@pytest.mark.parametrize("args,needle", [
    (("defaults.regoins", "us-*"), "unknown setting 'regoins' in [defaults]; did you mean 'regions'?"),
    (("provider.aws.bucket", "x"), "did you mean 'providers'?"),
    (("providers.awz.bucket", "x"), "[providers.awz] names no provider; did you mean 'aws'?"),
    (("providers.aws.buckett", "x"), "[providers.aws] has no setting 'buckett'; did you mean 'bucket'?"),
    (("defaults.budget", "-5"), "budget must be a positive number of USD"),
    (("defaults.budget", "lots"), "'lots' is not a number of USD"),
    (("defaults.provider",), "give a VALUE, or --unset"),
    (("defaults",), "give a VALUE"),
])
def test_set_refuses_typos_in_one_line_and_writes_nothing(args: tuple[str, ...], needle: str) -> None:
    out = run_cli("config", "set", *args)
    assert out.exit_code == 2 and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1 and needle in out.stderr, out.stderr
    assert not config_file().exists()


@pytest.mark.parametrize("text,needle", [
    ('[provider.aws]\nbucket = "x"\n', "unknown section [provider.aws]; did you mean [providers.aws]?"),
    ('[defaluts]\nbudget = 5\n', "unknown section [defaluts]; did you mean [defaults]?"),
    ("budget = 5\n", "budget = ... belongs under [defaults]"),
    ('[defaults]\nregoins = ["us-*"]\n', "unknown setting 'regoins' in [defaults]; did you mean 'regions'?"),
    ("[defaults]\nbudget = -5\n", "[defaults] budget must be a positive number of USD, not -5"),
    ("[defaults]\nclouds = 3\n", "[defaults] clouds must be a list of names"),
    ('[providers.aws]\nbuckett = "x"\n', "[providers.aws] has no setting 'buckett'; did you mean 'bucket'?"),
    ('[providers.awz]\nbucket = "x"\n', "[providers.awz] names no provider; did you mean 'aws'?"),
])
def test_a_typo_in_the_file_is_one_line_exit_2(text: str, needle: str) -> None:
    path = config_file()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    shown = run_cli("config", "show")
    assert shown.exit_code == 2 and needle in shown.stderr and len(shown.stderr.strip().splitlines()) == 1
    assert run_cli("config", "path").exit_code == 0  # the file can still be found to fix it


@pytest.mark.parametrize("text", ['[provider.aws]\nbucket = "x"\n', "[defaults]\nbudgett = 5\n",
                                  '[providers.awz]\nbucket = "x"\n'])
def test_every_command_checks_the_file_first(text: str) -> None:
    path = config_file()
    path.parent.mkdir(parents=True)
    path.write_text(text)
    for args in (("runs",), ("estimate", "--model", "gpt2", "--tokens", "1B", "--gpu", "H100")):
        out = run_subprocess(*args, timeout=60)
        assert out.exit_code == 2 and out.stdout == "", out
        assert out.stderr.startswith(f"error: config file {path}: ") and len(out.stderr.splitlines()) == 1


def test_a_provider_typo_reaches_the_user_before_the_constructor(tmp_path: Path) -> None:
    path = config_file()
    path.parent.mkdir(parents=True)
    path.write_text('[providers.local]\nprice_per_hr = "1.5"\n')
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\nruntime: process\nrun: echo hi\n")
    out = run_cli("launch", str(spec), "--dry-run")
    assert out.exit_code == 2 and "unexpected keyword" not in out.stderr
    assert "[providers.local] has no setting 'price_per_hr'; did you mean 'price_per_hour'?" in out.stderr


def test_edit_text_appends_a_missing_table_and_replaces_in_place() -> None:
    assert edit_text("", "defaults", "provider", "aws") == '[defaults]\nprovider = "aws"\n'
    assert edit_text('[defaults]\nprovider = "gcp"\n', "defaults", "provider", "aws") == \
        '[defaults]\nprovider = "aws"\n'
    assert edit_text("[defaults]\n", "providers.aws", "bucket", "b") == '[defaults]\n\n[providers.aws]\nbucket = "b"\n'


def test_defaults_fill_what_the_spec_leaves_out(tmp_path: Path) -> None:
    for key, value in (("clouds", "gcp"), ("regions", "europe-*,eu-*"), ("project", "vision"), ("budget", "12.5")):
        assert run_cli("config", "set", f"defaults.{key}", value).exit_code == 0
    planned = run_cli("plan", "--model", "gpt2", "--tokens", "1B", "--limit", "0", "--json")
    assert planned.exit_code == 0, planned.stderr
    assert {(o["cloud"], o["region"].split("-")[0]) for o in planned.json()} == {("gcp", "europe")}
    flagged = run_cli("plan", "--model", "gpt2", "--tokens", "1B", "--cloud", "aws", "--limit", "3", "--json")
    assert {(o["cloud"], o["region"][:3]) for o in flagged.json()} == {("aws", "eu-")}  # a flag wins
    spec = tmp_path / "job.yaml"
    spec.write_text("name: j\nruntime: process\nrun: echo hi\n")
    # defaults.clouds = gcp sends the launch to GCP (issue 23: the clouds choose the provider), and says why; then
    # the local provider is named so the test checks the project and budget defaults alone.
    to_gcp = run_subprocess("launch", str(spec), "--dry-run")
    assert f"provider: gcp ([defaults] clouds in {config_file()} names gcp)" in to_gcp.stderr
    launched = run_subprocess("launch", str(spec), "--provider", "local", "-y", "--json")
    assert launched.exit_code == 0, launched.stderr
    assert (launched.json()["project"], launched.json()["budget_usd"]) == ("vision", 12.5)
    spec.write_text("name: j\nruntime: process\nrun: echo hi\nproject: nlp\nlimits: {budget_usd: 3}\n")
    own = run_subprocess("launch", str(spec), "--provider", "local", "-y", "--json").json()
    assert (own["project"], own["budget_usd"]) == ("nlp", 3)  # the spec's own values win
