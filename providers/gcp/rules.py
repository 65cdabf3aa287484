"""GCE's rules as gpuplan applies them: VM names, labels, request ids, machine types, endpoints, error mapping.

Pure functions and constants (no client calls), split from providers/gcp.py so the provider class reads as the
launch/describe/terminate flow and these rules can be tested on their own.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
import unicodedata
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from gpuplan.catalog.gcp_markets import NOT_ON_DEMAND_SOURCE, sold_on_demand
from gpuplan.catalog.gpu_names import GCP_ACCELERATOR_GPU
from gpuplan.providers.base import (
    TAG_CREATED_BY,
    TAG_NAME,
    TAG_PROJECT,
    TAG_RUN_ID,
    AuthError,
    CapacityError,
    InstanceState,
    LaunchRequest,
    ProviderError,
    QuotaError,
)
from gpuplan.providers.gcp.error_scope import scoped_error

ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE"
PROJECT_ENVS = ("GOOGLE_CLOUD_PROJECT", "CLOUDSDK_CORE_PROJECT")
DEFAULT_REGION = "us-central1"
# A Deep Learning VM family with the NVIDIA driver, CUDA 12.8 and a container runtime preinstalled.
DEFAULT_IMAGE_PROJECT = "deeplearning-platform-release"
DEFAULT_IMAGE_FAMILY = "common-cu128-ubuntu-2204-nvidia-570"
DEFAULT_BOOT_DISK_GB = 200
DEFAULT_BOOT_DISK_TYPE = "pd-balanced"  # g2/a3 do not accept pd-standard; a4/a3-ultra get Hyperdisk
NETWORK_TAG = "gpuplan"

# Namespace of the requestId UUIDs: uuid5(namespace, "run/zone/generation/rank") is stable across processes.
REQUEST_ID_NAMESPACE = uuid.UUID("5d7f2b53-7c0e-4f4e-9a55-6770706c616e")

# GCE operation error codes -> what failover should do with them.
CAPACITY_CODES = frozenset({
    "ZONE_RESOURCE_POOL_EXHAUSTED",
    "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS",
    "RESOURCE_POOL_EXHAUSTED",
    "NOT_OFFERED_IN_ZONE",  # our own pre-check: machine or accelerator type absent from the zone
    "NOT_OFFERED_ON_DEMAND",  # our own pre-check: a Spot/Flex-start-only shape asked for on demand (check_market)
})
QUOTA_CODES = frozenset({"QUOTA_EXCEEDED", "quotaExceeded", "GPUS_ALL_REGIONS", "limitExceeded"})
RATE_LIMIT_REASONS = frozenset({"rateLimitExceeded", "userRateLimitExceeded", "RATE_LIMIT_EXCEEDED"})
SERVICE_DISABLED = "SERVICE_DISABLED"  # ErrorInfo reason (domain googleapis.com): the API is not enabled
PREEMPTED_OPERATION = "compute.instances.preempted"
MAX_REQUEST_ATTEMPTS = 20

STATUS_MAP = {
    "PROVISIONING": InstanceState.PENDING,
    "STAGING": InstanceState.PENDING,
    "REPAIRING": InstanceState.PENDING,
    "RUNNING": InstanceState.RUNNING,
    "STOPPING": InstanceState.STOPPING,
    "SUSPENDING": InstanceState.STOPPING,
    "SUSPENDED": InstanceState.STOPPING,
    "PENDING_STOP": InstanceState.STOPPING,
    # GCE's word for a *stopped* VM: its disk (and any reserved address) bills on until it is deleted, so for
    # gpuplan it is still a machine that costs money. describe() deletes such VMs and reports them TERMINATED.
    "TERMINATED": InstanceState.STOPPING,
}

# GCE accelerator type -> gpuplan's canonical GPU name, shared with the catalog (gpuplan.catalog.gpu_names), and
# back; the "mega" H100 is the same GPU with more network, so plain "H100" attaches the ordinary one.
GPU_NAMES: dict[str, str] = dict(GCP_ACCELERATOR_GPU)
ACCELERATOR_TYPES: dict[str, str] = {
    **{gpu: acc for acc, gpu in GCP_ACCELERATOR_GPU.items() if "mega" not in acc},
    "A100": "nvidia-tesla-a100",  # what users type; the catalog says A100-40GB
    "V100": "nvidia-tesla-v100",
    "H100-MEGA": "nvidia-h100-mega-80gb",
}
# Accelerator-optimised families: the GPUs come with the machine type and may not be attached again.
FIXED_GPU_FAMILIES = ("a2-", "a3-", "a4-", "g2-", "g4-")
# A default host when the offer names a GPU but no machine type: {gpu: {count: machine type}}.
DEFAULT_HOSTS = {
    "A100-40GB": {1: "a2-highgpu-1g", 2: "a2-highgpu-2g", 4: "a2-highgpu-4g", 8: "a2-highgpu-8g", 16: "a2-megagpu-16g"},
    "A100-80GB": {1: "a2-ultragpu-1g", 2: "a2-ultragpu-2g", 4: "a2-ultragpu-4g", 8: "a2-ultragpu-8g"},
    "H100": {1: "a3-highgpu-1g", 2: "a3-highgpu-2g", 4: "a3-highgpu-4g", 8: "a3-highgpu-8g"},
    "H100-MEGA": {8: "a3-megagpu-8g"},
    "H200": {8: "a3-ultragpu-8g"},
    "B200": {8: "a4-highgpu-8g"},
    "L4": {1: "g2-standard-8", 2: "g2-standard-24", 4: "g2-standard-48", 8: "g2-standard-96"},
}
# n1 hosts for attached GPUs (T4, V100, P100, P4): vCPUs grow with the GPU count, within GCE's per-GPU limits.
N1_HOSTS = {1: "n1-standard-8", 2: "n1-standard-16", 4: "n1-standard-32", 8: "n1-standard-64"}

_LABEL_KEY_RE = re.compile(r"[^a-z0-9_-]")
_NAME_RE = re.compile(r"[^a-z0-9-]")

# GCE's label rules — https://cloud.google.com/compute/docs/labeling-resources#requirements (same list in
# https://cloud.google.com/resource-manager/docs/labels-overview#requirements): "Each resource can have up to 64
# labels." / "Keys have a minimum length of 1 character and a maximum length of 63 characters, and cannot be empty.
# Values can be empty, and have a maximum length of 63 characters." / "Keys and values can contain only lowercase
# letters, numeric characters, underscores, and dashes. All characters must use UTF-8 encoding, and international
# characters are allowed. Keys must start with a lowercase letter or international character." The API references
# add "Keys and values must both be under 128 bytes" (regexes \p{Ll}\p{Lo} start, [\p{Ll}\p{Lo}\p{N}_-] after).
MAX_LABELS = 64
MAX_LABEL_CHARS = 63
MAX_LABEL_BYTES = 127  # "under 128 bytes"
LABEL_RULES_URL = "https://cloud.google.com/compute/docs/labeling-resources#requirements"
# gpuplan's own labels on a VM: run id, name, created-by, project, node rank, secrets marker (instance.py). They are
# counted as always present, so the room left for a spec's labels does not depend on the run.
OWN_LABELS = 6
MAX_SPEC_LABELS = MAX_LABELS - OWN_LABELS
OWN_LABEL_PREFIX = "gpuplan-"


def label_key(tag: str) -> str:
    """A gpuplan tag name as a GCE label key: `gpuplan:run-id` -> `gpuplan-run-id`."""
    key = _LABEL_KEY_RE.sub("-", tag.lower().replace(":", "-"))
    if not key or not key[0].isalpha():
        key = "k" + key
    return key[:63]


def label_value(value: str) -> str:
    """gpuplan's own value (a run name, a project) as a GCE label value: lower-case ASCII letters, digits, `_` and
    `-`, at most 63 characters; always valid, so gpuplan's own labels never break the rules."""
    return _LABEL_KEY_RE.sub("-", str(value).lower())[:63]


