"""The config-file reference page, generated from the file's validator (gpuplan.config) and the providers'
constructors (gpuplan.providers.registry): the `[defaults]` keys with their kinds and help, and each
registered provider's `[providers.NAME]` settings, which are exactly its constructor's keyword parameters
(the same list `gpuplan config set` and every command's config check accept).
"""

from __future__ import annotations

import inspect

KIND_NAMES = {
    "str": "string",
    "strings": "list of strings (or one comma-separated string)",
    "money": "positive number (USD)",
}


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def provider_settings_table(name: str) -> list[str]:
    """Rows for one provider: setting, type, default (from the constructor's signature)."""
    from gpuplan.providers.registry import load_provider_class, setting_names

    cls = load_provider_class(name)
    params = inspect.signature(cls.__init__).parameters
    rows = ["| setting | type | default |", "| --- | --- | --- |"]
    for setting in setting_names(cls):
        param = params[setting]
        annotation = "" if param.annotation is inspect.Parameter.empty else str(param.annotation)
        annotation = annotation.replace("'", "")
        default = "" if param.default is inspect.Parameter.empty or param.default is None else repr(param.default)
        rows.append(f"| `{setting}` | `{_cell(annotation)}` | {f'`{_cell(default)}`' if default else '—'} |")
    return rows


def render_config_reference() -> str:
    from gpuplan.config import DEFAULTS, SECTIONS
    from gpuplan.providers.registry import load_provider_class, provider_names

    lines = [
        "# Config file reference",
        "",
        "Defaults and provider settings live in a TOML file: `$GPUPLAN_CONFIG`, else",
        "`$XDG_CONFIG_HOME/gpuplan/config.toml`, else `~/.config/gpuplan/config.toml` (`gpuplan config path`",
        "prints which). This page is generated at build time from the file's validator (`gpuplan/config.py`) and",
        "the registered providers' constructors (`scripts/docsite/config_reference.py`). How the settings are",
        "used: [Configuration](../guides/configuration.md).",
        "",
        f"Sections: {', '.join(f'`[{s}]`' for s in SECTIONS)} (`[providers.NAME]` per provider). Anything else",
        "— an unknown section or key, a value of the wrong kind, a provider nobody registers, a setting its",
        "constructor does not take — is one line `error: config file ...` and exit 2.",
        "",
        "## `[defaults]`",
        "",
        "| key | kind | what it is for |",
        "| --- | --- | --- |",
    ]
    for setting in DEFAULTS.values():
        lines.append(f"| `{setting.key}` | {KIND_NAMES.get(setting.kind, setting.kind)} | {_cell(setting.help)} |")
    lines.append("")
    for name in provider_names():
        cls = load_provider_class(name)
        lines += [f"## `[providers.{name}]`", ""]
        doc = inspect.getdoc(cls) or ""
        first = doc.split("\n\n")[0]
        if first:
            lines += [" ".join(first.split()), ""]
        lines += provider_settings_table(name)
        lines.append("")
    return "\n".join(lines)
