"""A small fake of the Cloud Storage JSON API (and of the GCE metadata server's token) on 127.0.0.1.

No GCS emulator ships with the google packages, so the tests run the real `google.cloud.storage` client, and the
boot script's real `curl` commands, against this werkzeug app served from a thread of the test process on a free
port. It answers only what gpuplan uses:

- `POST /upload/storage/v1/b/B/o?uploadType=media&name=N` (the boot script) and `uploadType=multipart` (the
  client's `upload_from_string`, which tests use to seed objects);
- `GET /storage/v1/b/B/o?prefix=P` (list, with the real API's `items`/`nextPageToken` shape, pages of
  `page_size`, and the `fields` partial response the boot script asks for);
- `GET /storage/v1/b/B/o/N?alt=media` and `GET /download/storage/v1/b/B/o/N?alt=media` (the object's bytes, with
  `x-goog-hash` so the client can verify them), and `GET .../o/N` (its metadata).

Rules of the real service kept because gpuplan depends on them: an unknown bucket is a 404; every write makes a
new `generation` (what fetch_outputs uses to skip unchanged objects); with `upload_token` set, an upload must
carry `Authorization: Bearer <that token>` (401 otherwise); with `can_overwrite=False` (an account holding only
roles/storage.objectCreator) replacing an existing object is a 403, because GCS needs storage.objects.delete to
replace one.

`serve_metadata(token)` is the metadata server's two paths the boot script calls: the service account's token
(`Metadata-Flavor: Google` required, as on GCE) and guest-attribute PUTs.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import itertools
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from support.fakes.wsgi import serve_wsgi


@dataclass
class StoredObject:
    bucket: str
    name: str
    data: bytes
    content_type: str
    generation: int
    updated: str


@dataclass
class FakeGcs:
    """The service's state: buckets, objects, and what the tests inspect (`uploads`: (name, carried the token);
    `media_reads`: names downloaded)."""

    buckets: set[str] = field(default_factory=lambda: {"gpuplan-runs"})
    upload_token: str | None = None
    can_overwrite: bool = True
    read_token: str | None = None  # set: a list or read must carry `Authorization: Bearer <it>` (a private bucket)
    page_size: int = 1000  # the list's page (the real default and maximum); tests set it small to force paging
    # set: every call's bearer token must pass it (a token the fake metadata server issued and that has not
    # expired: FakeMetadata.valid), instead of matching upload_token / read_token
    accepts: Callable[[str], bool] | None = None
    delay_s: float = 0.0  # each upload and download takes this long (so a token can expire during a long copy)
    objects: dict[tuple[str, str], StoredObject] = field(default_factory=dict)
    uploads: list[tuple[str, bool]] = field(default_factory=list)
    media_reads: list[str] = field(default_factory=list)  # object names whose bytes were downloaded
    # The launching caller's permissions on the buckets, for buckets.testIamPermissions
    # (https://cloud.google.com/storage/docs/json_api/v1/buckets/testIamPermissions; None: all). The object calls are
    # the VM's (its token, `accepts`), not checked against it.
    caller_permissions: set[str] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    _generations: Iterator[int] = field(default_factory=lambda: itertools.count(1_700_000_000_000_001))

    def put(self, bucket: str, name: str, data: bytes, content_type: str = "application/octet-stream") -> StoredObject:
        if bucket not in self.buckets:
            raise ApiError(404, "The specified bucket does not exist.", "notFound")
        with self.lock:
            if (bucket, name) in self.objects and not self.can_overwrite:
                raise ApiError(403, "caller does not have storage.objects.delete access to the Google Cloud "
                               f"Storage object {name!r} (needed to replace it)", "forbidden")
            obj = StoredObject(bucket, name, data, content_type or "application/octet-stream",
                               next(self._generations), dt.datetime.now(dt.timezone.utc).isoformat())
            self.objects[(bucket, name)] = obj
            return obj

    def get(self, bucket: str, name: str) -> StoredObject:
        if bucket not in self.buckets:
            raise ApiError(404, "The specified bucket does not exist.", "notFound")
        obj = self.objects.get((bucket, name))
        if obj is None:
            raise ApiError(404, f"No such object: {bucket}/{name}", "notFound")
        return obj

    def list(self, bucket: str, prefix: str = "") -> list[StoredObject]:
        if bucket not in self.buckets:
            raise ApiError(404, "The specified bucket does not exist.", "notFound")
        with self.lock:
            return sorted((o for (b, n), o in self.objects.items() if b == bucket and n.startswith(prefix)),
                          key=lambda o: o.name)

    def read(self, bucket: str, name: str) -> bytes:
        return self.get(bucket, name).data


class ApiError(Exception):
    def __init__(self, status: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.status, self.message, self.reason = status, message, reason

    def response(self) -> Response:
        body = {"error": {"code": self.status, "message": self.message,
                          "errors": [{"message": self.message, "domain": "global", "reason": self.reason}]}}
        return Response(json.dumps(body), status=self.status, mimetype="application/json")


PAGE_SIZE = 1000


class GcsApp:
    """The WSGI app: routes to FakeGcs, errors in the JSON API's shape."""

    def __init__(self, state: FakeGcs) -> None:
        self.state = state
        self.urls = Map([
            Rule("/upload/storage/v1/b/<bucket>/o", endpoint="upload", methods=["POST"]),
            Rule("/storage/v1/b/<bucket>/o", endpoint="list", methods=["GET"]),
            Rule("/storage/v1/b/<bucket>/iam/testPermissions", endpoint="test_permissions", methods=["GET"]),
            Rule("/storage/v1/b/<bucket>/o/<path:name>", endpoint="object", methods=["GET"]),
            Rule("/download/storage/v1/b/<bucket>/o/<path:name>", endpoint="media", methods=["GET"]),
        ])

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            endpoint, args = self.urls.bind_to_environ(environ).match()
            response = self.dispatch(request, endpoint, args)
        except ApiError as exc:
            response = exc.response()
        except HTTPException as exc:
            response = ApiError(exc.code or 500, exc.description or "error", "invalid").response()
        return response(environ, start_response)

    def dispatch(self, request: Request, endpoint: str, args: dict[str, str]) -> Response:
        bucket = args["bucket"]
        if endpoint == "test_permissions":  # buckets.testIamPermissions: the asked ones the caller holds
            if bucket not in self.state.buckets:
                raise ApiError(404, "The specified bucket does not exist.", "notFound")
            held = self.state.caller_permissions
            granted = [p for p in request.args.getlist("permissions") if held is None or p in held]
            body = {"kind": "storage#testIamPermissionsResponse", **({"permissions": granted} if granted else {})}
            return Response(json.dumps(body), mimetype="application/json")
        if endpoint == "upload":
            return self._json(request, self._upload(request, bucket))
        if not self._authorized(request, self.state.read_token):
            raise ApiError(401, "Anonymous caller does not have storage.objects.get access", "required")
        if endpoint == "list":
            found = self.state.list(bucket, request.args.get("prefix", ""))
            start = int(request.args.get("pageToken") or 0)
            size = min(self.state.page_size, int(request.args.get("maxResults") or PAGE_SIZE))
            page = found[start:start + size]
            body: dict[str, Any] = {"kind": "storage#objects", "items": [self._resource(request, o) for o in page]}
            if start + size < len(found):
                body["nextPageToken"] = str(start + size)
            return Response(json.dumps(_partial(body, request.args.get("fields"))), mimetype="application/json")
        obj = self.state.get(bucket, args["name"])
        if endpoint == "media" or request.args.get("alt") == "media":
            time.sleep(self.state.delay_s)
            self.state.media_reads.append(obj.name)
            headers = {"x-goog-hash": f"crc32c={_crc32c(obj.data)},md5={_md5(obj.data)}",
                       "x-goog-generation": str(obj.generation)}
            return Response(obj.data, mimetype=obj.content_type, headers=headers)
        return self._json(request, obj)

    def _authorized(self, request: Request, expected: str | None) -> bool:
        header = request.headers.get("Authorization", "")
        if self.state.accepts is not None:
            return header.startswith("Bearer ") and self.state.accepts(header.removeprefix("Bearer "))
        return expected is None or header == f"Bearer {expected}"

    def _upload(self, request: Request, bucket: str) -> StoredObject:
        time.sleep(self.state.delay_s)
        had_token = self._authorized(request, self.state.upload_token)
        kind = request.args.get("uploadType")
        if kind == "media":
            name = request.args.get("name", "")
            data, content_type = request.get_data(), request.headers.get("Content-Type", "")
        elif kind == "multipart":
            meta, data, content_type = _multipart(request)
            name = str(meta.get("name") or request.args.get("name") or "")
            content_type = str(meta.get("contentType") or content_type)
        else:
            raise ApiError(400, f"unsupported uploadType {kind!r} in this fake", "invalid")
        if not name:
            raise ApiError(400, "Required parameter: name", "required")
        self.state.uploads.append((name, had_token))
        if not had_token:
            raise ApiError(401, "Anonymous caller does not have storage.objects.create access", "required")
        return self.state.put(bucket, name, data, content_type)

    def _json(self, request: Request, obj: StoredObject) -> Response:
        return Response(json.dumps(self._resource(request, obj)), mimetype="application/json")

    @staticmethod
    def _resource(request: Request, obj: StoredObject) -> dict[str, Any]:
        base = request.host_url.rstrip("/")
        quoted = quote(obj.name, safe="")
        return {
            "kind": "storage#object", "id": f"{obj.bucket}/{obj.name}/{obj.generation}", "name": obj.name,
            "bucket": obj.bucket, "generation": str(obj.generation), "metageneration": "1",
            "contentType": obj.content_type, "size": str(len(obj.data)), "md5Hash": _md5(obj.data),
            "crc32c": _crc32c(obj.data), "etag": f"C{obj.generation % 10**8}", "updated": obj.updated,
            "timeCreated": obj.updated, "selfLink": f"{base}/storage/v1/b/{obj.bucket}/o/{quoted}",
            "mediaLink": f"{base}/download/storage/v1/b/{obj.bucket}/o/{quoted}?generation={obj.generation}"
                         "&alt=media",
        }


