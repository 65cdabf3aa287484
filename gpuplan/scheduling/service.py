"""`gpuplan scheduler install`: the systemd user unit or the cron line that keeps the scheduler running.

systemd (https://www.freedesktop.org/software/systemd/man/latest/systemd.service.html, user units in
~/.config/systemd/user/: https://www.freedesktop.org/software/systemd/man/latest/systemd.unit.html#User%20Unit%20Search%20Path)
runs `gpuplan scheduler run` and restarts it if it dies; cron (crontab(5)) runs one pass a minute
(`scheduler run --once`), the lease in the database keeping two from firing a slot twice. Either way the
scheduler gets the same database as this shell (GPUPLAN_DB, GPUPLAN_HOME). A database URL that holds a password is
not written into a unit or a crontab (both are plain files other tools print): it goes in an environment file
the user creates (0600).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

UNIT_NAME = "gpuplan-scheduler.service"
ENV_FILE = "scheduler.env"


@dataclass(frozen=True)
class ServiceText:
    """The text to install, where it goes, and how to turn it on."""

    kind: str  # "systemd" | "cron"
    text: str
    path: Path | None  # the unit file (systemd); None for cron (it goes into the user's crontab)
    enable: str  # the command that starts it
    env_file_needed: Path | None = None  # where the password-holding GPUPLAN_DB must go


def gpuplan_command() -> list[str]:
    """How to start this gpuplan: its console script next to the interpreter, else `python -m gpuplan`."""
    script = Path(sys.executable).parent / "gpuplan"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpuplan"]


def _environment(db_url: str, environ: Mapping[str, str]) -> tuple[dict[str, str], bool]:
    """The variables the scheduler needs, and whether the database URL had to be left out (a password)."""
    from sqlalchemy.engine import make_url

    env: dict[str, str] = {}
    secret = make_url(db_url).password is not None
    if not secret:
        env["GPUPLAN_DB"] = db_url
    if environ.get("GPUPLAN_HOME"):
        env["GPUPLAN_HOME"] = environ["GPUPLAN_HOME"]
    return env, secret


def _systemd_quote(value: str) -> str:
    """A systemd unit value in double quotes (backslash and quote escaped, `%` doubled: systemd.unit specifiers)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%") + '"'


def systemd_unit(db_url: str, config_home: Path, interval: float,
                 environ: Mapping[str, str] | None = None) -> ServiceText:
    environ = os.environ if environ is None else environ
    env, secret = _environment(db_url, environ)
    env_file = config_home / "gpuplan" / ENV_FILE
    lines = ["[Unit]", "Description=gpuplan scheduler: fires scheduled training jobs and watches their runs",
             "After=network-online.target", "", "[Service]", "Type=simple"]
    lines += [f"Environment={_systemd_quote(f'{k}={v}')}" for k, v in env.items()]
    if secret:
        lines.append(f"EnvironmentFile={env_file}")
    argv = [*gpuplan_command(), "scheduler", "run", "--interval", f"{interval:g}"]
    lines += ["ExecStart=" + " ".join(_systemd_quote(a) for a in argv), "Restart=on-failure", "RestartSec=30", "",
              "[Install]", "WantedBy=default.target", ""]
    return ServiceText("systemd", "\n".join(lines), config_home / "systemd" / "user" / UNIT_NAME,
                       f"systemctl --user daemon-reload && systemctl --user enable --now {UNIT_NAME}",
                       env_file if secret else None)


def cron_line(db_url: str, log_file: Path, environ: Mapping[str, str] | None = None) -> ServiceText:
    environ = os.environ if environ is None else environ
    env, secret = _environment(db_url, environ)
    argv = [*gpuplan_command(), "scheduler", "run", "--once"]
    assignments = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
    command = " ".join(shlex.quote(a) for a in argv) + f" >> {shlex.quote(str(log_file))} 2>&1"
    # `%` ends a cron command (crontab(5)): escape it
    text = f"* * * * * {assignments + ' ' if assignments else ''}{command}".replace("%", "\\%")
    return ServiceText("cron", text + "\n", None, "crontab -l; then add the line with crontab -e",
                       None if not secret else Path("~/.pgpass"))