def _label_char(ch: str) -> bool:
    """A lowercase or international letter (Unicode Ll / Lo), a numeric character (N*), `_` or `-`."""
    return ch in "_-" or unicodedata.category(ch) in ("Ll", "Lo") or unicodedata.category(ch).startswith("N")


def label_problem(key: str, value: str) -> str | None:
    """Which of GCE's label rules (LABEL_RULES_URL) this key/value breaks, or None when GCE accepts it."""
    if not key or len(key) > MAX_LABEL_CHARS:
        return f"keys are 1 to {MAX_LABEL_CHARS} characters"
    if unicodedata.category(key[0]) not in ("Ll", "Lo"):
        return "keys start with a lowercase letter"
    if not all(_label_char(ch) for ch in key):
        return "keys hold only lowercase letters, digits, '_' and '-'"
    if len(value) > MAX_LABEL_CHARS:
        return f"values are at most {MAX_LABEL_CHARS} characters"
    if not all(_label_char(ch) for ch in value):
        return "values hold only lowercase letters, digits, '_' and '-'"
    if len(key.encode()) > MAX_LABEL_BYTES or len(value.encode()) > MAX_LABEL_BYTES:
        return "keys and values are under 128 bytes"
    return None


def spec_label_problem(labels: Mapping[str, str]) -> str | None:
    """One line naming the first spec label GCE would refuse (and the rule), or None when all of them fit.

    A spec's labels are the user's own words: refused, never rewritten (a silent `Team` -> `team` could merge two
    labels into one). gpuplan keeps OWN_LABELS of GCE's 64 for itself, and its `gpuplan-` keys are its own.
    """
    if len(labels) > MAX_SPEC_LABELS:
        return (f"the job spec has {len(labels)} labels; GCP allows {MAX_LABELS} per VM and gpuplan keeps "
                f"{OWN_LABELS} of them, so at most {MAX_SPEC_LABELS} ({LABEL_RULES_URL})")
    for key, value in labels.items():
        if key.startswith(OWN_LABEL_PREFIX):
            return f"label {key!r}: keys starting with {OWN_LABEL_PREFIX!r} are gpuplan's own"
        problem = label_problem(key, str(value))
        if problem is not None:
            return f"label {key}={value!r} is not a valid GCP label: {problem} ({LABEL_RULES_URL})"
    return None