def _partial(body: dict[str, Any], fields: str | None) -> dict[str, Any]:
    """The `fields` partial response (https://cloud.google.com/storage/docs/json_api#partial-response), in the one
    form the list uses here: top-level names, and `items(a,b)` for the keys kept in each item."""
    if not fields:
        return body
    kept: dict[str, Any] = {}
    for part in re.findall(r"\w+(?:\([^)]*\))?", fields):
        key, _, inner = part.partition("(")
        if key not in body:
            continue
        if inner and key == "items":
            names = set(inner.rstrip(")").split(","))
            kept[key] = [{k: v for k, v in item.items() if k in names} for item in body[key]]
        else:
            kept[key] = body[key]
    return kept


def _multipart(request: Request) -> tuple[dict[str, Any], bytes, str]:
    """(metadata, media, media content type) of a `multipart/related` upload, parsed by its boundary."""
    found = re.search(r'boundary="?([^";]+)"?', request.headers.get("Content-Type", ""))
    if not found:
        raise ApiError(400, "multipart upload without a boundary", "invalid")
    parts = request.get_data().split(b"--" + found.group(1).encode())[1:-1]
    if len(parts) != 2:
        raise ApiError(400, "a multipart upload has two parts: metadata and media", "invalid")
    sections = []
    for part in parts:
        head, _, body = part.lstrip(b"\r\n").partition(b"\r\n\r\n")
        sections.append((head.decode("latin-1"), body[:-2] if body.endswith(b"\r\n") else body))
    media_type = re.search(r"(?im)^content-type:\s*(.+)$", sections[1][0])
    return json.loads(sections[0][1] or b"{}"), sections[1][1], media_type.group(1).strip() if media_type else ""


