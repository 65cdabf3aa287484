"""The generated references cover the code: every command, subcommand and option of the CLI, every field of
the job spec, every config setting, and every error class (which the troubleshooting page must also explain)."""

from __future__ import annotations

import re
from pathlib import Path

import cli_reference
import click
import config_reference
import error_reference
import spec_reference

REPO = Path(__file__).resolve().parents[2]


def test_every_command_and_option_is_in_the_cli_reference() -> None:
    """The reference's walk against the suite's own (tests/support/clitree.py, which the CLI sweep uses)."""
    from support.clitree import command_tree

    page = cli_reference.render_cli_reference()
    entries = list(cli_reference.walk_commands())
    visible = {path for path, cmd in command_tree().items() if not cmd.hidden}
    assert {e.path[1:] for e in entries} == visible
    assert any(len(e.path) == 3 for e in entries)  # the subcommands (budget set, db upgrade, ...) are walked too
    for entry in entries:
        assert f"## `{entry.name}` {{ #{entry.anchor} }}" in page, entry.name
        for param in entry.command.get_params(entry.context):
            if isinstance(param, click.Option) and not param.hidden:
                for opt in [*param.opts, *param.secondary_opts]:
                    assert f"`{opt}`" in _section(page, entry), f"{entry.name} {opt}"


def _section(page: str, entry: cli_reference.CommandEntry) -> str:
    start = page.index(f"{{ #{entry.anchor} }}")
    following = re.search(r"^#{2,4} `", page[start + 1:], re.MULTILINE)
    return page[start:start + 1 + following.start()] if following else page[start:]


def test_every_job_spec_field_is_in_the_spec_reference() -> None:
    from gpuplan.jobs.spec import JobSpec

    page = spec_reference.render_spec_reference()
    paths = [f.path for f in spec_reference.walk_fields()]
    for name, info in JobSpec.model_fields.items():
        assert (info.alias or name) in paths
    for path in paths:  # a field in its section's table, or a section as a heading of its own
        assert f"| `{path}` |" in page or f"## `{path}`" in page, path
    assert "| `name` | string | required |" in page


def test_every_config_setting_and_provider_is_in_the_config_reference() -> None:
    from gpuplan.config import DEFAULTS
    from gpuplan.providers.registry import load_provider_class, provider_names, setting_names

    page = config_reference.render_config_reference()
    for key in DEFAULTS:
        assert f"| `{key}` |" in page
    for name in provider_names():
        assert f"## `[providers.{name}]`" in page
        for setting in setting_names(load_provider_class(name)):
            assert f"| `{setting}` |" in page, f"{name}.{setting}"


def test_every_error_class_is_in_the_reference_and_explained_in_troubleshooting() -> None:
    errors = error_reference.error_classes()
    names = {e.name for e in errors}
    assert {"UserError", "NotFoundError", "SpecError", "CapacityError", "QuotaError", "AuthError"} <= names
    page = error_reference.render_error_reference()
    troubleshooting = (REPO / "docs" / "troubleshooting.md").read_text()
    missing = [e.name for e in errors if f"`{e.name}`" not in troubleshooting]
    assert not missing, f"docs/troubleshooting.md does not say what to do about: {', '.join(missing)}"
    for err in errors:
        assert f"| `{err.name}` | {err.exit_code} |" in page


def test_every_job_spec_field_says_what_it_is_for() -> None:
    """Each field's line comes from jobs/spec_fields.py (or its own Field description); a new field without one,
    or a line for a field that no longer exists, fails here with the name to fix."""
    from gpuplan.jobs.spec_fields import FIELD_DOCS

    schema = spec_reference.job_spec_schema()
    models = {"JobSpec": schema, **schema["$defs"]}
    undescribed = [f"{model}.{name}" for model, sub in models.items() if "properties" in sub
                   for name, prop in sub["properties"].items() if not prop.get("description")]
    assert not undescribed, f"add a line for these to FIELD_DOCS in jobs/spec_fields.py: {undescribed}"
    stale = [f"{model}.{name}" for model, names in FIELD_DOCS.items() for name in names
             if name not in models.get(model, {}).get("properties", {})]
    assert not stale, f"FIELD_DOCS in jobs/spec_fields.py describes fields that do not exist: {stale}"
