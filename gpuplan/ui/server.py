"""Serve the dashboard: bind the socket (port 0 picks a free one), print the URL, open a browser, and stop
cleanly (exit 0) on Ctrl-C or SIGTERM.

uvicorn's own signal handling re-raises the captured SIGINT after its shutdown, which the CLI would then report
as an interrupted command (exit 130); here a Ctrl-C is the normal way to end `gpuplan ui`, so this server takes
the signals itself and only asks uvicorn to finish.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import webbrowser
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import FrameType

import uvicorn

from gpuplan.cli.context import AppContext
from gpuplan.ui.app import build_app
from gpuplan.ui.security import Guard, host_header
from gpuplan.ui.settings import UiSettings


@dataclass(frozen=True)
class ServeOptions:
    """What `gpuplan ui` was asked for."""

    host: str
    port: int
    token: str | None
    secret: bytes
    allow_actions: bool
    open_browser: bool
    extra_hosts: tuple[str, ...] = ()


class _Server(uvicorn.Server):
    """uvicorn without its signal capture: `serve` below installs handlers that just set should_exit."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (IPv6 when the host is an IPv6 address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


def url_for(host: str, port: int, token: str | None) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    return f"http://{host_header(shown, port)}/" + (f"?token={token}" if token else "")


def serve(app: AppContext, options: ServeOptions, say: Callable[[str], None]) -> None:
    """Run until Ctrl-C/SIGTERM; `say` prints the URL (and the goodbye) for the person at the terminal."""
    sock = bind(options.host, options.port)
    port = sock.getsockname()[1]
    guard = Guard.for_bind(options.host, port, options.token, options.secret, options.extra_hosts)
    application = build_app(UiSettings(app=app, guard=guard, allow_actions=options.allow_actions))
    config = uvicorn.Config(application, log_level="warning", access_log=False, lifespan="off")
    server = _Server(config)

    def stop(signum: int, frame: FrameType | None) -> None:
        server.should_exit = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    url = url_for(options.host, port, options.token)
    say(f"gpuplan ui: {url}  ({'actions allowed' if options.allow_actions else 'read-only'}; Ctrl-C stops it)")
    if options.open_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        sock.close()
    say("gpuplan ui: stopped")