def _md5(data: bytes) -> str:
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def _crc32c(data: bytes) -> str:
    import google_crc32c

    return base64.b64encode(int(google_crc32c.value(data)).to_bytes(4, "big")).decode()


@dataclass
class FakeMetadata:
    """The metadata server's state: the token it hands out, and the guest attributes written to it."""

    token: str | None  # None: the VM has no service account (GCE answers 404 for its token)
    guest_attributes: dict[str, str] = field(default_factory=dict)
    token_requests: int = 0
    # set: each request gets a new token (`token-N`) that expires this many seconds later, as the real server's
    # cached token may have only ~4 minutes left when handed out
    lifetime_s: float | None = None
    issued: dict[str, float] = field(default_factory=dict)  # token -> monotonic expiry

    def valid(self, token: str) -> bool:
        """Whether `token` was issued here and has not expired (FakeGcs.accepts)."""
        expiry = self.issued.get(token)
        return expiry is not None and time.monotonic() < expiry


class MetadataApp:
    def __init__(self, state: FakeMetadata) -> None:
        self.state = state

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        path = request.path
        if request.headers.get("Metadata-Flavor") != "Google":
            response = Response("Missing Metadata-Flavor:Google header.", status=403)
        elif path.endswith("/service-accounts/default/token") and self.state.token is None:
            response = Response("service account not found", status=404)
        elif path == "/computeMetadata/v1/instance/service-accounts/default/token" and request.method == "GET":
            self.state.token_requests += 1
            token, lifetime = self.state.token, self.state.lifetime_s or 3599
            if self.state.lifetime_s is not None:
                token = f"{token}-{self.state.token_requests}"
                self.state.issued[token] = time.monotonic() + lifetime
            response = Response(json.dumps({"access_token": token, "expires_in": int(lifetime),
                                            "token_type": "Bearer"}), mimetype="application/json")
        elif path.startswith("/computeMetadata/v1/instance/guest-attributes/") and request.method == "PUT":
            key = path.split("/guest-attributes/", 1)[1]
            self.state.guest_attributes[key] = request.get_data(as_text=True)
            response = Response("")
        else:
            response = Response("not found", status=404)
        return response(environ, start_response)


@dataclass
class Running:
    """A served fake: `state` to inspect, `url` its base address."""

    state: Any
    host: str
    port: int

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"


@contextmanager
def _serve(app: Any, state: Any, host: str, name: str) -> Iterator[Running]:
    with serve_wsgi(app, host, name) as port:
        yield Running(state, host, port)


@contextmanager
def serve(state: FakeGcs | None = None, host: str = "127.0.0.1") -> Iterator[Running]:
    """Serve a fake GCS JSON API on a free loopback port in a thread of this process."""
    state = state or FakeGcs()
    with _serve(GcsApp(state), state, host, "fake-gcs") as running:
        yield running


@contextmanager
def serve_metadata(token: str | None, host: str = "127.0.0.1", lifetime_s: float | None = None) -> Iterator[Running]:
    """Serve the metadata server's token and guest-attribute paths; the base URL for the boot script is
    `<url>/computeMetadata/v1`."""
    state = FakeMetadata(token, lifetime_s=lifetime_s)
    with _serve(MetadataApp(state), state, host, "fake-metadata") as running:
        yield running
