"""A real OCI registry on 127.0.0.1: Debian's `docker-registry` (distribution 2.8), images pushed through its API.

Images are pushed the way any client pushes (OCI distribution spec: blob uploads by POST then PUT `?digest=`,
manifests by PUT), so the registry checks every digest and reference itself. `token_auth=True` starts it with
`auth: token` (https://distribution.github.io/distribution/about/configuration/#token): it then answers 401 with a
Bearer challenge naming a token service; `TokenService` is that service, signing the registry's JWTs (RS256, its
certificate in the `x5c` header, the certificate the registry's `rootcertbundle` trusts) for anonymous pulls, as
Docker Hub's auth.docker.io does for public repositories.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import io
import json
import os
import shutil
import socket
import subprocess
import tarfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from werkzeug.wrappers import Request, Response

from support.fakes.wsgi import serve_wsgi

MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
SERVICE = "gpuplan-test-registry"
ISSUER = "gpuplan-test-token-service"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenService:
    """Issues tokens for any repository to anyone (as for a public repository), and records what was asked."""

    key: Any
    cert_der: bytes
    requests: list[dict[str, str]] = field(default_factory=list)

    def token(self, scope: str) -> str:
        now = int(time.time())
        access = []
        if scope.startswith("repository:"):
            _kind, name, actions = scope.split(":", 2)
            access = [{"type": "repository", "name": name, "actions": actions.split(",")}]
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(self.cert_der).decode()]}
        claims = {"iss": ISSUER, "sub": "", "aud": SERVICE, "exp": now + 300, "nbf": now - 10, "iat": now,
                  "jti": os.urandom(8).hex(), "access": access}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64url(signature)}"

    def __call__(self, environ: Any, start_response: Any) -> Any:
        request = Request(environ)
        self.requests.append({"path": request.path, "service": request.args.get("service", ""),
                              "scope": request.args.get("scope", ""),
                              "authorization": request.headers.get("Authorization", "")})
        body = json.dumps({"token": self.token(request.args.get("scope", "")), "expires_in": 300})
        return Response(body, mimetype="application/json")(environ, start_response)


def _token_service(folder: Path) -> TokenService:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ISSUER)])
    now = dt.datetime.now(dt.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    (folder / "token-ca.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return TokenService(key, cert.public_bytes(serialization.Encoding.DER))


@dataclass
class Registry:
    host: str  # 127.0.0.1:PORT, as an image reference names it

    def _url(self, path: str) -> str:
        return f"http://{self.host}/v2/{path}"

    def _put_blob(self, repo: str, data: bytes, auth: str | None) -> str:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        start = urllib.request.Request(self._url(f"{repo}/blobs/uploads/"), method="POST", data=b"",
                                       headers={"Authorization": auth} if auth else {})
        with urllib.request.urlopen(start, timeout=10) as resp:
            location = resp.headers["Location"]
        if location.startswith("/"):
            location = f"http://{self.host}{location}"
        sep = "&" if "?" in location else "?"
        put = urllib.request.Request(f"{location}{sep}digest={digest}", data=data, method="PUT",
                                     headers={"Content-Type": "application/octet-stream",
                                              **({"Authorization": auth} if auth else {})})
        urllib.request.urlopen(put, timeout=10).close()
        return digest

    def _put_manifest(self, repo: str, ref: str, doc: dict[str, Any], auth: str | None) -> str:
        body = json.dumps(doc).encode()
        req = urllib.request.Request(self._url(f"{repo}/manifests/{ref}"), data=body, method="PUT",
                                     headers={"Content-Type": doc["mediaType"],
                                              **({"Authorization": auth} if auth else {})})
        urllib.request.urlopen(req, timeout=10).close()
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def push_image(self, repo: str, tag: str, archs: list[str], *, attestation: bool = False,
                   auth: str | None = None) -> None:
        """Push `repo:tag` built for `archs`: one architecture -> a plain image manifest; several -> an image index
        (with a build-attestation entry of platform unknown/unknown when `attestation`, as buildx pushes)."""
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w:gz") as tar:
            info = tarfile.TarInfo("hello.txt")
            payload = f"{repo}:{tag}".encode()
            info.size = len(payload)
            tar.addfile(info, io.BytesIO(payload))
        layer = buf.getvalue()
        layer_digest = self._put_blob(repo, layer, auth)
        entries = []
        for arch in archs:
            config = json.dumps({"architecture": arch, "os": "linux", "rootfs": {"type": "layers", "diff_ids": []},
                                 "config": {}}).encode()
            config_digest = self._put_blob(repo, config, auth)
            manifest = {"schemaVersion": 2, "mediaType": MANIFEST,
                        "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                                   "digest": config_digest, "size": len(config)},
                        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar+gzip",
                                    "digest": layer_digest, "size": len(layer)}]}
            if len(archs) == 1 and not attestation:
                self._put_manifest(repo, tag, manifest, auth)
                return
            digest = self._put_manifest(repo, f"{tag}-{arch}", manifest, auth)
            entries.append({"mediaType": MANIFEST, "digest": digest, "size": len(json.dumps(manifest)),
                            "platform": {"architecture": arch, "os": "linux"}})
        if attestation:
            entries.append({**entries[0], "platform": {"architecture": "unknown", "os": "unknown"}})
        self._put_manifest(repo, tag, {"schemaVersion": 2, "mediaType": INDEX, "manifests": entries}, auth)


@contextmanager
def serve_registry(folder: Path, *, token_auth: bool = False) -> Iterator[tuple[Registry, TokenService | None]]:
    """Start `docker-registry serve` on 127.0.0.1 (skip where the Debian package is absent)."""
    binary = shutil.which("docker-registry")
    if binary is None:
        pytest.skip("docker-registry is not installed (scripts/test-services.sh installs it)")
    folder.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    lines = ["version: 0.1", "log:", "  level: error", "storage:", "  filesystem:",
             f"    rootdirectory: {folder / 'data'}", "http:", f"  addr: 127.0.0.1:{port}"]
    with _tokens(folder) if token_auth else contextlib.nullcontext() as tokens:
        if tokens is not None:
            _service, token_port = tokens
            lines += ["auth:", "  token:", f"    realm: http://127.0.0.1:{token_port}/token",
                      f"    service: {SERVICE}", f"    issuer: {ISSUER}",
                      f"    rootcertbundle: {folder / 'token-ca.pem'}"]
        (folder / "config.yml").write_text("\n".join(lines) + "\n")
        proc = subprocess.Popen([binary, "serve", str(folder / "config.yml")], stdout=subprocess.DEVNULL,
                                stderr=open(folder / "registry.log", "wb"))  # noqa: SIM115
        try:
            deadline = time.monotonic() + 15
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v2/", timeout=1).close()
                    break
                except urllib.error.HTTPError:
                    break  # 401 under token auth: it is up
                except OSError:
                    assert proc.poll() is None, (folder / "registry.log").read_text()
                    assert time.monotonic() < deadline, "docker-registry did not start"
                    time.sleep(0.05)
            yield Registry(f"127.0.0.1:{port}"), tokens[0] if tokens else None
        finally:
            proc.terminate()
            proc.wait(timeout=10)


@contextmanager
def _tokens(folder: Path) -> Iterator[tuple[TokenService, int]]:
    service = _token_service(folder)
    with serve_wsgi(service, name="token-service") as port:
        yield service, port
