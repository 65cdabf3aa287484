"""The user's gpuplan configuration file: defaults for every command and per-provider settings.

`$GPUPLAN_CONFIG`, else `$XDG_CONFIG_HOME/gpuplan/config.toml`, else `~/.config/gpuplan/config.toml`:

    [defaults]
    provider = "aws"                # where `launch` runs without --provider
    clouds = ["aws", "gcp"]         # clouds planning considers
    regions = ["us-*", "europe-*"]  # region globs planning considers
    project = "nlp"                 # the project runs are booked to
    budget = 500                    # USD per run when the spec sets no limits.budget_usd
    storage = "s3://my-runs/gpuplan"  # where runs keep checkpoints and outputs

    [providers.gcp]
    project = "my-gcp-project"
    region = "us-central1"

    [providers.aws]
    bucket = "my-gpuplan-runs"

Each `[providers.NAME]` table is passed to that provider's constructor as keyword arguments, by every command
that builds the provider (launch, watch, status, stop, reconcile, the scheduler), so a run is always looked
after with the same settings it was launched with; its keys are checked against the constructor's parameters
where the provider is built (gpuplan.providers.registry), as only the provider knows them. Environment
variables the providers read themselves (GOOGLE_CLOUD_PROJECT, GPUPLAN_AWS_BUCKET, ...) still apply where the
file says nothing. No secrets belong here.

Everything else is checked here, each time the file is loaded: only the sections above, only the keys of
`[defaults]` in DEFAULTS with their types. A typo (`[provider.aws]`, `regoins`) is an error naming the file and
the close match, exit 2, never a setting silently ignored.
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuplan.errors import UserError
from gpuplan.paths import expand_user

MAX_CONFIG_BYTES = 256 * 1024  # a config file is a few hundred bytes; 10 MB of comments took seconds to parse


@dataclass(frozen=True)
class Setting:
    """One key of `[defaults]`: its value's kind (str, strings = a list or comma-separated string, money =
    a positive number of USD) and what it is for (shown by `gpuplan config show --all`)."""

    key: str
    kind: str
    help: str


DEFAULTS: dict[str, Setting] = {s.key: s for s in (
    Setting("provider", "str", "where `launch` runs without --provider: a registered provider (this machine, a "
                               "cloud, a cluster or a plugin)"),
    Setting("clouds", "strings", "the clouds planning and prices consider (default: every cloud the catalog prices)"),
    Setting("regions", "strings", "region globs planning considers, e.g. [\"us-*\", \"europe-west4\"]"),
    Setting("project", "str", "the project a run is booked to when its spec names none"),
    Setting("budget", "money", "USD a run may spend when its spec sets no limits.budget_usd"),
    Setting("storage", "str", "where runs keep checkpoints and outputs: s3://bucket/prefix, gs://..., or a path"),
)}
SECTIONS = ("defaults", "providers")


def config_path() -> Path:
    explicit = os.environ.get("GPUPLAN_CONFIG")
    if explicit:
        return expand_user(explicit)
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = expand_user(xdg) if xdg else Path.home() / ".config"
    return base / "gpuplan" / "config.toml"


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """`; did you mean X?` for the closest of `choices`, else `; known: a, b, c` (empty without choices)."""
    import difflib  # only on the error path

    options = sorted(set(choices))
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; known: {', '.join(options)}" if options else ""


def parse_toml(text: str, path: Path) -> dict[str, Any]:
    """The TOML document in `text` (read from `path`); a syntax error is a UserError naming the file."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    from gpuplan.readfile import check_nesting

    check_nesting(text, f"config file {path}", comment="#")
    try:
        return tomllib.loads(text)
    except RecursionError:
        raise UserError(f"config file {path} nests too deep") from None
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {path} is not valid TOML: {exc}") from exc


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The parsed and checked file, or {} when there is none; a malformed file is a UserError naming it."""
    path = path or config_path()
    try:
        exists = path.exists()
    except OSError as exc:  # a name over 255 bytes (ENAMETOOLONG): no file can have it
        raise UserError(f"config file {str(path)[:80]}...: {exc.strerror}") from None
    if not exists:
        if os.environ.get("GPUPLAN_CONFIG") and path == config_path():
            # Named on purpose, so a typo in the path must not silently drop the settings (e.g. the GCP project).
            raise UserError(f"config file {path} (from $GPUPLAN_CONFIG) does not exist")
        return {}
    from gpuplan.readfile import read_text

    try:
        text = read_text(path, "the config file", MAX_CONFIG_BYTES)  # regular files only, bounded
    except FileNotFoundError as exc:
        raise UserError(f"cannot read the config file {path}: {exc.strerror}") from exc
    data = parse_toml(text, path)
    check_config(data, path)
    return data


def check_config(data: dict[str, Any], path: Path) -> None:
    """Refuse unknown sections, unknown `[defaults]` keys and values of the wrong kind (UserError, exit 2)."""
    for section, value in data.items():
        if section not in SECTIONS:
            if not isinstance(value, dict) and section in DEFAULTS:
                raise UserError(f"config file {path}: {section} = ... belongs under [defaults]")
            close = did_you_mean(section, SECTIONS).removeprefix("; did you mean ").removesuffix("?").strip("'")
            shown = f"[{section}.{next(iter(value))}]" if isinstance(value, dict) and value and all(
                isinstance(v, dict) for v in value.values()) else f"[{section}]"
            hint = f"; did you mean {shown.replace(section, close, 1)}?" if close in SECTIONS else \
                f"; known: {', '.join(f'[{s}]' for s in SECTIONS)}"
            raise UserError(f"config file {path}: unknown section {shown}{hint}")
        if not isinstance(value, dict):
            raise UserError(f"config file {path}: {section} must be a table ([{section}]), not a value")
    for key, value in data.get("defaults", {}).items():
        check_default(key, value, path)
    for name, settings in data.get("providers", {}).items():
        if not isinstance(settings, dict):
            raise UserError(f"config file {path}: [providers.{name}] must be a table of settings, not a value")


def check_default(key: str, value: object, path: Path | str) -> None:
    """One `[defaults]` entry: a known key with a value of its kind."""
    setting = DEFAULTS.get(key)
    if setting is None:
        raise UserError(f"config file {path}: unknown setting {key!r} in [defaults]{did_you_mean(key, DEFAULTS)}")
    where = f"config file {path}: [defaults] {key}"
    if setting.kind == "str":
        if not isinstance(value, str) or not value.strip():
            raise UserError(f"{where} must be a non-empty string, not {value!r}")
    elif setting.kind == "strings":
        items = value.split(",") if isinstance(value, str) else value
        if not isinstance(items, list) or not items or not all(isinstance(i, str) and i.strip() for i in items):
            raise UserError(f"{where} must be a list of names (or one comma-separated string), not {value!r}")
    elif setting.kind == "money" and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
        raise UserError(f"{where} must be a positive number of USD, not {value!r}")


def provider_settings(name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `[providers.NAME]` table (empty when absent)."""
    config = load_config() if config is None else config
    providers = config.get("providers", {})
    settings = providers.get(name, {}) if isinstance(providers, dict) else {}
    if not isinstance(settings, dict):
        raise UserError(f"config file {config_path()}: [providers.{name}] must be a table of settings")
    return dict(settings)


def configured_providers(config: dict[str, Any] | None = None) -> list[str]:
    """The NAMEs of the file's `[providers.NAME]` tables (checked against the registry where providers are
    built: this module cannot know a plugin's name)."""
    config = load_config() if config is None else config
    return sorted(config.get("providers", {}))


def default_setting(key: str, config: dict[str, Any] | None = None) -> object | None:
    """A value from the `[defaults]` table (provider, clouds, regions, project, budget, storage), None when unset.

    One accessor so every command reads a default the same way; the table's keys and types are validated where
    the file is loaded. `strings` settings come back as a list, whether the file wrote a list or "a, b".
    """
    if key not in DEFAULTS:
        raise KeyError(f"{key!r} is not a [defaults] setting; known: {', '.join(DEFAULTS)}")
    config = load_config() if config is None else config
    table = config.get("defaults", {})
    if not isinstance(table, dict):
        raise UserError(f"config file {config_path()}: [defaults] must be a table of settings")
    value = table.get(key)
    if value is not None and DEFAULTS[key].kind == "strings":
        items = value.split(",") if isinstance(value, str) else value
        return [str(i).strip() for i in items if str(i).strip()]
    return value