LABEL_RUN_ID = label_key(TAG_RUN_ID)
LABEL_NAME = label_key(TAG_NAME)
LABEL_PROJECT = label_key(TAG_PROJECT)
LABEL_CREATED_BY = label_key(TAG_CREATED_BY)


def labels_for(request: LaunchRequest) -> dict[str, str]:
    """The run's tags (values sanitised: always valid) plus the spec's own labels, which must already follow GCE's
    rules: the provider's check_launch refuses a spec that breaks them before anything is recorded, and this
    raises (InvalidLabel) rather than send GCE a label it would refuse."""
    labels = {label_key(key): label_value(value) for key, value in request.tags().items()}
    spec = {str(k): str(v) for k, v in (request.labels or {}).items()}
    problem = spec_label_problem(spec)
    if problem is not None:
        raise ProviderError(problem, code="InvalidLabel")
    return {**spec, **labels}


def instance_name(run_id: str, rank: int, generation: int = 0) -> str:
    """A deterministic, valid VM name per run, generation and node rank (`gpuplan-r-0a1b2c3d4e-0`)."""
    base = _NAME_RE.sub("-", run_id.lower()).strip("-")
    suffix = f"-{rank}" if generation == 0 else f"-g{generation}-{rank}"
    return f"gpuplan-{base}"[: 63 - len(suffix)].rstrip("-") + suffix


def request_id(run_id: str, zone: str, generation: int, rank: int, attempt: int = 0) -> str:
    """GCE's idempotency key for one insert: the same run, zone, generation, rank and attempt give the same UUID."""
    return str(uuid.uuid5(REQUEST_ID_NAMESPACE, f"{run_id}/{zone}/{generation}/{rank}/{attempt}"))


def region_of(zone: str) -> str:
    """`us-central1-a` -> `us-central1`."""
    return zone.rsplit("-", 1)[0]


def accelerator_type(gpu: str) -> str:
    """A gpuplan GPU name (`T4`, `A100-80GB`) or a GCE accelerator name (`nvidia-l4`) -> the GCE name."""
    if gpu in ACCELERATOR_TYPES:
        return ACCELERATOR_TYPES[gpu]
    upper = gpu.upper().replace(" ", "-")
    if upper in ACCELERATOR_TYPES:
        return ACCELERATOR_TYPES[upper]
    if gpu.lower().startswith("nvidia-"):
        return gpu.lower()
    raise ProviderError(f"unknown GPU for GCP: {gpu!r}; known: {', '.join(sorted(ACCELERATOR_TYPES))}",
                        code="UnknownGpu")


