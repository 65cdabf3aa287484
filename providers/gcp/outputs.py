"""How a GCP run's outcome gets back to gpuplan: GCS run storage, and the VM's guest attributes.

Two channels, because they need different things from the user:

- Guest attributes (always on): the boot script writes `gpuplan/exit_code`, `status` and `reason` to the
  metadata server; gpuplan reads them through the Compute API. No bucket, no IAM: enough for succeeded/failed.
- GCS (when a bucket is configured: `[providers.gcp] bucket` or GPUPLAN_GCS_BUCKET): the boot script uploads
  job.log, metrics.jsonl and exit.json of each node to `gs://BUCKET/gpuplan/<run_id>/node-<rank>/` with curl and
  the VM service account's token (jobs.bootstrap), and `GcsOutputs.fetch` copies them into the run folder with
  the official google-cloud-storage client, so `gpuplan logs`, progress and the metrics work as on AWS.

Least privilege: the VM gets a service account and the `devstorage.read_write` scope only when a bucket is
configured; its account needs storage.objects.create and storage.objects.delete on that bucket only (GCS needs
delete to *replace* an object, and job.log is replaced every minute: roles/storage.objectCreator alone lets only
the first upload of each file through). The local side reads with a `devstorage.read_only` token.

google.cloud.storage is imported inside the methods only (`gpuplan --help` must not pay for it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Any

from gpuplan.providers.base import Instance, ProviderError
from gpuplan.providers.gcp.rules import CLOUD_PLATFORM_SCOPE, Endpoint, map_api_error
from gpuplan.providers.outputs import StoredObject, bucket_hint, node_prefix, run_url, sync_node_outputs

log = logging.getLogger(__name__)

BUCKET_ENV = "GPUPLAN_GCS_BUCKET"
STORAGE_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE"  # gcloud's own override, like Compute's
STORAGE_RW_SCOPE = "https://www.googleapis.com/auth/devstorage.read_write"
STORAGE_RO_SCOPE = "https://www.googleapis.com/auth/devstorage.read_only"
_STORAGE_WRITE_SCOPES = {CLOUD_PLATFORM_SCOPE, STORAGE_RW_SCOPE,
                         "https://www.googleapis.com/auth/devstorage.full_control"}
GUEST_HINT = ("no exit record: the VM left no exit code in its guest attributes (gpuplan/exit_code); "
              "it was deleted or powered off before its boot script finished")


def vm_service_account(account: str | None, scopes: Sequence[str] | None,
                       bucket: str | None, *, secrets: bool = False) -> tuple[str, list[str]] | None:
    """(service account email, scopes) for the VM, or None for no service account at all.

    Without a bucket or secrets nothing changes: a service account only when one is configured (default scope
    cloud-platform, narrowed by its IAM roles). With a bucket the VM needs a token to upload, so it gets the
    configured account (else the project's default Compute Engine account, "default") with exactly
    `devstorage.read_write` unless explicit scopes already allow writing to Cloud Storage. With secrets (kept in
    Secret Manager, read by the boot script) it needs `cloud-platform`: Secret Manager has no narrower OAuth
    scope, so the account's IAM roles are what limit it (secretAccessor on the run's secrets only: README).
    cloud-platform covers Cloud Storage as well, so a bucket adds nothing then.
    """
    if secrets:
        chosen = list(scopes) if scopes else [CLOUD_PLATFORM_SCOPE]
        if CLOUD_PLATFORM_SCOPE not in chosen:
            chosen.append(CLOUD_PLATFORM_SCOPE)
        return account or "default", chosen
    if bucket:
        chosen = list(scopes) if scopes else [STORAGE_RW_SCOPE]
        if not _STORAGE_WRITE_SCOPES.intersection(chosen):
            chosen.append(STORAGE_RW_SCOPE)
        return account or "default", chosen
    if not account:
        return None
    return account, list(scopes) if scopes else [CLOUD_PLATFORM_SCOPE]


class GcsOutputs:
    """A GCP provider's run storage in one bucket: the URL the VMs upload to, and fetching what they shipped.

    `endpoint` moves the JSON API (gcloud's CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE form); only a loopback
    endpoint is used without credentials (the tests' fake). `credentials`: explicit credentials to use, else
    Application Default Credentials with a read-only storage scope. `project` is asked only when a client is made.
    """

    def __init__(self, bucket: str | None, endpoint: Endpoint, *, credentials: Any = None,
                 project: Callable[[], str] | None = None) -> None:
        self.bucket = bucket
        self.endpoint = endpoint
        self._credentials = credentials
        self._project = project
        self._client: Any = None
        self._generations: dict[str, str] = {}  # object name -> generation of the copy fetched last

    @classmethod
    def configure(cls, bucket: str | None, endpoint: str | None, **kwargs: Any) -> GcsOutputs:
        """From the provider's options, else GPUPLAN_GCS_BUCKET and CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE."""
        name = (bucket or os.environ.get(BUCKET_ENV) or "").strip().removeprefix("gs://").strip("/") or None
        override = endpoint if endpoint is not None else os.environ.get(STORAGE_ENDPOINT_ENV)
        return cls(name, Endpoint.parse(override, "storage"), **kwargs)

    def url(self, run_id: str) -> str | None:
        """`gs://BUCKET/gpuplan/<run_id>`, or None without a bucket."""
        return run_url("gs", self.bucket, run_id)

    def upload_endpoint(self) -> str | None:
        """The JSON API endpoint the VMs upload to when it is not GCS's default (None: the default)."""
        return self.endpoint.api_endpoint

    def hint(self) -> str:
        """Why a run may lack its exit record, logs and metrics, and how to turn GCS run storage on."""
        if self.bucket:
            return GUEST_HINT
        return f"{GUEST_HINT}; " + bucket_hint(
            f"{BUCKET_ENV} or `bucket` in [providers.gcp]",
            "a service account with storage.objects.create and storage.objects.delete on that bucket")

    def client(self) -> Any:
        """The google-cloud-storage client on the configured endpoint (made once)."""
        if self._client is None:
            # Not `from google.cloud import storage`: google-cloud-storage ships no py.typed, so mypy finds no
            # `storage` in the google.cloud namespace that google-cloud-compute types.
            from google.cloud.storage import Client as StorageClient

            credentials = self._credentials
            if self.endpoint.loopback or credentials is None:
                credentials, _ = self.endpoint.default_credentials([STORAGE_RO_SCOPE])
            project = self._project() if self._project is not None else None
            self._client = StorageClient(project=project, credentials=credentials, **self.endpoint.client_kwargs())
        return self._client

    def fetch(self, instance: Instance, run_dir: str) -> None:
        """Copy what the node shipped to `gs://BUCKET/gpuplan/<run_id>/node-<rank>/` into the run folder (only
        objects whose generation changed since the last fetch). Errors are typed ProviderErrors."""
        if not self.bucket or not instance.run_id or not run_dir:
            return
        prefix = node_prefix(instance.run_id, instance.node_rank)
        try:
            blobs = {blob.name: blob for blob in self.client().list_blobs(self.bucket, prefix=prefix)}
            objects = [StoredObject(name, str(blob.generation)) for name, blob in blobs.items()]
            sync_node_outputs(objects, prefix, lambda name: blobs[name].download_as_bytes(), run_dir,
                              instance.node_rank, self._generations)
        except ProviderError:
            raise
        except Exception as exc:
            raise map_api_error(exc, zone=instance.zone) from exc


def outcome_from_attributes(attributes: dict[str, str], ended_at: str | None) -> dict[str, Any] | None:
    """The exit record held in a VM's `gpuplan/` guest attributes, or None while it holds no exit code."""
    code = attributes.get("exit_code", "").strip()
    if not code.lstrip("-").isdigit():
        return None
    return {"exit_code": int(code), "reason": attributes.get("reason", ""), "ended_at": ended_at}


def read_guest_attributes(instances_client: Any, project: str, zone: str, name: str, retry: Any) -> dict[str, str]:
    """The VM's `gpuplan/` guest attributes (key -> value); {} when it has written none yet."""
    from google.api_core import exceptions as gexc
    from google.cloud import compute_v1

    request = compute_v1.GetGuestAttributesInstanceRequest(project=project, zone=zone, instance=name,
                                                           query_path="gpuplan/")
    try:
        found = instances_client.get_guest_attributes(request=request, retry=retry)
    except gexc.NotFound:
        return {}
    except Exception as exc:
        raise map_api_error(exc, zone=zone) from exc
    return {entry.key: entry.value for entry in found.query_value.items
            if (entry.namespace or "gpuplan") == "gpuplan"}
