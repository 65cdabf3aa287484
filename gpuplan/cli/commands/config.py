"""`gpuplan config`: where the config file is, what it says (checked), and setting one key without an editor."""

from __future__ import annotations

from typing import Any

import click

from gpuplan.cli import complete
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note
from gpuplan.errors import UserError


@click.group("config")
def config() -> None:
    """The config file (TOML): defaults for every command and per-provider settings.

    `$GPUPLAN_CONFIG`, else `$XDG_CONFIG_HOME/gpuplan/config.toml`, else `~/.config/gpuplan/config.toml`.
    Sections: [defaults] (provider, clouds, regions, project, budget, storage) and [providers.NAME] (that
    provider's constructor settings). A typo in either is an error with the close match.
    """


@config.command("path")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable: the path and whether it exists.")
def path_command(as_json: bool) -> None:
    """Print the path of the config file gpuplan reads (whether or not it exists yet)."""
    from gpuplan.config import config_path

    path = config_path()
    if as_json:
        emit_json({"path": str(path), "exists": path.exists()})
        return
    click.echo(str(path))
    if not path.exists():
        note("(no file there yet: `gpuplan config set KEY VALUE` creates it)")


@config.command("show")
@click.option("--all", "show_all", is_flag=True, help="Also list every [defaults] setting that is not set, "
                                                         "and each provider's settings, with what they are for.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable: the checked file as one document.")
@pass_app
def show(app: AppContext, show_all: bool, as_json: bool) -> None:
    """Check the config file (sections, keys, value types, provider settings) and print what it sets."""
    from gpuplan.cli.config_check import check_config_values
    from gpuplan.config import DEFAULTS, config_path, load_config
    from gpuplan.providers import registry

    data = load_config()
    for name in data.get("providers", {}):
        registry.check_provider_settings(name)
    check_config_values(data)  # the values, with the spec's rules and each provider's own
    if as_json:
        doc: dict[str, Any] = {"path": str(config_path()), "exists": config_path().exists(), **data}
        if show_all:
            doc["known"] = {"defaults": {k: s.help for k, s in DEFAULTS.items()},
                            "providers": {n: registry.setting_names(registry.load_provider_class(n))
                                          for n in registry.provider_names()}}
        emit_json(doc)
        return
    if not config_path().exists():
        note(f"no config file at {config_path()}")
    else:
        note(f"# {config_path()}")
    from gpuplan.cli.config_edit import toml_value

    defaults = data.get("defaults", {})
    for key, setting in DEFAULTS.items():
        if key in defaults:
            click.echo(f"defaults.{key} = {toml_value(defaults[key])}")
        elif show_all:
            click.echo(f"# defaults.{key} (unset): {setting.help}")
    for name, settings in sorted(data.get("providers", {}).items()):
        for key, value in settings.items():
            click.echo(f"providers.{name}.{key} = {toml_value(value)}")
    if show_all:
        for name in registry.provider_names():
            takes = registry.setting_names(registry.load_provider_class(name))
            click.echo(f"# providers.{name}: {', '.join(takes)}")


@config.command("set", context_settings={"ignore_unknown_options": True})
@click.argument("key", metavar="KEY", shell_complete=complete.config_keys)
@click.argument("value", metavar="VALUE", required=False)
@click.option("--unset", is_flag=True, help="Remove KEY from the file instead (no VALUE).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable: the key and its new value.")
def set_command(key: str, value: str | None, unset: bool, as_json: bool) -> None:
    """Set KEY to VALUE in the config file (created if missing), keeping its comments and order.

    KEY is `defaults.NAME` (provider, clouds, regions, project, budget, storage) or `providers.CLOUD.NAME`
    (a setting of that provider's constructor, e.g. providers.aws.bucket). VALUE is read as TOML when it is
    one (42, true, ["a", "b"]), else as text; lists may be comma-separated (`clouds aws,gcp`).
    """
    from gpuplan.cli.config_edit import write_setting
    from gpuplan.config import config_path

    if unset == (value is not None):
        raise UserError("give a VALUE, or --unset without one")
    table, name, parsed = _checked(key, value)
    path = config_path()
    write_setting(path, table, name, parsed)
    if as_json:
        emit_json({"path": str(path), "key": f"{table}.{name}", "value": parsed})
    elif parsed is None:
        click.echo(f"removed {table}.{name} from {path}")
    else:
        click.echo(f"{table}.{name} = {_shown(parsed)} in {path}")


def _shown(value: object) -> str:
    from gpuplan.cli.config_edit import toml_value

    return toml_value(value)


def _checked(key: str, text: str | None) -> tuple[str, str, Any]:
    """The table, the key and the typed value for `config set`, each checked as loading the file would."""
    from gpuplan.config import DEFAULTS, SECTIONS, check_default, config_path, did_you_mean

    parts = key.split(".")
    section = parts[0]
    if section not in SECTIONS:
        hint = f"; did you mean 'defaults.{section}'?" if section in DEFAULTS and len(parts) == 2 else \
            did_you_mean(section, SECTIONS)
        raise UserError(f"unknown section {section!r} in {key!r}{hint} (KEY is defaults.NAME or "
                        "providers.CLOUD.NAME)")
    if section == "defaults":
        if len(parts) != 2:
            raise UserError(f"{key!r}: a default is defaults.NAME, e.g. defaults.provider")
        name = parts[1]
        if name not in DEFAULTS:
            raise UserError(f"unknown setting {name!r} in [defaults]{did_you_mean(name, DEFAULTS)}")
        value = None if text is None else _typed(text, DEFAULTS[name].kind)
        if value is not None:
            from gpuplan.cli.config_check import check_default_value

            check_default(name, value, config_path())
            check_default_value(name, value, where=f"config set {key}")
        return "defaults", name, value
    if len(parts) != 3:
        raise UserError(f"{key!r}: a provider setting is providers.CLOUD.NAME, e.g. providers.aws.bucket")
    from gpuplan.providers.registry import check_provider_settings, provider_names

    cloud, name = parts[1], parts[2]
    if cloud not in provider_names():
        raise UserError(f"[providers.{cloud}] names no provider{did_you_mean(cloud, provider_names())}")
    value = None if text is None else _typed(text, "any")
    check_provider_settings(cloud, {name: value}, where=f"config set {key}")
    if value is not None:
        from gpuplan.providers.registry import check_provider_value

        check_provider_value(cloud, name, value, where=f"config set {key}")
    return f"providers.{cloud}", name, value


def _typed(text: str, kind: str) -> Any:
    """VALUE as its setting's kind: a list from `a,b`, a number for money, TOML literals for provider keys."""
    if kind == "strings":
        if text.strip().startswith("["):
            return _literal(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    if kind == "money":
        try:
            return float(text) if any(c in text for c in ".eE") else int(text)
        except ValueError:
            raise UserError(f"{text!r} is not a number of USD") from None
    if kind == "str":
        return text
    try:
        return _literal(text)
    except UserError:
        return text  # not a TOML literal: plain text, as typed


def _literal(text: str) -> Any:
    """`[\"a\", \"b\"]`, `42`, `true` as TOML reads them; a UserError when `text` is no TOML value."""
    from pathlib import Path

    from gpuplan.config import parse_toml

    return parse_toml(f"v = {text}", Path("VALUE"))["v"]
