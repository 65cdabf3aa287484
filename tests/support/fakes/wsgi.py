"""Serving a fake cloud API: a werkzeug WSGI app on a free loopback port, in a daemon thread of the test process.

One place for what every fake needs (a port picked by the OS so parallel test runs never collide, no access log
on stderr because the tests read the CLI's stderr, a clean shutdown), so each fake is only its API.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from werkzeug.serving import WSGIRequestHandler, make_server


class QuietHandler(WSGIRequestHandler):
    """No access log on stderr: the tests read the CLI's stderr, and each fake records its requests anyway."""

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@contextmanager
def serve_wsgi(app: Any, host: str = "127.0.0.1", name: str = "fake") -> Iterator[int]:
    """Serve `app` on `host` at a free port until the block ends; yields the port."""
    server = make_server(host, 0, app, threaded=True, request_handler=QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, name=name, daemon=True)
    thread.start()
    try:
        yield server.server_port
    finally:
        server.shutdown()
        thread.join(timeout=5)
