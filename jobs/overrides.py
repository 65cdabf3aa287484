"""`launch --env NAME=VALUE` and `--secret NAME`: values given on the command line over the spec's.

As with `sky launch --env`/`--secret` and `dstack apply -e`: `--env NAME=VALUE` sets a variable (over the spec's
env), `--env NAME` copies it from the caller's environment, `--secret NAME` adds a secret read from the caller's
environment at launch (never stored, never logged). A secret value on the command line would sit in the shell
history and in `ps` for every user of the machine, so `--secret NAME=VALUE` is refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from gpuplan.errors import UserError
from gpuplan.jobs.spec import JobSpec
from gpuplan.jobs.spec_names import check_env_name


def _name(text: str, what: str) -> str:
    try:
        return check_env_name(text, what)
    except ValueError as exc:
        raise UserError(f"--{what} {text}: {exc}") from None


def with_overrides(spec: JobSpec, env: Sequence[str], secrets: Sequence[str],
                   environ: Mapping[str, str] | None = None) -> JobSpec:
    """`spec` with the command line's --env and --secret applied (a copy)."""
    if not env and not secrets:
        return spec
    environ = os.environ if environ is None else environ
    new_env = dict(spec.env)
    for item in env:
        name, sep, value = item.partition("=")
        name = _name(name, "env")
        if not sep:
            if name not in environ:
                raise UserError(f"--env {name}: not set in this environment (give --env {name}=VALUE)")
            value = environ[name]
        if "\0" in value:
            raise UserError(f"--env {name}: the value contains a NUL character")
        new_env[name] = value
    new_secrets = list(spec.secrets)
    for item in secrets:
        if "=" in item:
            raise UserError(f"--secret {item.partition('=')[0]}=...: give the NAME only; the value is read from "
                            "your environment at launch (a value on the command line shows in `ps` and history)")
        name = _name(item, "secret")
        if name not in new_secrets:
            new_secrets.append(name)
    clash = sorted(set(new_env) & set(new_secrets))
    if clash:
        raise UserError(f"{', '.join(clash)} is both an env and a secret: give it one way")
    return spec.model_copy(update={"env": new_env, "secrets": new_secrets})
