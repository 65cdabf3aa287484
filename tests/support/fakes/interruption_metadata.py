"""A fake of the two metadata endpoints that announce a spot interruption, on 127.0.0.1 (the boot script's watch).

EC2 IMDSv2 (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/configuring-instance-metadata-service.html):
`PUT /latest/api/token` with `X-aws-ec2-metadata-token-ttl-seconds` (1-21600; without it: 400) returns a token;
a `GET` under `/latest/meta-data/` without a valid `X-aws-ec2-metadata-token` is refused with 401 (instances
gpuplan launches require IMDSv2: HttpTokens=required). `spot/instance-action` is 404 until EC2 schedules the
interruption, then `{"action": "terminate", "time": "..."}`
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html).

GCE (https://cloud.google.com/compute/docs/metadata/querying-metadata): every request needs
`Metadata-Flavor: Google` (else 403); `instance/machine-type` and the `instance/network-interfaces/` listing
(https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys) say what the VM is; `instance/preempted`
is `FALSE`, then `TRUE` once the VM is preempted
(https://cloud.google.com/compute/docs/instances/create-use-preemptible#detecting_if_an_instance_was_preempted).

`announce()` is what the cloud does two minutes (AWS) or ~30 s (GCE) before taking the machine.
"""

from __future__ import annotations

import datetime as dt
import json
import secrets
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from werkzeug.wrappers import Request, Response

from support.fakes.wsgi import serve_wsgi


@dataclass
class InterruptionMetadata:
    """The state: whether an interruption is announced, the tokens handed out, and what was asked."""

    action: str | None = None  # AWS: terminate | stop | hibernate once announced
    preempted: bool = False  # GCE
    machine_type: str = "n1-standard-8"  # GCE `instance/machine-type` (the last part of projects/N/machineTypes/T)
    nics: int = 1  # GCE `instance/network-interfaces/` lists 0/ .. nics-1/
    tokens: set[str] = field(default_factory=set)
    requests: list[tuple[str, str, int]] = field(default_factory=list)  # (method, path, status)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def announce(self, action: str = "terminate") -> None:
        self.action = action
        self.preempted = True

    def polls(self, path_end: str) -> int:
        with self.lock:
            return sum(1 for _m, p, _s in self.requests if p.endswith(path_end))


class InterruptionMetadataApp:
    def __init__(self, state: InterruptionMetadata) -> None:
        self.state = state

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        response = self._aws(request) if request.path.startswith("/latest/") else self._gce(request)
        with self.state.lock:
            self.state.requests.append((request.method, request.path, response.status_code))
        return response(environ, start_response)

    def _aws(self, request: Request) -> Response:
        if request.path == "/latest/api/token":
            if request.method != "PUT":
                return Response("", status=405)
            ttl = request.headers.get("X-aws-ec2-metadata-token-ttl-seconds", "")
            if not ttl.isdigit() or not 1 <= int(ttl) <= 21600:
                return Response("", status=400)
            token = secrets.token_urlsafe(16)
            with self.state.lock:
                self.state.tokens.add(token)
            return Response(token)
        if request.headers.get("X-aws-ec2-metadata-token") not in self.state.tokens:
            return Response("", status=401)
        if request.path == "/latest/meta-data/spot/instance-action" and request.method == "GET":
            if self.state.action is None:
                return Response("Not Found", status=404)
            when = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M:%SZ")
            return Response(json.dumps({"action": self.state.action, "time": when}), mimetype="text/plain")
        return Response("Not Found", status=404)

    def _gce(self, request: Request) -> Response:
        if request.headers.get("Metadata-Flavor") != "Google":
            return Response("Missing Metadata-Flavor:Google header.", status=403)
        if request.path == "/computeMetadata/v1/instance/preempted" and request.method == "GET":
            return Response("TRUE" if self.state.preempted else "FALSE", mimetype="application/text")
        if request.path == "/computeMetadata/v1/instance/machine-type":
            return Response(f"projects/123456789/machineTypes/{self.state.machine_type}", mimetype="application/text")
        if request.path == "/computeMetadata/v1/instance/network-interfaces/":
            return Response("".join(f"{i}/\n" for i in range(self.state.nics)), mimetype="application/text")
        return Response("not found", status=404)


@dataclass
class ServedMetadata:
    state: InterruptionMetadata
    port: int

    @property
    def imds_url(self) -> str:
        """The boot script's IMDS_URL."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def metadata_url(self) -> str:
        """The boot script's METADATA_URL (GCE)."""
        return f"http://127.0.0.1:{self.port}/computeMetadata/v1"


@contextmanager
def serve_interruption_metadata() -> Iterator[ServedMetadata]:
    state = InterruptionMetadata()
    with serve_wsgi(InterruptionMetadataApp(state), name="fake-interruption-metadata") as port:
        yield ServedMetadata(state, port)
