"""A GCE VM deletes itself when its job is over, instead of powering off: its `machine_end` boot hook
(gpuplan.jobs.boot_cloud; providers/gcp/boot.py adds it).

Why not power off: a VM shut down from inside is STOPPED, not deleted; "a stopped VM ... you are still charged for
attached disks" (https://cloud.google.com/compute/docs/instances/stop-start-instance), and stopping a VM clears
the termination time of its run-duration limit, so GCE's own DELETE at `maxRunDuration` never comes
(https://cloud.google.com/compute/docs/instances/limit-vm-runtime). The VM and its disk would then bill until the
next gpuplan command looks.

How: the Compute API's `instances.delete` (`DELETE .../projects/P/zones/Z/instances/NAME`,
https://cloud.google.com/compute/docs/reference/rest/v1/instances/delete) with the VM's own service-account token
from the metadata server (https://cloud.google.com/compute/docs/access/authenticate-workloads#applications); the
project, zone and name come from the metadata server too (`project/project-id`, `instance/zone`,
`instance/name`: https://cloud.google.com/compute/docs/metadata/predefined-metadata-keys). The token goes to curl
on stdin, never on a command line. The VM's service account needs `compute.instances.delete` (and a scope that
allows it, e.g. cloud-platform).

When the delete cannot be sent (no service account, no permission): at the job's end the VM powers off as before
(gpuplan deletes a stopped VM the next time it looks); at max_hours it does NOT power off — that would cancel GCE's
DELETE, which is due within a minute (the script stops the job ahead of the limit, and GCE may take up to 30 s past
it) — it waits for GCE to delete it, and powers off only if that never comes.
"""

from __future__ import annotations

DEFAULT_COMPUTE_ENDPOINT = "https://compute.googleapis.com"
# How long past the fail-safe a VM whose delete failed waits for GCE's own DELETE before powering off anyway:
# the script stops the job STOP_GRACE + SHUTDOWN_ALLOWANCE (45 s) ahead of maxRunDuration; GCE acts up to 30 s late.
GCE_DEADLINE_WAIT_SECONDS = 180

GCP_MACHINE_END = r"""machine_end() {
  local token project zone name url attempt
  if token=$(gcs_token) \
      && project=$(curl -fsS -m 10 -H 'Metadata-Flavor: Google' "$METADATA_URL/project/project-id") \
      && zone=$(curl -fsS -m 10 -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/zone") \
      && name=$(curl -fsS -m 10 -H 'Metadata-Flavor: Google' "$METADATA_URL/instance/name"); then
    url="$COMPUTE_ENDPOINT/compute/v1/projects/$project/zones/${zone##*/}/instances/$name"
    for attempt in 1 2 3; do
      if printf 'Authorization: Bearer %s\n' "$token" | curl -fsS -m 30 -X DELETE -H @- "$url" >/dev/null; then
        log "deleting this VM through the Compute API (instances.delete): nothing is left billed"
        return 0
      fi
      log "instances.delete of this VM failed (attempt $attempt)"
      sleep 5
    done
  else
    log "no service-account token or identity from the metadata server: this VM cannot delete itself"
  fi
  if [ "${1:-}" = max_hours ]; then
    log "leaving this VM to GCE's own DELETE at maxRunDuration (a power-off would stop it and cancel that)"
    sleep "$GCE_DEADLINE_WAIT"
  fi
  shutdown -h now || poweroff || true
}
"""


def self_delete_assignments(compute_endpoint: str | None) -> dict[str, str]:
    """The values GCP_MACHINE_END uses: the Compute API endpoint it calls (a loopback fake in the tests)."""
    return {"COMPUTE_ENDPOINT": (compute_endpoint or DEFAULT_COMPUTE_ENDPOINT).rstrip("/"),
            "GCE_DEADLINE_WAIT": str(GCE_DEADLINE_WAIT_SECONDS)}
