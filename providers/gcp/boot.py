"""The GCP part of the boot script (gpuplan.jobs.boot_cloud hooks): Secret Manager, GCS, guest attributes.

Everything with curl alone and the VM service account's token from the metadata server (on curl's stdin, never a
command line): no Cloud SDK needed on the image.
- Secrets: Secret Manager's REST API, `<secret>/versions/latest:access`, the base64 `payload.data` decoded.
  https://cloud.google.com/secret-manager/docs/reference/rest/v1/projects.secrets.versions/access
- Storage: the GCS JSON API (gpuplan.providers.gcp.boot_gcs, boot_gcs_sync).
- Exit code: the VM's guest attributes `gpuplan/exit_code`, `gpuplan/status`, `gpuplan/reason`, readable through
  the Compute API without any bucket or IAM. https://cloud.google.com/compute/docs/metadata/manage-guest-attributes
- Fabric: a multi-node A3 VM's GPUDirect-TCPX container arguments and notes (providers/gcp/boot_fabric.py).
- Interruption: the metadata value `instance/preempted` (`TRUE` once the VM is being preempted; about 30 s):
  https://cloud.google.com/compute/docs/instances/spot#preemption-process
"""

from __future__ import annotations

from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.boot_token import ACCESS_TOKEN_FUNCTION
from gpuplan.providers.gcp.boot_fabric import GCP_FABRIC_HOOKS
from gpuplan.providers.gcp.boot_gcs import GCS_FUNCTIONS
from gpuplan.providers.gcp.boot_gcs_sync import GCS_SYNC_FUNCTIONS
from gpuplan.providers.gcp.self_delete import GCP_MACHINE_END, self_delete_assignments

# Where a GCP VM ships its outputs (the GCS JSON API), asks for its service account's token and reads secrets.
# All can be moved (a Private Service Connect endpoint; the tests' loopback fakes), never to anything the job controls.
DEFAULT_GCS_ENDPOINT = "https://storage.googleapis.com"
DEFAULT_METADATA_URL = "http://metadata.google.internal/computeMetadata/v1"
DEFAULT_SECRETMANAGER_ENDPOINT = "https://secretmanager.googleapis.com"

GUEST_ATTRIBUTES_HOOK = r"""report_status() {
  # Publish KEY=VALUE under guest-attributes/gpuplan/ (read back with instances.getGuestAttributes).
  curl -fsS -m 10 -X PUT -H 'Metadata-Flavor: Google' --data-binary "$2" \
    "$METADATA_URL/instance/guest-attributes/gpuplan/$1" \
    >/dev/null 2>&1 || true
}
"""

GCP_HOOKS = r"""store_secret() {
  # The latest version of secret resource $1 (projects/P/secrets/S), base64-decoded from `payload.data`.
  local token body data
  if ! token=$(gcs_token); then
    log "cannot read secrets: no access token from the metadata server (does the VM have a service account?)"
    return 1
  fi
  body=$(printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 30 --retry 3 -H @- \
    "$SECRETMANAGER_ENDPOINT/v1/$1/versions/latest:access") || return 1
  case "$body" in
    *'"data"'*) ;;
    *) return 1 ;;
  esac
  data=${body#*\"data\"}
  data=${data#*\"}
  data=${data%%\"*}
  printf '%s' "$data" | base64 -d || return 1
  printf x
}

cloud_put() {
  # A fresh token per object (the metadata server's cached one may be minutes from expiry: boot_gcs_sync).
  local token
  if ! token=$(gcs_token); then
    echo "gpuplan: no access token from the metadata server (does the VM have a service account?)" >&2
    return 1
  fi
  gcs_put "$1" "$2" "$token"
}

cloud_get() {
  gcs_file "$1" "$2" >/dev/null 2>&1
}

cloud_sync() {
  case "$2" in
    gs://*) gcs_push_dir "$1" "$2" ;;
    *) gcs_pull_dir "$1" "$2" ;;
  esac
}

interruption_notice() {
  local body
  body=$(curl -fsS -m 3 -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/preempted" 2>/dev/null) \
    || return 1
  [ "$body" = TRUE ] || return 1
  printf '{"preempted": "TRUE"}'
}
"""


def gcp_boot_cloud(*, gcs_endpoint: str | None = None, metadata_url: str | None = None,
                   secretmanager_endpoint: str | None = None, guest_attributes: bool = True,
                   compute_endpoint: str | None = None) -> BootCloud:
    """The hooks of a GCE VM; the endpoints move the APIs (the tests' loopback fakes). Without
    `guest_attributes` the exit code is not reported through the metadata server."""
    # The VM deletes itself at its end instead of powering off (providers/gcp/self_delete.py).
    parts = [ACCESS_TOKEN_FUNCTION.strip("\n"), GCS_FUNCTIONS.strip("\n"), GCS_SYNC_FUNCTIONS.strip("\n"), GCP_HOOKS,
             GCP_FABRIC_HOOKS, GCP_MACHINE_END]
    functions = "\n".join(parts + ([GUEST_ATTRIBUTES_HOOK] if guest_attributes else []))
    # A Spot VM gets about thirty seconds: the job has fifteen to save before its checkpoints are copied as they are.
    return BootCloud(functions=functions, notice_source="gce", assignments={
        "GCS_ENDPOINT": (gcs_endpoint or DEFAULT_GCS_ENDPOINT).rstrip("/"),
        "METADATA_URL": (metadata_url or DEFAULT_METADATA_URL).rstrip("/"),
        "SECRETMANAGER_ENDPOINT": (secretmanager_endpoint or DEFAULT_SECRETMANAGER_ENDPOINT).rstrip("/"),
        "NOTICE_BUDGET": "15", **self_delete_assignments(compute_endpoint)})
