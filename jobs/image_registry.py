"""Which CPU architectures a container image is published for, read from its registry before any machine is paid for.

An image built for linux/amd64 only (pytorch/pytorch, most CUDA images) cannot start on an arm64 machine (AWS
Graviton g5g): `docker pull` fails at boot, after the machine is billed. So planning offers only instance types of
an architecture the image has (gpuplan.launching.image_arch).

How (OCI distribution spec, https://github.com/opencontainers/distribution-spec/blob/main/spec.md#pulling-manifests):
`GET /v2/<name>/manifests/<reference>` with an Accept header naming the index and manifest media types. An image
index / Docker manifest list lists one manifest per platform, each with `platform.architecture` and `platform.os`
(https://github.com/opencontainers/image-spec/blob/main/image-index.md); a single manifest names its config blob,
whose `architecture` and `os` say the one platform (https://github.com/opencontainers/image-spec/blob/main/config.md).
Entries whose platform is `unknown` (build attestations) are not images and are skipped.

Authentication (Docker Hub, ghcr.io and public ECR all answer an anonymous pull this way): the registry answers 401
with `WWW-Authenticate: Bearer realm="...",service="...",scope="..."`; the client asks the realm for a token
(`?service=...&scope=repository:<name>:pull`, with HTTP Basic credentials when it has some) and retries with
`Authorization: Bearer <token>` (https://distribution.github.io/distribution/spec/auth/token/; the token is in
`token` or `access_token`). A `Basic` challenge is answered with the credentials directly. Credentials come from
the user's docker config, `auths.<registry>.auth` (base64 `user:password`) in `$DOCKER_CONFIG/config.json` or
`~/.docker/config.json` (https://docs.docker.com/reference/cli/docker/#configuration-files); a credential helper's
secrets are not read (the lookup then goes anonymous). Nothing read here is logged or stored.

Docker Hub's names: `ubuntu` is `docker.io/library/ubuntu`, served by `registry-1.docker.io`. A registry on a
loopback address is spoken to over plain HTTP, as docker treats 127.0.0.0/8 as an insecure registry.
"""

from __future__ import annotations

import base64
import json
import os
import re
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

DOCKER_HUB = "docker.io"
DOCKER_HUB_API = "registry-1.docker.io"
TIMEOUT_SECONDS = 5.0
ENDPOINT_VARIABLE = "GPUPLAN_REGISTRY_ENDPOINT"
INDEX_TYPES = (
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
)
_LOOPBACK = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$")
_CHALLENGE_PARAM = re.compile(r'(\w+)="([^"]*)"')


class RegistryError(Exception):
    """The registry could not be asked, or did not answer with an image (the caller decides what to assume)."""


@dataclass(frozen=True)
class ImageReference:
    registry: str  # as the user names it (docker.io, ghcr.io, 127.0.0.1:5000): the docker config's key
    repository: str
    reference: str  # a tag or a digest

    @property
    def api_host(self) -> str:
        return DOCKER_HUB_API if self.registry == DOCKER_HUB else self.registry

    def base_url(self, endpoint: str | None = None) -> str:
        """`https://<registry>/v2/<repository>`, or under `endpoint` (a pull-through mirror) when given."""
        if endpoint:
            return f"{endpoint.rstrip('/')}/v2/{self.repository}"
        scheme = "http" if _LOOPBACK.match(self.registry) else "https"
        return f"{scheme}://{self.api_host}/v2/{self.repository}"


@dataclass(frozen=True)
class ImagePlatforms:
    """The image's platforms as OCI names them: ("linux", "amd64"), ("linux", "arm64"), ..."""

    reference: ImageReference
    platforms: frozenset[tuple[str, str]]

    @property
    def architectures(self) -> frozenset[str]:
        return frozenset(arch for os_name, arch in self.platforms if os_name == "linux")


def parse_reference(image: str) -> ImageReference:
    """Split `[registry/]repository[:tag][@digest]` as docker does (a first part with `.` or `:`, or `localhost`,
    is a registry; else Docker Hub, where a one-part name is under `library/`)."""
    name, _, digest = image.partition("@")
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DOCKER_HUB, name
    tag = ""
    if ":" in path.rsplit("/", 1)[-1]:
        path, tag = path.rsplit(":", 1)
    if registry == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    if not path or not re.fullmatch(r"[a-z0-9]+(?:[._/-][a-z0-9]+|__)*", path):
        raise RegistryError(f"{image!r} is not an image reference")
    return ImageReference(registry, path, digest or tag or "latest")