def has_fixed_gpus(machine_type: str) -> bool:
    """Accelerator-optimised machine types (a2, a3, a4, g2) come with their GPUs attached."""
    return machine_type.startswith(FIXED_GPU_FAMILIES)


def choose_machine_type(instance_type: str | None, gpu: str | None, gpus_per_node: float) -> str:
    """The machine type to ask for: the offer's, else a sensible host for the GPU and count."""
    if instance_type:
        return instance_type
    count = max(int(gpus_per_node or 0), 1 if gpu else 0)
    if gpu:
        acc = accelerator_type(gpu)
        name = "H100-MEGA" if "mega" in acc else GPU_NAMES.get(acc, gpu)
        hosts = DEFAULT_HOSTS.get(name)
        if hosts is not None:
            if count not in hosts:
                raise ProviderError(f"GCP has no {name} machine with {count} GPU(s); pick one of "
                                    f"{sorted(hosts)} or name a machine type", code="NoMachineType")
            return hosts[count]
        if count not in N1_HOSTS:
            raise ProviderError(f"n1 machines take 1, 2, 4 or 8 {name} GPUs, not {count}", code="NoMachineType")
        return N1_HOSTS[count]
    return "n1-standard-4"


# ---- A3 / A4 machine rules (notes, GCP 12) -----------------------------------------------------------------------

# Boot disk: machine series that cannot boot from Persistent Disk (pd-standard / pd-balanced / pd-ssd) and need
# Hyperdisk; "hyperdisk-balanced is the only Hyperdisk type that supports boot disks" (skypilot-org/skypilot#5351).
# Sources (the official per-series disk table was not retrieved verbatim, so each line names what it rests on):
# - A4 (`a4-`) and G4 (`g4-`): dstack's GCP backend (resources.py instance_type_supports_persistent_disk, PR
#   dstackai/dstack#3100) boots them from hyperdisk-balanced because PD is refused; the GCE error for a PD boot disk
#   on such a series is UNSUPPORTED_OPERATION "[pd-balanced, c4-standard-16] features are not compatible for
#   creating instance." (observed, astronomer/astronomer#2463).
# - A4X (`a4x-`): "pd-balanced disk type cannot be used by a4x-highgpu-4g machine type" (NVIDIA/aicr#2338 docs).
# - A3 Ultra (`a3-ultragpu-`): secondary only — Vertex AI's DiskSpec (https://cloud.google.com/vertex-ai/docs/
#   reference/rest/v1/DiskSpec): "for A3U machines, the default value is hyperdisk-balanced".
# Disk types: https://cloud.google.com/compute/docs/disks#disk-types
HYPERDISK_ONLY_FAMILIES = ("a4-", "a4x-", "a3-ultragpu-", "g4-")
HYPERDISK_BOOT = "hyperdisk-balanced"


def needs_hyperdisk(machine_type: str) -> bool:
    """True for a machine series that boots only from Hyperdisk (see HYPERDISK_ONLY_FAMILIES for the sources)."""
    return machine_type.startswith(HYPERDISK_ONLY_FAMILIES)


def boot_disk_type_for(machine_type: str, configured: str) -> str:
    """The boot disk type to ask for: the configured one, unless the machine series cannot boot from it (a
    Persistent Disk type on a Hyperdisk-only series), then hyperdisk-balanced: GCE would refuse the insert."""
    if needs_hyperdisk(machine_type) and configured.startswith("pd-"):
        return HYPERDISK_BOOT
    return configured


def check_market(machine_type: str, spot: bool, *, zone: str | None = None) -> None:
    """CapacityError (code NOT_OFFERED_ON_DEMAND) for an on-demand request of a shape Google sells only as Spot /
    Flex-start: that placement is impossible, so failover moves on without asking GCE (gpuplan.catalog.gcp_markets
    names the sources; the catalog already drops these on-demand prices, so only an explicit type gets here)."""
    if spot or sold_on_demand(machine_type):
        return
    raise CapacityError(f"{machine_type} is not sold on demand on GCP (Spot or Flex-start only: "
                        f"{NOT_ON_DEMAND_SOURCE}); use spot: true or an 8-GPU shape",
                        code="NOT_OFFERED_ON_DEMAND", zone=zone, region=region_of(zone) if zone else None)


