"""The user's gpuplan configuration file: per-provider settings such as the GCP project or the AWS bucket.

`$GPUPLAN_CONFIG`, else `$XDG_CONFIG_HOME/gpuplan/config.toml`, else `~/.config/gpuplan/config.toml`:

    [providers.gcp]
    project = "my-gcp-project"
    region = "us-central1"

    [providers.aws]
    bucket = "my-gpuplan-runs"

Each `[providers.NAME]` table is passed to that provider's constructor as keyword arguments, by every command
that builds the provider (launch, watch, status, stop, reconcile, the scheduler), so a run is always looked
after with the same settings it was launched with. Environment variables the providers read themselves
(GOOGLE_CLOUD_PROJECT, GPUPLAN_AWS_BUCKET, ...) still apply where the file says nothing. No secrets belong here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from gpuplan.errors import UserError


def config_path() -> Path:
    explicit = os.environ.get("GPUPLAN_CONFIG")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".config"
    return base / "gpuplan" / "config.toml"


def load_config(path: Path | None = None) -> dict[str, Any]:
    """The parsed file, or {} when there is none; a malformed file is a UserError naming it."""
    path = path or config_path()
    if not path.exists():
        if os.environ.get("GPUPLAN_CONFIG") and path == config_path():
            # Named on purpose, so a typo in the path must not silently drop the settings (e.g. the GCP project).
            raise UserError(f"config file {path} (from $GPUPLAN_CONFIG) does not exist")
        return {}
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"cannot read the config file {path}: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"config file {path} is not valid TOML: {exc}") from exc
    return data


def provider_settings(name: str, config: dict[str, Any] | None = None) -> dict[str, Any]:
    """The `[providers.NAME]` table (empty when absent)."""
    config = load_config() if config is None else config
    providers = config.get("providers", {})
    settings = providers.get(name, {}) if isinstance(providers, dict) else {}
    if not isinstance(settings, dict):
        raise UserError(f"config file {config_path()}: [providers.{name}] must be a table of settings")
    return dict(settings)


def default_setting(key: str, config: dict[str, Any] | None = None) -> object | None:
    """A value from the `[defaults]` table (provider, clouds, regions, project, budget, storage), None when unset.

    One accessor so every command reads a default the same way; the table's keys and types are validated where
    the file is loaded.
    """
    config = load_config() if config is None else config
    table = config.get("defaults", {})
    if not isinstance(table, dict):
        raise UserError(f"config file {config_path()}: [defaults] must be a table of settings")
    return table.get(key)