def docker_credentials(registry: str, config_dir: str | None = None) -> str | None:
    """`user:password` for `registry` from the docker config (`auths.<registry>.auth`), or None."""
    folder = Path(config_dir or os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker")
    try:
        auths = json.loads((folder / "config.json").read_text()).get("auths") or {}
    except (OSError, ValueError, AttributeError):
        return None
    keys = [registry, f"https://{registry}", f"http://{registry}"]
    if registry == DOCKER_HUB:
        keys += ["https://index.docker.io/v1/", "index.docker.io", DOCKER_HUB_API]
    for key in keys:
        entry = auths.get(key) if isinstance(auths, dict) else None
        if isinstance(entry, dict) and isinstance(entry.get("auth"), str):
            try:
                decoded = base64.b64decode(entry["auth"]).decode()
            except (ValueError, UnicodeDecodeError):
                return None
            return decoded if ":" in decoded else None
    return None


class _Session:
    """GETs against one registry, answering its auth challenge once (then reusing the header)."""

    def __init__(self, ref: ImageReference, credentials: str | None, timeout: float) -> None:
        self.ref = ref
        self.credentials = credentials
        self.timeout = timeout
        self.authorization: str | None = None

    def get(self, url: str, accept: tuple[str, ...] = ()) -> tuple[str, bytes]:
        for attempt in (0, 1):
            headers = {"Accept": ", ".join(accept)} if accept else {}
            if self.authorization:
                headers["Authorization"] = self.authorization
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                            timeout=self.timeout) as resp:
                    return resp.headers.get("Content-Type", ""), resp.read(4 * 1024 * 1024)
            except urllib.error.HTTPError as exc:
                if exc.code == 401 and attempt == 0:
                    self.authorization = self._answer(exc.headers.get("WWW-Authenticate", ""))
                    continue
                raise RegistryError(f"{self.ref.registry} answered HTTP {exc.code} for {self.ref.repository}") \
                    from None
            except (urllib.error.URLError, OSError, ValueError) as exc:
                raise RegistryError(f"{self.ref.registry} cannot be reached ({_reason(exc)})") from None
        raise RegistryError(f"{self.ref.registry} refused access to {self.ref.repository}")

    def _answer(self, challenge: str) -> str:
        scheme = challenge.split(" ", 1)[0].lower()
        basic = "Basic " + base64.b64encode(self.credentials.encode()).decode() if self.credentials else None
        if scheme == "basic" and basic:
            return basic
        if scheme != "bearer":
            raise RegistryError(f"{self.ref.registry} asks for authentication gpuplan cannot give ({scheme or '?'})")
        params = dict(_CHALLENGE_PARAM.findall(challenge))
        realm = params.get("realm")
        if not realm or not realm.startswith(("https://", "http://")):
            raise RegistryError(f"{self.ref.registry} sent a token challenge without a realm")
        query = {"scope": params.get("scope") or f"repository:{self.ref.repository}:pull"}
        if params.get("service"):
            query["service"] = params["service"]
        request = urllib.request.Request(f"{realm}?{urllib.parse.urlencode(query)}",
                                         headers={"Authorization": basic} if basic else {})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as resp:
                body = json.loads(resp.read(1024 * 1024))
        except urllib.error.HTTPError as exc:
            raise RegistryError(f"the token service of {self.ref.registry} answered HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise RegistryError(f"the token service of {self.ref.registry} cannot be reached ({_reason(exc)})") \
                from None
        token = body.get("token") or body.get("access_token") if isinstance(body, dict) else None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"the token service of {self.ref.registry} sent no token")
        return f"Bearer {token}"


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or exc)[:200]


def image_platforms(image: str, *, timeout: float = TIMEOUT_SECONDS, config_dir: str | None = None,
                    endpoint: str | None = None) -> ImagePlatforms:
    """The platforms `image` is published for; RegistryError when the registry cannot say. `endpoint` (default:
    $GPUPLAN_REGISTRY_ENDPOINT) sends the lookup to a pull-through mirror instead of the image's registry."""
    ref = parse_reference(image)
    base = ref.base_url(endpoint or os.environ.get(ENDPOINT_VARIABLE) or None)
    session = _Session(ref, docker_credentials(ref.registry, config_dir), timeout)
    media, body = session.get(f"{base}/manifests/{ref.reference}", INDEX_TYPES + MANIFEST_TYPES)
    try:
        doc = json.loads(body)
    except ValueError:
        raise RegistryError(f"{ref.registry} sent a manifest that is not JSON") from None
    kind = str(doc.get("mediaType") or media.split(";")[0].strip())
    if kind in INDEX_TYPES or "manifests" in doc:
        found = set()
        for entry in doc.get("manifests") or []:
            platform = entry.get("platform") or {}
            os_name, arch = str(platform.get("os", "")), str(platform.get("architecture", ""))
            if os_name and arch and "unknown" not in (os_name, arch):
                found.add((os_name, arch))
        return ImagePlatforms(ref, frozenset(found))
    config = (doc.get("config") or {}).get("digest")
    if not isinstance(config, str):
        raise RegistryError(f"{ref.registry} sent a manifest without a config")
    _media, blob = session.get(f"{base}/blobs/{config}")
    try:
        cfg = json.loads(blob)
    except ValueError:
        raise RegistryError(f"the image config of {image} is not JSON") from None
    return ImagePlatforms(ref, frozenset({(str(cfg.get("os", "linux")), str(cfg.get("architecture", "")))}))
