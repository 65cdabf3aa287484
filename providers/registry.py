"""Which providers exist and how to build one: the built-ins and the `gpuplan.providers` entry points.

A third party adds a cloud with one package and one entry point in the group `gpuplan.providers`; nothing in
gpuplan names it. `make_provider` builds one with the user's `[providers.NAME]` settings (gpuplan.config).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from gpuplan.config import config_path, configured_providers, did_you_mean, provider_settings
from gpuplan.errors import UserError
from gpuplan.providers.base import Provider, ProviderError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint  # read only when a provider is looked up (a few ms)

BUILTIN_PROVIDERS: dict[str, str] = {
    "local": "gpuplan.providers.local:LocalProvider",
    "aws": "gpuplan.providers.aws.provider:AwsProvider",
    "gcp": "gpuplan.providers.gcp.provider:GcpProvider",
    "azure": "gpuplan.providers.azure.provider:AzureProvider",
    "slurm": "gpuplan.providers.slurm.provider:SlurmProvider",
}


def provider_names() -> list[str]:
    """Names of every registered provider: the built-ins plus the `gpuplan.providers` entry points."""
    return sorted(set(BUILTIN_PROVIDERS) | set(_plugins()))


def load_provider_class(name: str, plugins: Mapping[str, EntryPoint] | None = None) -> type[Provider]:
    """The Provider class registered as `name`; an unknown name is a ProviderError listing the known ones.

    `plugins`: the `gpuplan.providers` entry points by name, when the caller already read them (reading them costs
    a few milliseconds, and a loop over every provider would read them once per name)."""
    import importlib

    plugins = _plugins() if plugins is None else plugins
    if name in plugins:
        return plugins[name].load()  # type: ignore[no-any-return]
    target = BUILTIN_PROVIDERS.get(name)
    if target is None:
        raise UnknownProviderError(f"unknown provider {name!r}; known: {', '.join(provider_names())}")
    module_name, attr = target.split(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        raise UnknownProviderError(f"provider {name!r} is not available in this gpuplan: {exc}") from exc
    return getattr(module, attr)  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=1)
def _plugins() -> Mapping[str, EntryPoint]:
    """The `gpuplan.providers` entry points by name, read once per process (a read-only mapping). importlib reads
    every installed distribution's metadata for them (~3 ms here), and one `gpuplan plan` asked up to five times
    (the catalog's clouds, the spot model's rates, each cloud's billing minimum). What is installed does not
    change under a running command; a plugin installed meanwhile is seen by the next one."""
    from importlib.metadata import entry_points

    return MappingProxyType({ep.name: ep for ep in entry_points(group="gpuplan.providers")})


def catalog_providers() -> dict[str, type[Provider]]:
    """The clouds the price catalog prices, by cloud name: every registered provider that declares
    `priced_by_catalog` (the built-ins in the registry's order, then the plugins by name). What the catalog,
    `prices`, `plan` and the spot model know of clouds comes from here, so a new cloud is a package and a line
    above. A plugin that cannot be imported is left out (it cannot price anything)."""
    plugins = _plugins()
    names = list(BUILTIN_PROVIDERS) + sorted(set(plugins) - set(BUILTIN_PROVIDERS))
    found: dict[str, type[Provider]] = {}
    for name in names:
        try:
            cls = load_provider_class(name, plugins)
        except UnknownProviderError:
            continue
        if cls.priced_by_catalog:
            found.setdefault(cls.cloud, cls)
    return found


def catalog_clouds() -> tuple[str, ...]:
    """The names of the clouds the price catalog prices (see catalog_providers)."""
    return tuple(catalog_providers())


def get_provider(name: str, **config: Any) -> Provider:
    """An instance of the provider registered as `name`, configured with `config`."""
    return load_provider_class(name)(**config)


class UnknownProviderError(ProviderError):
    """A provider name no built-in or entry point registers (exit 2)."""

    exit_code = 2

def setting_names(cls: type[Provider]) -> list[str]:
    """The settings a provider class takes: its constructor's named keyword parameters (a `**rest` takes any
    name but uses none, so it does not make a typo right)."""
    import inspect

    params = inspect.signature(cls.__init__).parameters.values()
    code_only = getattr(cls, "code_only_parameters", ())
    return [p.name for p in params if p.name != "self" and not p.name.startswith("_") and p.name not in code_only
            and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def check_provider_settings(name: str, settings: dict[str, Any] | None = None, *, where: str | None = None) -> None:
    """Refuse a config file that names a provider no one registers (`[providers.awz]`) or gives `name` a
    setting its constructor does not take (`buckett`): one line with the close match, exit 2, before the
    provider is built, instead of a setting silently ignored or a TypeError about __init__."""
    check_provider_tables()
    settings = provider_settings(name) if settings is None else settings
    if not settings:
        return
    takes = setting_names(load_provider_class(name))
    for key in settings:
        if key not in takes:
            raise UserError(f"{where or f'config file {config_path()}'}: [providers.{name}] has no setting "
                            f"{key!r}{did_you_mean(key, takes)}")


def check_provider_tables(tables: list[str] | None = None) -> None:
    """Every `[providers.NAME]` table of the config file names a registered provider (a typo, `[providers.awz]`,
    would otherwise be a table nobody reads)."""
    tables = configured_providers() if tables is None else tables
    unknown = [t for t in tables if t not in BUILTIN_PROVIDERS]
    if not unknown:
        return  # the built-ins need no look at the entry points
    known = provider_names()
    for table in unknown:
        if table not in known:
            raise UserError(f"config file {config_path()}: [providers.{table}] names no provider"
                            f"{did_you_mean(table, known)}")


# A constructor annotation's words -> the Python types a TOML value may have for it.
_ACCEPTS: dict[str, tuple[type, ...]] = {
    "str": (str,), "Path": (str,), "int": (int,), "float": (int, float), "Decimal": (int, float, str),
    "bool": (bool,), "Sequence": (list,), "list": (list,), "Mapping": (dict,), "dict": (dict,), "Any": (object,),
}


def check_provider_value(provider: str, key: str, value: Any, where: str | None = None) -> None:
    """One `[providers.NAME]` value against the type its constructor parameter is annotated with."""
    import inspect
    import math

    where = where or f"config file {config_path()}: [providers.{provider}] {key}"
    if isinstance(value, float) and not math.isfinite(value):
        raise UserError(f"{where} must be a finite number, not {value!r}")
    param = inspect.signature(load_provider_class(provider).__init__).parameters.get(key)
    annotation = str(param.annotation) if param is not None else "Any"
    if param is None or annotation in ("", "inspect._empty", "<class 'inspect._empty'>"):
        return
    kinds = [kind for word, kind in _ACCEPTS.items() if word in annotation]
    accepted = tuple(t for kind in kinds for t in kind)
    if not accepted or object in accepted:
        return
    if isinstance(value, bool) and bool not in accepted:
        raise UserError(f"{where} must be {annotation.replace(' | None', '')}, not {str(value).lower()}")
    if not isinstance(value, accepted):
        raise UserError(f"{where} must be {annotation.replace(' | None', '')}, not {value!r}")


def make_provider(name: str, **overrides: Any) -> Provider:
    """The provider registered as `name`, built with the config file's settings (then `overrides`)."""
    check_provider_settings(name)
    for key, value in provider_settings(name).items():
        check_provider_value(name, key, value)  # `root = 5` is no path: one line, not a TypeError in __init__
    settings = {**provider_settings(name), **overrides}
    try:
        return get_provider(name, **settings)
    except ValueError as exc:  # a provider refusing a setting's value: bad input, not a crash
        raise UserError(str(exc)) from exc
    except TypeError as exc:
        if not settings or "argument" not in str(exc):
            raise
        raise UserError(f"config file {config_path()}: [providers.{name}] has a setting the {name} provider "
                        f"does not take ({exc})") from exc


def storage_schemes() -> frozenset[str]:
    """Every run storage scheme some registered provider's machines reach (their `storage_schemes`): what a
    `[defaults] storage` may name. A provider that takes any storage (empty) adds none; one whose package is not
    installed here is left out."""
    found: set[str] = set()
    for name in provider_names():
        try:
            found.update(load_provider_class(name).storage_schemes)
        except UnknownProviderError:
            continue
    return frozenset(found)
