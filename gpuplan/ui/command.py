"""`gpuplan ui`: the dashboard command. Registered by name in gpuplan.cli's lazy registry, so neither this
module nor the web stack is imported until someone runs it (`gpuplan --help` stays fast)."""

from __future__ import annotations

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.errors import UserError


@click.command("ui")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to listen on. Beyond loopback (0.0.0.0, a LAN address) a token is required: --token, "
                   "else one is generated and printed in the URL.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="TCP port; 0 picks a free one.")
@click.option("--token", envvar="GPUPLAN_UI_TOKEN", metavar="TEXT",
              help="Ask every request for this token (env GPUPLAN_UI_TOKEN); the printed URL carries it.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME",
              help="Also answer to this Host name (e.g. the machine's DNS name behind --host 0.0.0.0).")
@click.option("--allow-actions", is_flag=True,
              help="Offer to stop live runs and launch job specs, each after a confirmation. Without it the "
                   "dashboard only reads.")
@click.option("--no-browser", is_flag=True, help="Do not open a browser; just print the URL.")
@pass_app
def ui(app: AppContext, host: str, port: int, token: str | None, allow_hosts: tuple[str, ...], allow_actions: bool,
       no_browser: bool) -> None:
    """A local web dashboard: runs (live state, ETA, cost), a run's events, log and curves, the books and
    budgets, estimate accuracy and a plan explorer, over the same database and functions as the CLI.

    Read-only unless --allow-actions. It answers on 127.0.0.1 only by default, refuses other Host and Origin
    headers (DNS rebinding, cross-site requests), and shows every name and log line as text.
    """
    import secrets

    try:
        from gpuplan.ui.security import is_loopback
        from gpuplan.ui.server import ServeOptions, serve
    except ImportError as exc:  # the web stack is an extra
        raise UserError(f"gpuplan ui needs the `ui` extra: pip install 'gpuplan[ui]' ({exc.name} is missing)") \
            from None
    if token is not None and len(token) < 16:
        raise UserError("--token: give at least 16 characters (a guessable token guards nothing)")
    if token is None and not is_loopback(host):
        token = secrets.token_urlsafe(24)
    app.store  # noqa: B018 - open (and upgrade) the database now: a bad --db is one line before any server starts
    options = ServeOptions(host=host, port=port, token=token, secret=secrets.token_bytes(32),
                           allow_actions=allow_actions, open_browser=not no_browser, extra_hosts=allow_hosts)
    try:
        serve(app, options, lambda line: click.echo(line, err=False))
    except OSError as exc:
        raise UserError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
