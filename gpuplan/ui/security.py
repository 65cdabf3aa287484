"""The dashboard's gate: which requests reach a page at all, and the headers every answer carries.

- Host: only the names the server was started for (127.0.0.1/localhost/[::1] with its port, the bound address,
  `--allow-host` names). A page of another site that rebinds its own DNS name to 127.0.0.1 sends its own name
  as Host and is refused (DNS rebinding; https://developer.mozilla.org/en-US/docs/Web/HTTP/Headers/Host).
- Origin: a request a browser marks with another site's Origin is refused, whatever its method; a request that
  changes something (POST) must come from our own origin and carry the form's CSRF token
  (https://cheatsheetseries.owasp.org/cheatsheets/Cross-Site_Request_Forgery_Prevention_Cheat_Sheet.html).
- Token: when one is set (always for a bind beyond loopback), every request must carry it: `?token=` once
  (answered with an HttpOnly, SameSite=Strict cookie and a redirect that drops it from the address bar), the
  cookie, or `Authorization: Bearer`.
- Headers: a strict Content-Security-Policy (no script at all, styles and images from this server only, forms
  post only here, no framing), nosniff, no referrer, no caching of pages with the books in them.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "gpuplan_ui_token"
CSP = ("default-src 'none'; script-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
       "frame-ancestors 'none'; base-uri 'none'")
HEADERS = (
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
    (b"cache-control", b"no-store"),
)
SAFE_METHODS = ("GET", "HEAD")


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost` reach only this machine."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def host_header(host: str, port: int) -> str:
    """How a browser writes host:port in the Host header (IPv6 in brackets)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


@dataclass(frozen=True)
class Guard:
    """What the gate lets in: the Host values, the token (None: no token asked), the CSRF secret."""

    allowed_hosts: frozenset[str]
    token: str | None
    secret: bytes
    any_host: bool = False  # bound to every address (0.0.0.0, ::): names are unknowable, the token guards it

    @classmethod
    def for_bind(cls, host: str, port: int, token: str | None, secret: bytes,
                 extra_hosts: tuple[str, ...] = ()) -> Guard:
        names = {"127.0.0.1", "localhost", "::1", host, *extra_hosts}
        return cls(frozenset(host_header(n, port).lower() for n in names), token, secret,
                   any_host=_unspecified(host) and token is not None)

    @property
    def origins(self) -> frozenset[str]:
        return frozenset(f"http://{h}" for h in self.allowed_hosts)

    def csrf_token(self) -> str:
        """The token every form that changes something carries (one per server start)."""
        return hmac.new(self.secret, b"gpuplan-ui-csrf", hashlib.sha256).hexdigest()

    def csrf_ok(self, value: str | None) -> bool:
        return value is not None and hmac.compare_digest(value.encode(), self.csrf_token().encode())

    def token_ok(self, value: str | None) -> bool:
        return self.token is None or (value is not None and hmac.compare_digest(value.encode(),
                                                                               self.token.encode()))


class SecurityMiddleware:
    """ASGI middleware applying the Guard to every HTTP request before any route runs."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            status, text = refusal
            await _plain(send, status, text)
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if self.guard.token is not None and "token" in query:
            # The token came in the link: keep it in a cookie and take it out of the address bar and history.
            rest = urlencode({k: v for k, v in query.items() if k != "token"})
            location = scope.get("path", "/") + (f"?{rest}" if rest else "")
            cookie = f"{COOKIE}={self.guard.token}; HttpOnly; SameSite=Strict; Path=/"
            await _plain(send, 303, "see other", [(b"location", location.encode()), (b"set-cookie", cookie.encode())])
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[int, str] | None:
        """(status, reason) when the request must not reach a page, else None."""
        host = headers.get("host", "").lower()
        if host not in self.guard.allowed_hosts and not self.guard.any_host:
            return 421, "refused: this dashboard does not answer to that Host name (DNS rebinding guard)"
        origin = headers.get("origin")
        if origin is not None and origin.lower() not in self.guard.origins and origin.lower() != f"http://{host}":
            return 403, "refused: a request from another origin"
        if scope.get("method", "GET") not in SAFE_METHODS and origin is None \
                and headers.get("sec-fetch-site") not in (None, "same-origin"):
            return 403, "refused: a cross-site request"
        if self.guard.token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = query.get("token") or _cookie(headers.get("cookie", "")) or _bearer(headers.get("authorization"))
            if not self.guard.token_ok(given):
                return 401, "this dashboard needs its token: open the URL `gpuplan ui` printed (with ?token=...)"
        return None


def _cookie(header: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(header)
    except Exception:  # a malformed Cookie header is no token
        return None
    morsel = jar.get(COOKIE)
    return morsel.value if morsel is not None else None


def _bearer(header: str | None) -> str | None:
    if header and header.lower().startswith("bearer "):
        return header[7:].strip()
    return None


async def _plain(send: Send, status: int, text: str, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = (text + "\n").encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()), *HEADERS, *(extra or [])]})
    await send({"type": "http.response.body", "body": body})
