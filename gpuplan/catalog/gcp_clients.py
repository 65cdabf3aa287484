"""Google client construction for the price refresh: endpoint overrides and credentials.

gcloud's own variables choose the endpoints: CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE (e.g.
`http://127.0.0.1:PORT/compute/v1/`) and CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING. The REST clients want
the root (`scheme://host:port`), so the path is dropped. Anonymous credentials are used only when the endpoint
is on loopback (a local fake); anywhere else the normal Application Default Credentials apply.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any
from urllib.parse import urlsplit

COMPUTE_OVERRIDE = "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"
BILLING_OVERRIDE = "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING"


def endpoint_root(override: str | None) -> str | None:
    """`http://127.0.0.1:8080/compute/v1/` -> `http://127.0.0.1:8080` (None when not overridden)."""
    if not override:
        return None
    parts = urlsplit(override.strip())
    if not parts.scheme or not parts.netloc:
        from gpuplan.errors import UserError

        raise UserError(f"endpoint override {override!r} is not a URL like https://host/")
    return f"{parts.scheme}://{parts.netloc}"


def is_loopback(endpoint: str) -> bool:
    host = urlsplit(endpoint).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def client_kwargs(override_var: str) -> dict[str, Any]:
    """Keyword arguments for a google-cloud client: REST transport, the override endpoint, and credentials."""
    endpoint = endpoint_root(os.environ.get(override_var))
    kwargs: dict[str, Any] = {"transport": "rest"}
    if endpoint is not None:
        kwargs["client_options"] = {"api_endpoint": endpoint}
        if is_loopback(endpoint):
            from google.auth.credentials import AnonymousCredentials

            kwargs["credentials"] = AnonymousCredentials()
    return kwargs


def default_project() -> str | None:
    """The project from the usual places: GOOGLE_CLOUD_PROJECT, CLOUDSDK_CORE_PROJECT, then ADC."""
    for var in ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT", "GCLOUD_PROJECT"):
        if os.environ.get(var):
            return os.environ[var]
    try:
        import google.auth

        return google.auth.default()[1]
    except Exception:
        return None
