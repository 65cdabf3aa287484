"""A small fake of Secret Manager's REST API (v1) on 127.0.0.1, for the real client and the boot script's curl.

No Secret Manager emulator ships with the google packages, so the tests run the real `google-cloud-secret-manager`
client (REST transport) and the boot script's real `curl` against this werkzeug app, served from a thread of the
test process on a free port. It answers only what gpuplan uses:

- `POST /v1/projects/P/secrets?secretId=S` (create; 409 ALREADY_EXISTS for an existing id; ids must match
  `[A-Za-z0-9_-]{1,255}`, labels must follow the label rules);
- `POST /v1/projects/P/secrets/S:addVersion` (a new version; a `dataCrc32c` that does not match is a 400);
- `GET /v1/projects/P/secrets/S/versions/V:access` (V a number or `latest`; with `access_token` set, the request
  must carry `Authorization: Bearer <token>`, 403 otherwise: that is the VM's path);
- `DELETE /v1/projects/P/secrets/S` (403 PERMISSION_DENIED for an id in `refuse_deletes`);
- `GET /v1/projects/P/secrets?filter=F` with the filter terms gpuplan sends: `name:SUBSTRING` and
  `labels.KEY=VALUE` / `labels.KEY:VALUE`, joined by AND (anything else is a 400, so a changed filter is noticed;
  403 PERMISSION_DENIED with `refuse_lists`).

- `POST /v1/projects/P:testIamPermissions`: Resource Manager's projects.testIamPermissions
  (https://cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions): the asked permissions
  the caller holds (`caller_permissions`; None: all), `{}` when none (Google leaves an empty list out). It lives here
  because Secret Manager's launch-time permissions are the project's IAM policy: the tests point
  CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER at this fake too.

With `caller_permissions` set, create, addVersion, list and delete need secretmanager.secrets.create /
versions.add / secrets.list / secrets.delete: without one, 403 PERMISSION_DENIED "Permission 'P' denied for
resource 'R' (or it may not exist)." (the API's message shape, as the refusals above). The VM's `:access` is not
the caller's and is not checked against it.

Errors have the API's JSON shape (`error.code`, `message`, `status`, and `details` where the API sends them).
With `disabled` set the project has never enabled the API: every call answers what Google answers then, a 403
PERMISSION_DENIED whose ErrorInfo detail says SERVICE_DISABLED for secretmanager.googleapis.com (the body is
Google's, down to the message, the LocalizedMessage and Help details and the project *number* in them).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from werkzeug.routing import Map, Rule
from werkzeug.wrappers import Request, Response

from support.fakes.gcs_server import Running, _serve

_SECRET_ID = re.compile(r"[A-Za-z0-9_-]{1,255}")
_LABEL = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_TERM = re.compile(r"(name|labels\.[a-z0-9_-]+)\s*([:=])\s*\"?([^\s\"]*)\"?")


@dataclass
class StoredSecret:
    name: str  # projects/P/secrets/S
    labels: dict[str, str]
    versions: list[bytes] = field(default_factory=list)
    created: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).isoformat())


@dataclass
class FakeSecretManager:
    """The service's state, and what tests inspect: `accesses` (resource, carried the token), `deleted` ids."""

    project: str = "gpuplan-test"
    access_token: str | None = None
    secrets: dict[str, StoredSecret] = field(default_factory=dict)  # secret id -> secret
    accesses: list[tuple[str, bool]] = field(default_factory=list)
    deleted: list[str] = field(default_factory=list)
    fail_creates: int = 0  # the next N creates answer 403 (a caller without secretmanager.secrets.create)
    refuse_deletes: set[str] = field(default_factory=set)  # ids whose delete answers 403 (outside the caller's IAM)
    refuse_lists: bool = False  # a list answers 403 (a caller without secretmanager.secrets.list)
    disabled: bool = False  # the API is not enabled in the project: every call answers 403 SERVICE_DISABLED
    caller_permissions: set[str] | None = None  # the caller's IAM permissions on the project (None: all)
    denied: list[str] = field(default_factory=list)  # permissions a call lacked, in order
    project_number: str = "123456789012"  # what Google's errors name the project by
    lock: threading.Lock = field(default_factory=threading.Lock)

    def value(self, secret_id: str, version: str = "latest") -> bytes:
        versions = self.get(secret_id).versions
        if not versions:
            raise ApiError(404, f"Secret [{secret_id}] has no versions.", "NOT_FOUND")
        if version == "latest":
            return versions[-1]
        if not version.isdigit() or not 1 <= int(version) <= len(versions):
            raise ApiError(404, f"Secret Version [{secret_id}/{version}] not found.", "NOT_FOUND")
        return versions[int(version) - 1]

    def get(self, secret_id: str) -> StoredSecret:
        found = self.secrets.get(secret_id)
        if found is None:
            raise ApiError(404, f"Secret [projects/{self.project}/secrets/{secret_id}] not found or has no versions.",
                           "NOT_FOUND")
        return found


