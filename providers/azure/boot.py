"""The Azure part of the boot script (gpuplan.jobs.boot_cloud hooks): Key Vault, Blob storage, Scheduled Events,
and the VM deleting itself — all with curl and the VM's managed-identity token, no Azure CLI on the image.

- Token: the Instance Metadata Service (IMDS) hands out the VM's managed identity's token per audience:
  `GET http://169.254.169.254/metadata/identity/oauth2/token?api-version=2018-02-01&resource=R` with `Metadata:
  true`. https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token
  It lives only in shell variables and reaches curl on stdin (never a command line, a file or a log).
- Secrets: Key Vault's `GET {vault}/secrets/{name}?api-version=7.4` answers `{"value": ...}`
  (https://learn.microsoft.com/rest/api/keyvault/secrets/get-secret/get-secret); gpuplan stores values base64
  (contentType application/base64), so the script needs no JSON unescaping.
- Storage: Blob REST (boot_blob.py).
- Exit code: written as tags on the run's resource group (`gpuplan:exit-code-<rank>`), through ARM's Tags API
  (`PATCH {scope}/providers/Microsoft.Resources/tags/default`, operation Merge:
  https://learn.microsoft.com/rest/api/resources/tags/update-at-scope): the group outlives the VM, so gpuplan
  reads the code after the VM has deleted itself.
- Interruption: Scheduled Events (`GET /metadata/scheduledevents?api-version=2020-07-01`, `Metadata: true`); a Spot
  eviction is an event of type `Preempt`, at least 30 seconds ahead.
  https://learn.microsoft.com/azure/virtual-machines/linux/scheduled-events
  The notice is also tagged on the group (`gpuplan:evicted-<rank>`): eviction policy Delete removes the VM, and
  that tag is how gpuplan tells an eviction (relaunch) from an end.
- The machine's end: an Azure VM shut down from inside is *Stopped*, still allocated and still BILLED
  ("Stopped ... You are still being charged for the VM"; only Deallocated stops the compute bill:
  https://learn.microsoft.com/azure/virtual-machines/states-billing). So `machine_end` deletes this VM through ARM
  (`DELETE .../virtualMachines/NAME`: https://learn.microsoft.com/rest/api/compute/virtual-machines/delete) with
  its managed identity; its NIC and OS disk go with it (deleteOption Delete). The subscription, group and name
  come from IMDS (`/metadata/instance/compute`: https://learn.microsoft.com/azure/virtual-machines/instance-metadata-service).
  If the delete cannot be sent (no identity, no permission), it powers off as before and gpuplan deletes the
  stopped VM the next time it looks (providers/azure/lifecycle.py describe).
"""

from __future__ import annotations

from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.azure.boot_blob import BLOB_FUNCTIONS
from gpuplan.providers.boot_token import ACCESS_TOKEN_FUNCTION

DEFAULT_METADATA_URL = "http://169.254.169.254/metadata"
DEFAULT_ARM_ENDPOINT = "https://management.azure.com"
ARM_AUDIENCE = "https://management.azure.com/"
VAULT_AUDIENCE = "https://vault.azure.net"
COMPUTE_API = "2024-07-01"
TAGS_API = "2021-04-01"