# ---- boot image (notes, GCP 11) ----------------------------------------------------------------------------------

# "Method: images.getFromFamily" — https://cloud.google.com/compute/docs/reference/rest/v1/images/getFromFamily :
# "Returns the latest image that is part of an image family and is not deprecated." A family that does not exist (or
# was retired: Deep Learning VM families are, https://cloud.google.com/deep-learning-vm/docs/framework-support-policy)
# answers 404 notFound "The resource 'projects/P/global/images/family/F' was not found" — and so does an insert that
# names it (observed: googlecodelabs/feedback#463), in every zone alike: a configuration error, never capacity.
IMAGES_DOC = "https://cloud.google.com/compute/docs/reference/rest/v1/images/getFromFamily"
_FAMILY_RE = re.compile(r"^(?:https?://[^/]+/compute/v1/)?projects/([^/]+)/global/images/family/([^/]+)$")


def image_family(source_image: str) -> tuple[str, str] | None:
    """(image project, family) of a `projects/P/global/images/family/F` source image; None for a named image."""
    m = _FAMILY_RE.match(source_image.strip())
    return (m.group(1), m.group(2)) if m else None


def missing_family_message(project: str, family: str) -> str:
    """One line for a boot image family GCE does not know: the user's configuration, named so it can be fixed."""
    return (f"boot image family {family!r} does not exist in image project {project!r} (images.getFromFamily: 404); "
            f"set image_family / image_project in [providers.gcp] to a published family (list them with `gcloud "
            f"compute images list --project {project} --no-standard-images`)")


CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"  # all APIs, narrowed by IAM roles


@dataclass(frozen=True)
class Endpoint:
    """Where the Compute API is and whether anonymous credentials may be used there (loopback only)."""

    api_endpoint: str | None
    loopback: bool

    @classmethod
    def parse(cls, override: str | None, service: str = "compute") -> Endpoint:
        """gcloud's form `http://127.0.0.1:8089/compute/v1/` -> the client's api_endpoint `http://127.0.0.1:8089`.

        The google clients add `/compute/v1/...` (`/storage/v1/...` for service="storage") to every path
        themselves, so the version suffix is dropped.
        """
        if not override:
            return cls(None, False)
        url = override.strip()
        parsed = urlparse(url if "://" in url else f"https://{url}")
        path = re.sub(rf"/?{re.escape(service)}/(v1|beta|alpha)/?$", "", parsed.path.rstrip("/") + "/").rstrip("/")
        api_endpoint = f"{parsed.scheme}://{parsed.netloc}{path}"
        host = parsed.hostname or ""
        try:
            loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
        except ValueError:
            loopback = False
        return cls(api_endpoint, loopback)

    def client_kwargs(self) -> dict[str, Any]:
        """The google client constructor's `client_options` for this endpoint (none for Google's own)."""
        return {"client_options": {"api_endpoint": self.api_endpoint}} if self.api_endpoint else {}

    def default_credentials(self, scopes: list[str]) -> tuple[Any, str | None]:
        """(credentials, ADC project): anonymous on a loopback endpoint (the tests' fakes) so no real credential
        ever reaches a fake, else Application Default Credentials with `scopes`."""
        if self.loopback:
            from google.auth.credentials import AnonymousCredentials

            return AnonymousCredentials(), None
        import google.auth

        try:
            credentials, project = google.auth.default(scopes=scopes)
        except Exception as exc:
            raise map_api_error(exc) from exc
        return credentials, project


def _error_items(exc: Any) -> list[dict[str, Any]]:
    """The `errors` list of a google-api-core HTTP error (each item has `reason` and `message`)."""
    items = getattr(exc, "errors", None) or []
    return [i for i in items if isinstance(i, dict)]