class ApiError(Exception):
    def __init__(self, status: int, message: str, code: str, details: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.code, self.details = status, message, code, details

    def response(self) -> Response:
        error: dict[str, Any] = {"code": self.status, "message": self.message, "status": self.code}
        if self.details:
            error["details"] = self.details
        return Response(json.dumps({"error": error}), status=self.status, mimetype="application/json")


def service_disabled(project_number: str) -> ApiError:
    """Google's answer to any Secret Manager call in a project that never enabled the API (or disabled it)."""
    service = "secretmanager.googleapis.com"
    url = f"https://console.developers.google.com/apis/api/{service}/overview?project={project_number}"
    message = (f"Secret Manager API has not been used in project {project_number} before or it is disabled. "
               f"Enable it by visiting {url} then retry. If you enabled this API recently, wait a few minutes for "
               "the action to propagate to our systems and retry.")
    return ApiError(403, message, "PERMISSION_DENIED", details=[
        {"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "SERVICE_DISABLED",
         "domain": "googleapis.com",
         "metadata": {"consumer": f"projects/{project_number}", "service": service,
                      "serviceTitle": "Secret Manager API", "containerInfo": project_number,
                      "activationUrl": url}},
        {"@type": "type.googleapis.com/google.rpc.LocalizedMessage", "locale": "en-US", "message": message},
        {"@type": "type.googleapis.com/google.rpc.Help",
         "links": [{"description": "Google developers console API activation", "url": url}]},
    ])


class SecretManagerApp:
    """The WSGI app: routes to FakeSecretManager."""

    def __init__(self, state: FakeSecretManager) -> None:
        self.state = state
        self.urls = Map([
            Rule("/v1/projects/<project_action>", endpoint="test_permissions", methods=["POST"]),
            Rule("/v1/projects/<project>/secrets", endpoint="secrets", methods=["GET", "POST"]),
            Rule("/v1/projects/<project>/secrets/<secret_action>", endpoint="secret",
                 methods=["POST", "DELETE", "GET"]),
            Rule("/v1/projects/<project>/secrets/<secret>/versions/<version_action>", endpoint="version",
                 methods=["GET"]),
        ])

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        try:
            endpoint, args = self.urls.bind_to_environ(environ).match()
            if endpoint == "test_permissions":
                project, _, action = args.pop("project_action").partition(":")
                if action != "testIamPermissions":
                    raise ApiError(404, "not found", "NOT_FOUND")
                args["project"] = project
            elif self.state.disabled:
                raise service_disabled(self.state.project_number)
            if args["project"] != self.state.project:
                raise ApiError(403, f"Permission denied on project {args['project']}", "PERMISSION_DENIED")
            with self.state.lock:
                body = getattr(self, f"_{endpoint}")(request, args)
            response = Response(json.dumps(body), mimetype="application/json")
        except ApiError as exc:
            response = exc.response()
        except Exception as exc:  # werkzeug's NotFound / MethodNotAllowed and friends
            response = ApiError(getattr(exc, "code", 500) or 500, str(exc), "INVALID_ARGUMENT").response()
        return response(environ, start_response)

    def _test_permissions(self, request: Request, args: dict[str, str]) -> dict[str, Any]:
        asked = list((request.get_json(force=True, silent=True) or {}).get("permissions") or [])
        held = self.state.caller_permissions
        granted = [p for p in asked if held is None or p in held]
        return {"permissions": granted} if granted else {}

    def _require(self, permission: str, resource: str) -> None:
        held = self.state.caller_permissions
        if held is not None and permission not in held:
            self.state.denied.append(permission)
            raise ApiError(403, f"Permission '{permission}' denied for resource '{resource}' (or it may not exist).",
                           "PERMISSION_DENIED")

    def _name(self, secret_id: str) -> str:
        return f"projects/{self.state.project}/secrets/{secret_id}"

    def _resource(self, secret: StoredSecret) -> dict[str, Any]:
        return {"name": secret.name, "labels": secret.labels, "replication": {"automatic": {}},
                "createTime": secret.created, "etag": f'"{len(secret.versions)}"'}

    def _secrets(self, request: Request, args: dict[str, str]) -> dict[str, Any]:
        project = f"projects/{self.state.project}"
        self._require("secretmanager.secrets.create" if request.method == "POST" else "secretmanager.secrets.list",
                      project)
        if request.method == "POST":
            return self._create(request)
        if self.state.refuse_lists:
            raise ApiError(403, f"Permission 'secretmanager.secrets.list' denied on resource "
                           f"'projects/{self.state.project}' (or it may not exist).", "PERMISSION_DENIED")
        terms = _parse_filter(request.args.get("filter", ""))
        found = [self._resource(s) for sid, s in sorted(self.state.secrets.items()) if _matches(sid, s, terms)]
        return {"secrets": found, "totalSize": len(found)} if found else {}

    def _create(self, request: Request) -> dict[str, Any]:
        if self.state.fail_creates:
            self.state.fail_creates -= 1
            raise ApiError(403, "Permission 'secretmanager.secrets.create' denied", "PERMISSION_DENIED")
        secret_id = request.args.get("secretId", "")
        if not _SECRET_ID.fullmatch(secret_id):
            raise ApiError(400, f"Invalid secret id {secret_id!r}", "INVALID_ARGUMENT")
        body = request.get_json(force=True, silent=True) or {}
        if "automatic" not in (body.get("replication") or {}) and "userManaged" not in (body.get("replication") or {}):
            raise ApiError(400, "Secret.replication is required", "INVALID_ARGUMENT")
        labels = dict(body.get("labels") or {})
        if any(not _LABEL.fullmatch(k) or not _LABEL_VALUE.fullmatch(str(v)) for k, v in labels.items()):
            raise ApiError(400, f"invalid labels {labels!r}", "INVALID_ARGUMENT")
        if secret_id in self.state.secrets:
            raise ApiError(409, f"Secret [{self._name(secret_id)}] already exists.", "ALREADY_EXISTS")
        secret = StoredSecret(self._name(secret_id), labels)
        self.state.secrets[secret_id] = secret
        return self._resource(secret)

    def _secret(self, request: Request, args: dict[str, str]) -> dict[str, Any]:
        secret_id, _, action = args["secret_action"].partition(":")
        if request.method == "DELETE" and not action:
            self._require("secretmanager.secrets.delete", self._name(secret_id))
        elif request.method == "POST" and action == "addVersion":
            self._require("secretmanager.versions.add", self._name(secret_id))
        secret = self.state.get(secret_id)
        if request.method == "DELETE" and not action:
            if secret_id in self.state.refuse_deletes:
                raise ApiError(403, f"Permission 'secretmanager.secrets.delete' denied for resource "
                               f"'{self._name(secret_id)}'", "PERMISSION_DENIED")
            del self.state.secrets[secret_id]
            self.state.deleted.append(secret_id)
            return {}
        if request.method == "GET" and not action:
            return self._resource(secret)
        if request.method == "POST" and action == "addVersion":
            payload = (request.get_json(force=True, silent=True) or {}).get("payload") or {}
            data = base64.b64decode(payload.get("data", ""))
            if "dataCrc32c" in payload and int(payload["dataCrc32c"]) != _crc32c(data):
                raise ApiError(400, "Checksum mismatch: the payload's data_crc32c does not match", "INVALID_ARGUMENT")
            secret.versions.append(data)
            return {"name": f"{secret.name}/versions/{len(secret.versions)}", "state": "ENABLED",
                    "createTime": dt.datetime.now(dt.timezone.utc).isoformat()}
        raise ApiError(400, f"unsupported in this fake: {request.method} {request.path}", "INVALID_ARGUMENT")

    def _version(self, request: Request, args: dict[str, str]) -> dict[str, Any]:
        version, _, action = args["version_action"].partition(":")
        resource = self._name(args["secret"])
        had_token = (self.state.access_token is not None
                     and request.headers.get("Authorization") == f"Bearer {self.state.access_token}")
        if action != "access":
            raise ApiError(400, f"unsupported in this fake: {request.path}", "INVALID_ARGUMENT")
        self.state.accesses.append((resource, had_token))
        if self.state.access_token is not None and not had_token:
            raise ApiError(403, f"Permission 'secretmanager.versions.access' denied for resource '{resource}'",
                           "PERMISSION_DENIED")
        data = self.state.value(args["secret"], version)
        number = len(self.state.get(args["secret"]).versions) if version == "latest" else int(version)
        return {"name": f"{resource}/versions/{number}",
                "payload": {"data": base64.b64encode(data).decode(), "dataCrc32c": str(_crc32c(data))}}


def _parse_filter(text: str) -> list[tuple[str, str, str]]:
    """`name:x AND labels.k=v` -> [("name", ":", "x"), ("labels.k", "=", "v")]; anything else is a 400."""
    terms = []
    for part in re.split(r"\s+AND\s+", text.strip()) if text.strip() else []:
        found = _TERM.fullmatch(part.strip())
        if not found:
            raise ApiError(400, f"this fake does not understand the filter term {part!r}", "INVALID_ARGUMENT")
        terms.append((found.group(1), found.group(2), found.group(3)))
    return terms


def _matches(secret_id: str, secret: StoredSecret, terms: list[tuple[str, str, str]]) -> bool:
    for key, op, value in terms:
        if key == "name":
            if value not in secret_id:
                return False
        else:
            have = secret.labels.get(key.removeprefix("labels."))
            if have is None or (op == "=" and have != value) or (op == ":" and value not in have):
                return False
    return True


def _crc32c(data: bytes) -> int:
    import google_crc32c

    return int(google_crc32c.value(data))


@dataclass
class RunningSecretManager(Running):
    """A served fake; `endpoint` is gcloud's override form for CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER."""

    @property
    def endpoint(self) -> str:
        return f"{self.url}/"


@contextmanager
def serve(state: FakeSecretManager | None = None, host: str = "127.0.0.1") -> Iterator[RunningSecretManager]:
    """Serve a fake Secret Manager REST API on a free loopback port in a thread of this process."""
    state = state or FakeSecretManager()
    with _serve(SecretManagerApp(state), state, host, "fake-secretmanager") as running:
        yield RunningSecretManager(running.state, running.host, running.port)