AZURE_HOOKS = r"""azure_token() {
  # The managed identity's access token for audience $1, from IMDS (printed, never logged).
  local body
  body=$(curl -fsS -m 10 -G -H 'Metadata: true' --data-urlencode 'api-version=2018-02-01' \
    --data-urlencode "resource=$1" "$METADATA_URL/identity/oauth2/token" 2>/dev/null) || return 1
  access_token_of "$body"
}

imds_compute() {
  # One field of this VM's compute metadata (subscriptionId, resourceGroupName, name), as text.
  curl -fsS -m 10 -H 'Metadata: true' \
    "$METADATA_URL/instance/compute/$1?api-version=2021-02-01&format=text" 2>/dev/null
}

arm_group_url() {
  local sub group
  sub=$(imds_compute subscriptionId) && group=$(imds_compute resourceGroupName) || return 1
  printf '%s/subscriptions/%s/resourceGroups/%s' "$ARM_ENDPOINT" "$sub" "$group"
}

tag_group() {
  # Merge tag $1=$2 (fixed words and numbers only) into this run's resource group.
  local token url
  token=$(azure_token "$ARM_AUDIENCE") && url=$(arm_group_url) || return 1
  printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 30 -X PATCH -H @- \
    -H 'Content-Type: application/json' \
    --data-binary "{\"operation\": \"Merge\", \"properties\": {\"tags\": {\"$1\": \"$2\"}}}" \
    "$url/providers/Microsoft.Resources/tags/default?api-version=$TAGS_API" >/dev/null 2>&1
}

store_secret() {
  # Secret $1 (https://VAULT/secrets/NAME): the base64 value Key Vault answers, decoded.
  local token body data
  if ! token=$(azure_token "$VAULT_AUDIENCE"); then
    log "cannot read secrets: no managed-identity token from IMDS (does the VM have an identity?)"
    return 1
  fi
  body=$(printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 30 --retry 3 -H @- \
    "$1?api-version=7.4") || return 1
  case "$body" in
    *'"value"'*) ;;
    *) return 1 ;;
  esac
  data=${body#*\"value\"}
  data=${data#*\"}
  data=${data%%\"*}
  printf '%s' "$data" | base64 -d || return 1
  printf x
}

report_status() {
  # The exit code as a tag on the run's resource group (it outlives this VM); best effort.
  [ "$1" = exit_code ] || return 0
  tag_group "gpuplan:exit-code-${NODE_RANK_:-0}" "$2" || true
}

interruption_notice() {
  local body
  body=$(curl -fsS -m 3 -H 'Metadata: true' "$METADATA_URL/scheduledevents?api-version=2020-07-01" \
    2>/dev/null) || return 1
  case "$body" in
    *'"Preempt"'*) ;;
    *) return 1 ;;
  esac
  tag_group "gpuplan:evicted-${NODE_RANK_:-0}" true || true
  printf '{"EventType": "Preempt"}'
}

machine_end() {
  local token url name attempt
  if token=$(azure_token "$ARM_AUDIENCE") && url=$(arm_group_url) \
      && name=$(imds_compute name); then
    url="$url/providers/Microsoft.Compute/virtualMachines/$name?api-version=$COMPUTE_API"
    for attempt in 1 2 3; do
      if printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 30 -X DELETE -H @- "$url" >/dev/null; then
        log "deleting this VM through Azure Resource Manager: a stopped VM would still be billed"
        return 0
      fi
      log "deleting this VM failed (attempt $attempt)"
      sleep 5
    done
  else
    log "no managed-identity token or metadata from IMDS: this VM cannot delete itself"
  fi
  shutdown -h now || poweroff || true
}
"""


def azure_boot_cloud(*, arm_endpoint: str | None = None, metadata_url: str | None = None,
                     blob_endpoint: str | None = None) -> BootCloud:
    """The hooks of an Azure VM; the endpoints move ARM, IMDS and Blob storage (the tests' loopback fakes; a
    blob endpoint is path style: `ENDPOINT/ACCOUNT/CONTAINER/BLOB`)."""
    functions = "\n".join([ACCESS_TOKEN_FUNCTION.strip("\n"), AZURE_HOOKS, BLOB_FUNCTIONS.strip("\n")])
    # A Spot VM gets at least thirty seconds: the job has fifteen to save before its checkpoints are copied.
    return BootCloud(functions=functions, notice_source="azure", assignments={
        "METADATA_URL": (metadata_url or DEFAULT_METADATA_URL).rstrip("/"),
        "ARM_ENDPOINT": (arm_endpoint or DEFAULT_ARM_ENDPOINT).rstrip("/"),
        "ARM_AUDIENCE": ARM_AUDIENCE, "VAULT_AUDIENCE": VAULT_AUDIENCE, "COMPUTE_API": COMPUTE_API,
        "TAGS_API": TAGS_API, "NOTICE_BUDGET": "15", "BLOB_ENDPOINT": (blob_endpoint or "").rstrip("/")})