def map_api_error(exc: Exception, *, zone: str | None = None, region: str | None = None,
                  project: str | None = None) -> ProviderError:
    """A google-api-core / google-auth error -> the typed error failover understands (messages hold no secrets);
    quota and zone reasons by their scope (gpuplan.providers.gcp.error_scope)."""
    from google.api_core import exceptions as gexc
    from google.auth import exceptions as auth_exc

    region = region or (region_of(zone) if zone else None)
    where = zone or region or "gcp"
    if isinstance(exc, auth_exc.DefaultCredentialsError):
        return AuthError("Google Cloud credentials not found; run `gcloud auth application-default login` or set "
                         "GOOGLE_APPLICATION_CREDENTIALS", code="NoCredentials", zone=zone, region=region)
    if isinstance(exc, auth_exc.GoogleAuthError):
        return AuthError(f"Google Cloud credentials rejected: {exc}", code="AuthError", zone=zone, region=region)
    if isinstance(exc, gexc.GoogleAPICallError):
        reasons = [str(i.get("reason") or "") for i in _error_items(exc)]
        message = f"{exc.code} in {where}: {exc.message}"
        code = next((r for r in reasons if r), None) or type(exc).__name__
        scoped = scoped_error(code, str(exc.message), zone=zone, region=region, project=project)
        if scoped is not None:
            return scoped
        if any(r in QUOTA_CODES for r in reasons) or "quota" in exc.message.lower():
            return QuotaError(message, code=code if code in QUOTA_CODES else "QUOTA_EXCEEDED", zone=zone,
                              region=region)
        if any(r in CAPACITY_CODES for r in reasons):
            return CapacityError(message, code=code, zone=zone, region=region)
        if isinstance(exc, (gexc.Unauthorized, gexc.Forbidden)):
            return AuthError(message, code=code, zone=zone, region=region)
        return ProviderError(message, code=code, zone=zone, region=region)
    if isinstance(exc, ProviderError):
        return exc
    return ProviderError(f"GCP call failed in {where}: {type(exc).__name__}: {exc}", zone=zone, region=region)


def service_disabled(exc: BaseException, service: str) -> bool:
    """True when Google refused the call because `service` (e.g. `secretmanager.googleapis.com`) is not enabled in
    the project: a 403 (Forbidden on REST, PermissionDenied on gRPC) whose ErrorInfo detail has reason
    SERVICE_DISABLED and, when it names one, that service.

    Told apart from other 403s because it says something about the project, not the caller: nothing can have been
    made through an API that is off, whereas a missing permission hides what is there. The ErrorInfo is the only
    reliable sign; its message is for humans and changes.
    """
    from google.api_core import exceptions as gexc

    if not isinstance(exc, (gexc.Forbidden, gexc.PermissionDenied)) or exc.reason != SERVICE_DISABLED:
        return False
    if exc.domain not in (None, "", "googleapis.com"):
        return False
    named = dict(exc.metadata or {}).get("service")
    return named in (None, "", service)


def map_operation_error(operation: Any, *, zone: str, project: str | None = None) -> ProviderError:
    """A finished zone operation with `error` set -> CapacityError / QuotaError / AuthError / ProviderError, quota and
    zone reasons by their scope (gpuplan.providers.gcp.error_scope)."""
    errors = list(operation.error.errors) if operation.error else []
    first = errors[0] if errors else None
    code = (first.code if first else "") or "OPERATION_FAILED"
    detail = (first.message if first else "") or operation.http_error_message or "operation failed"
    message = f"{code} in {zone}: {detail}"
    region = region_of(zone)
    scoped = scoped_error(code, detail, zone=zone, region=region, project=project)
    if scoped is not None:
        return scoped
    if code in CAPACITY_CODES:
        return CapacityError(message, code=code, zone=zone, region=region)
    if code in QUOTA_CODES:
        return QuotaError(message, code=code, zone=zone, region=region)
    if operation.http_error_status_code in (401, 403):
        return AuthError(message, code=code, zone=zone, region=region)
    return ProviderError(message, code=code, zone=zone, region=region)


def retryable(exc: BaseException) -> bool:
    """Throttling and transient server errors: worth retrying because every mutating call is idempotent."""
    from google.api_core import exceptions as gexc

    if isinstance(exc, (gexc.TooManyRequests, gexc.ServiceUnavailable, gexc.InternalServerError,
                        gexc.BadGateway, gexc.GatewayTimeout)):
        return True
    if isinstance(exc, gexc.Forbidden):
        return any(str(i.get("reason")) in RATE_LIMIT_REASONS for i in _error_items(exc))
    return False


def parse_time(value: str | None) -> dt.datetime | None:
    if not value:
        return None
    try:
        parsed = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.timezone.utc)


def last_segment(url: str | None) -> str:
    return (url or "").rstrip("/").rsplit("/", 1)[-1]
