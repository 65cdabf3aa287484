"""A run's secrets in Azure Key Vault: put before the VMs start, read by the VM (providers/azure/boot.py), deleted
when the run's machines are gone; the boot script carries only their URLs.

Key Vault's REST API through azure-core's pipeline (no extra SDK package): Set Secret
`PUT {vault}/secrets/{name}?api-version=7.4` (https://learn.microsoft.com/rest/api/keyvault/secrets/set-secret/set-secret),
Delete Secret `DELETE {vault}/secrets/{name}` (https://learn.microsoft.com/rest/api/keyvault/secrets/delete-secret/delete-secret),
Get Secrets (list, names and tags only) `GET {vault}/secrets` with nextLink paging. Values are stored base64 with
contentType application/base64, so the VM decodes them without a JSON parser. Names: 1-127 letters, digits and
dashes (https://learn.microsoft.com/azure/key-vault/general/about-keys-secrets-certificates#object-identifiers):
`gpuplan-<run id>-<the variable's name in hex>` (hex: variable names have `_`, and Key Vault names ignore case).
A vault with soft delete keeps a deleted secret recoverable for its retention period; gpuplan then purges it when
its identity may (`DELETE {vault}/deletedsecrets/{name}`), and says nothing when it may not.
"""

from __future__ import annotations

import base64
import json
import logging
from collections.abc import Mapping
from typing import Any

from gpuplan.providers.base import ProviderError

API = "7.4"
SCOPE = "https://vault.azure.net/.default"
log = logging.getLogger(__name__)


def vault_url(setting: str) -> str:
    """`myvault` -> https://myvault.vault.azure.net; an https URL is used as it is (a private endpoint, a test)."""
    return setting.rstrip("/") if setting.startswith("https://") else f"https://{setting}.vault.azure.net"


def secret_name(run_id: str, name: str) -> str:
    return f"gpuplan-{run_id}-{name.encode().hex()}"[:127]


class KeyVault:
    """One vault, reached with the provider's credential."""

    def __init__(self, url: str, credential: Any) -> None:
        self.url = url
        self._credential = credential
        self._client: Any = None

    def _send(self, method: str, path: str, body: Mapping[str, Any] | None = None, *, url: str | None = None) -> Any:
        from azure.core import PipelineClient
        from azure.core.pipeline.policies import BearerTokenCredentialPolicy, RetryPolicy
        from azure.core.rest import HttpRequest

        if self._client is None:
            self._client = PipelineClient(base_url=self.url, policies=[
                RetryPolicy(), BearerTokenCredentialPolicy(self._credential(), SCOPE)])
        if url is not None:  # a nextLink: complete, with its own api-version and skip token
            request = HttpRequest(method, url)
        else:
            request = HttpRequest(method, f"{self.url}{path}", params={"api-version": API},
                                  json=dict(body) if body is not None else None)
        return self._client.send_request(request)

    def put(self, run_id: str, values: Mapping[str, str], tags: Mapping[str, str]) -> None:
        for name, value in sorted(values.items()):
            response = self._send("PUT", f"/secrets/{secret_name(run_id, name)}", {
                "value": base64.b64encode(value.encode()).decode(), "contentType": "application/base64",
                "tags": dict(tags)})
            if response.status_code >= 300:  # the name of the secret, never its value
                raise ProviderError(f"Key Vault refused secret {name} of run {run_id} (HTTP {response.status_code})",
                                    code="KeyVault")

    def delete_run(self, run_id: str) -> None:
        """Delete (and purge where allowed) every secret of the run; best effort, logged."""
        prefix = f"gpuplan-{run_id}-"
        for name in self.names():
            if not name.startswith(prefix):
                continue
            response = self._send("DELETE", f"/secrets/{name}")
            if response.status_code not in (200, 404):
                log.warning("Key Vault did not delete %s (HTTP %s)", name, response.status_code)
                continue
            self._send("DELETE", f"/deletedsecrets/{name}")  # purge; refused without the purge permission

    def names(self) -> list[str]:
        out: list[str] = []
        response = self._send("GET", "/secrets")
        while True:
            if response.status_code != 200:
                raise ProviderError(f"Key Vault cannot list secrets (HTTP {response.status_code})", code="KeyVault")
            page = json.loads(response.text())
            out.extend(item["id"].rstrip("/").rsplit("/", 1)[-1] for item in page.get("value", []))
            link = page.get("nextLink")
            if not link or not link.startswith(self.url):  # never follow a link to another host
                return out
            response = self._send("GET", "", url=link)
