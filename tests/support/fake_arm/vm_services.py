"""What an Azure VM's boot script talks to besides ARM, faked on loopback for the rendered script run with bash:

- IMDS (http, like the real 169.254.169.254; https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service):
  every request needs `Metadata: true` (400 otherwise) and must not carry X-Forwarded-For;
  `/metadata/identity/oauth2/token?api-version=..&resource=R` answers the managed identity's token for R
  (https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token);
  `/metadata/instance/compute/<field>?format=text` one field; `/metadata/scheduledevents` the pending events
  (https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events), a `Preempt` once `preempt()` is called.
- Key Vault (`/secrets/<name>?api-version=7.4`, GET: https://learn.microsoft.com/rest/api/keyvault/secrets/get-secret/get-secret)
  and Blob storage, path style `/<account>/<container>/<blob>` (Put Blob, Get Blob, List Blobs with a
  `maxresults` page size and NextMarker, each blob's ETag: https://learn.microsoft.com/rest/api/storageservices/list-blobs),
  both over TLS, both needing the bearer token IMDS gave for their audience. Blob also takes the token of the
  user's credential (the fake ARM's, `USER_TOKEN`): `gpuplan` on this computer reads outputs and writes the
  packed code with it; `state.blob_callers` records which token each Blob call carried.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from support.fake_arm.tls import make_certificate
from support.fakes.wsgi import QuietHandler

VAULT_TOKEN = "vault-token-$(touch PWNED)"
STORAGE_TOKEN = "storage-token-`id`"
ARM_TOKEN = "fake-arm-token"
USER_TOKEN = ARM_TOKEN  # what DefaultAzureCredential gets from the fake ARM's identity endpoint (and StaticToken)
AUDIENCES = {"https://vault.azure.net": VAULT_TOKEN, "https://storage.azure.com/": STORAGE_TOKEN,
             "https://management.azure.com/": ARM_TOKEN}


@dataclass
class VmServices:
    compute: dict[str, str] = field(default_factory=dict)  # subscriptionId, resourceGroupName, name
    secrets: dict[str, str] = field(default_factory=dict)  # name -> stored value (base64, as gpuplan stores it)
    blobs: dict[tuple[str, str, str], bytes] = field(default_factory=dict)  # (account, container, name) -> data
    events: list[dict[str, Any]] = field(default_factory=list)
    page_size: int = 2
    blob_callers: list[tuple[str, str]] = field(default_factory=list)  # (method, "machine" | "user")
    log: list[tuple[str, str]] = field(default_factory=list)

    def preempt(self, vm: str) -> None:
        self.events.append({"EventId": "e1", "EventType": "Preempt", "ResourceType": "VirtualMachine",
                            "Resources": [vm], "EventStatus": "Scheduled", "NotBefore": "Mon, 19 Sep 2026 18:29:47 GMT",
                            "Description": "", "EventSource": "Platform", "DurationInSeconds": -1})


def _imds(state: VmServices, request: Request) -> Response:
    if request.headers.get("Metadata") != "true" or request.headers.get("X-Forwarded-For"):
        return Response('{"error": "Bad request. Required metadata header not specified"}', 400)
    path = request.path
    if path == "/metadata/identity/oauth2/token":
        token = AUDIENCES.get(request.args.get("resource", ""))
        if token is None or "api-version" not in request.args:
            return Response('{"error": "invalid_resource"}', 400)
        return Response(json.dumps({"access_token": token, "expires_in": "3599", "token_type": "Bearer",
                                    "resource": request.args["resource"]}), 200, content_type="application/json")
    if path.startswith("/metadata/instance/compute/") and request.args.get("format") == "text":
        value = state.compute.get(path.rsplit("/", 1)[-1])
        return Response(value, 200) if value is not None else Response("not found", 404)
    if path == "/metadata/scheduledevents":
        return Response(json.dumps({"DocumentIncarnation": len(state.events), "Events": state.events}), 200,
                        content_type="application/json")
    return Response("not found", 404)


def _storage(state: VmServices, request: Request) -> Response:
    auth = request.headers.get("Authorization", "")
    if request.path.startswith("/secrets/"):
        if auth != f"Bearer {VAULT_TOKEN}":
            return Response('{"error": {"code": "Unauthorized"}}', 401)
        value = state.secrets.get(request.path[len("/secrets/"):])
        if value is None:
            return Response('{"error": {"code": "SecretNotFound"}}', 404)
        return Response(json.dumps({"value": value, "contentType": "application/base64"}), 200)
    callers = {f"Bearer {STORAGE_TOKEN}": "machine", f"Bearer {USER_TOKEN}": "user"}
    if auth not in callers or not request.headers.get("x-ms-version"):
        return Response("<Error><Code>AuthenticationFailed</Code></Error>", 403)
    state.blob_callers.append((request.method, callers[auth]))
    parts = request.path.lstrip("/").split("/", 2)
    if request.args.get("comp") == "list" and request.args.get("restype") == "container" and len(parts) >= 2:
        account, container = parts[0], parts[1]
        prefix = request.args.get("prefix", "")
        names = sorted(n for (a, c, n) in state.blobs if (a, c) == (account, container) and n.startswith(prefix))
        marker = request.args.get("marker", "")
        start = names.index(marker) if marker in names else 0
        page, rest = names[start:start + state.page_size], names[start + state.page_size:]
        body = "".join(f"<Blob><Name>{escape(n)}</Name><Properties><Last-Modified>Fri, 27 Nov 2026 09:00:00 GMT"
                       f"</Last-Modified><Etag>{_etag(state.blobs[(account, container, n)])}</Etag>"
                       f"<Content-Length>{len(state.blobs[(account, container, n)])}</Content-Length>"
                       "</Properties></Blob>" for n in page)
        nxt = f"<NextMarker>{escape(rest[0])}</NextMarker>" if rest else "<NextMarker />"
        return Response(f'<?xml version="1.0" encoding="utf-8"?><EnumerationResults><Blobs>{body}</Blobs>'
                        f"{nxt}</EnumerationResults>", 200, content_type="application/xml")
    if len(parts) != 3:
        return Response("<Error><Code>InvalidUri</Code></Error>", 400)
    key = (parts[0], parts[1], parts[2])
    if request.method == "PUT":
        if request.headers.get("x-ms-blob-type") != "BlockBlob":
            return Response("<Error><Code>MissingRequiredHeader</Code></Error>", 400)
        state.blobs[key] = request.get_data()
        return Response("", 201, headers={"ETag": _etag(state.blobs[key])})
    if request.method == "GET":
        data = state.blobs.get(key)
        if data is None:
            return Response("<Error><Code>BlobNotFound</Code></Error>", 404)
        return Response(data, 200, headers={"ETag": _etag(data)})
    return Response("", 405)


def _etag(data: bytes) -> str:
    import hashlib

    return f'"0x{hashlib.md5(data).hexdigest()[:16].upper()}"'


@dataclass
class RunningVmServices:
    state: VmServices
    imds_url: str  # http://127.0.0.1:P/metadata
    storage_url: str  # https://127.0.0.1:Q (Key Vault and path-style Blob)
    ca_bundle: Path


@contextmanager
def serve_vm_services(folder: Path, state: VmServices | None = None) -> Iterator[RunningVmServices]:
    state = state or VmServices()

    def app(handler: Any) -> Any:
        def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
            request = Request(environ)
            state.log.append((request.method, request.full_path))
            return handler(state, request)(environ, start_response)
        return wsgi

    cert = make_certificate(folder, "gpuplan fake vm services")
    imds = make_server("127.0.0.1", 0, app(_imds), threaded=True, request_handler=QuietHandler)
    storage = make_server("127.0.0.1", 0, app(_storage), threaded=True, request_handler=QuietHandler,
                          ssl_context=(str(cert.cert), str(cert.key)))
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
               for s in (imds, storage)]
    for thread in threads:
        thread.start()
    try:
        yield RunningVmServices(state=state, imds_url=f"http://127.0.0.1:{imds.server_port}/metadata",
                                storage_url=f"https://127.0.0.1:{storage.server_port}", ca_bundle=cert.cert)
    finally:
        for server in (imds, storage):
            server.shutdown()
        for thread in threads:
            thread.join(timeout=5)
