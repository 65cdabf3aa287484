"""A run's Blob storage from this computer: the user's side of `az://ACCOUNT/CONTAINER/PREFIX` (the machines'
side is curl in providers/azure/boot_blob.py). Beside stored_files.py, not in providers/azure/, because both
`gpuplan checkpoints` (stored_files) and the Azure provider's outputs use it.

Why `az://ACCOUNT/CONTAINER/PREFIX`: it names the three things a Blob location is made of, in the order of the
https URL Azure users copy from the portal, `az storage` and AzCopy (`https://ACCOUNT.blob.core.windows.net/
CONTAINER/PREFIX`), and it has the `SCHEME://bucket/prefix` shape gpuplan's other object stores have
(gpuplan.jobs.storage: account names are 3-24 lower-case letters and digits, which that rule takes), so one
scheme, `az`, says "Blob storage" without making every https URL a storage.

Blob's REST API through azure-core's pipeline with the user's credential (no extra SDK package, as Key Vault in
secrets.py), token audience `https://storage.azure.com/`, `x-ms-version` 2021-08-06 (OAuth needs 2017-11-09 or
later: https://learn.microsoft.com/rest/api/storageservices/authorize-with-azure-active-directory):
- List Blobs `GET {container}?restype=container&comp=list&prefix=P&marker=M`, following NextMarker; each blob's
  `Etag` is its version (https://learn.microsoft.com/rest/api/storageservices/list-blobs);
- Get Blob (https://learn.microsoft.com/rest/api/storageservices/get-blob);
- Put Blob, `x-ms-blob-type: BlockBlob`, up to 5000 MiB in one call with version 2019-12-12 or later
  (https://learn.microsoft.com/rest/api/storageservices/put-blob) — the packed code is far smaller.
GPUPLAN_AZURE_BLOB_ENDPOINT (or `[providers.azure] blob_endpoint`) moves the service to path style
`ENDPOINT/ACCOUNT/CONTAINER/BLOB` (Azurite's form; the tests' loopback fake).
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree

from gpuplan.providers.base import ProviderError

SCHEME = "az"
SCOPE = "https://storage.azure.com/.default"
API_VERSION = "2021-08-06"
ENDPOINT_ENV = "GPUPLAN_AZURE_BLOB_ENDPOINT"


@dataclass(frozen=True)
class BlobLocation:
    """`az://ACCOUNT/CONTAINER/PREFIX` split in its parts (prefix without the slashes around it)."""

    account: str
    container: str
    prefix: str

    @classmethod
    def parse(cls, url: str) -> BlobLocation:
        rest = url.removeprefix(f"{SCHEME}://")
        if rest == url:
            raise ProviderError(f"not an {SCHEME}:// storage URL: {url}")
        account, _, rest = rest.partition("/")
        container, _, prefix = rest.partition("/")
        if not account or not container:
            raise ProviderError(f"{url}: a Blob storage is {SCHEME}://ACCOUNT/CONTAINER[/PREFIX]")
        return cls(account, container, prefix.strip("/"))


@dataclass(frozen=True)
class BlobItem:
    name: str
    size: int
    etag: str
    modified: str | None


class BlobClient:
    """Blob calls with one credential (an azure-core TokenCredential); `endpoint` moves the service (path style)."""

    def __init__(self, credential: Any, endpoint: str | None = None) -> None:
        self._credential = credential
        self.endpoint = (endpoint or os.environ.get(ENDPOINT_ENV) or "").rstrip("/") or None
        self._client: Any = None

    def container_url(self, account: str, container: str) -> str:
        if self.endpoint:
            return f"{self.endpoint}/{account}/{container}"
        return f"https://{account}.blob.core.windows.net/{container}"

    def blob_url(self, account: str, container: str, name: str) -> str:
        return f"{self.container_url(account, container)}/{urllib.parse.quote(name, safe='/')}"

    def _send(self, method: str, url: str, *, params: dict[str, str] | None = None, data: bytes | None = None,
              headers: dict[str, str] | None = None) -> Any:
        from azure.core import PipelineClient
        from azure.core.pipeline.policies import BearerTokenCredentialPolicy, RetryPolicy
        from azure.core.rest import HttpRequest

        if self._client is None:
            self._client = PipelineClient(base_url=url, policies=[
                RetryPolicy(), BearerTokenCredentialPolicy(self._credential, SCOPE)])
        request = HttpRequest(method, url, params=params, content=data,
                              headers={"x-ms-version": API_VERSION, **(headers or {})})
        return self._client.send_request(request)

    def list(self, account: str, container: str, prefix: str) -> Iterator[BlobItem]:
        """Every blob whose name starts with `prefix`, page by page."""
        url = self.container_url(account, container)
        marker = ""
        while True:
            params = {"restype": "container", "comp": "list", "prefix": prefix}
            if marker:
                params["marker"] = marker
            response = self._send("GET", url, params=params)
            if response.status_code != 200:
                raise ProviderError(f"Blob storage refused listing {account}/{container}/{prefix} "
                                    f"(HTTP {response.status_code})", code="BlobList")
            root = ElementTree.fromstring(response.content)
            for blob in root.iter("Blob"):
                props = blob.find("Properties")
                size = props.findtext("Content-Length") if props is not None else None
                yield BlobItem(name=blob.findtext("Name") or "", size=int(size or 0),
                               etag=(props.findtext("Etag") if props is not None else None) or "",
                               modified=props.findtext("Last-Modified") if props is not None else None)
            marker = root.findtext("NextMarker") or ""
            if not marker:
                return

    def get(self, account: str, container: str, name: str) -> bytes:
        response = self._send("GET", self.blob_url(account, container, name))
        if response.status_code != 200:
            raise ProviderError(f"Blob storage refused reading {account}/{container}/{name} "
                                f"(HTTP {response.status_code})", code="BlobGet")
        return bytes(response.content)

    def put(self, account: str, container: str, name: str, data: bytes) -> None:
        response = self._send("PUT", self.blob_url(account, container, name), data=data,
                              headers={"x-ms-blob-type": "BlockBlob", "Content-Type": "application/octet-stream"})
        if response.status_code not in (200, 201):
            raise ProviderError(f"Blob storage refused writing {account}/{container}/{name} "
                                f"(HTTP {response.status_code})", code="BlobPut")


def user_blob_client() -> BlobClient:
    """A client with the user's DefaultAzureCredential (as the provider's ARM session builds it)."""
    try:
        from azure.identity import DefaultAzureCredential
    except ImportError as exc:
        from gpuplan.errors import UserError

        raise UserError("az:// storage needs the Azure SDK: pip install 'gpuplan[azure]'") from exc
    return BlobClient(DefaultAzureCredential())
