"""The config file's values checked with the job spec's own rules, by `config show` and before `config set` writes
(issue 38, class 7): a value that passed there used to break every later launch, or quietly mean something else.

gpuplan.config checks the file's shape (sections, keys, kinds) each time it is loaded, with nothing but the file;
what needs the rest of gpuplan is checked here, where the CLI may import it:

- `[defaults] provider` and each of `clouds`: a registered provider (`%`, `$(id)`, escapes or 100,000 characters
  name none), as the spec's `resources.clouds` are read;
- `[defaults] storage`: the spec's storage rule (a bucket prefix or a folder path), in a scheme some registered
  provider's machines reach (their `storage_schemes`: `ftp://bucket` is none of them);
- `[defaults] project`: the spec's project rule;
- every `[providers.NAME]` value: of the type its constructor parameter takes (`root = 5` is no path), finite,
  and accepted by the provider itself (it is built once: `price_per_hour = nan` or `-3` is refused by it).
"""

from __future__ import annotations

from typing import Any

from gpuplan.config import config_path, did_you_mean
from gpuplan.errors import UserError


def check_default_value(key: str, value: Any, where: str | None = None) -> None:
    """One `[defaults]` value against the spec's rules (UserError naming `where`)."""
    from gpuplan.providers.registry import provider_names

    where = where or f"config file {config_path()}: [defaults] {key}"
    if key in ("provider", "clouds"):
        names = provider_names()
        for name in [value] if isinstance(value, str) else list(value):
            if name.strip() not in names:
                raise UserError(f"{where}: {name!r} names no provider{did_you_mean(str(name), names)}")
    elif key == "storage":
        from gpuplan.jobs.storage import check_storage, unknown_scheme
        from gpuplan.providers.registry import storage_schemes

        try:
            checked = check_storage(str(value))
        except ValueError as exc:
            raise UserError(f"{where}: {exc}") from None
        unknown = unknown_scheme(checked, storage_schemes()) if checked else None
        if unknown:
            raise UserError(f"{where}: {unknown}")
    elif key == "project":
        from pydantic import ValidationError

        from gpuplan.jobs.spec import JobSpec

        try:
            JobSpec.model_validate({"name": "check", "command": "true", "project": value})
        except ValidationError as exc:
            raise UserError(f"{where}: {exc.errors()[0]['msg']}") from None


def check_config_values(data: dict[str, Any]) -> None:
    """Every value of a loaded config file (gpuplan.config.load_config's result)."""
    from gpuplan.providers.registry import check_provider_value, make_provider

    for key, value in data.get("defaults", {}).items():
        check_default_value(key, value)
    for provider, settings in data.get("providers", {}).items():
        for key, value in settings.items():
            check_provider_value(provider, key, value)
        make_provider(provider)  # the provider's own checks of its values (a ValueError is a UserError there)
