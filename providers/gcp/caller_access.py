"""Before a GCP launch: may the caller's own credentials do what the run needs in Secret Manager and Cloud Storage?

Why: a launch whose spec has `secrets:` creates a Secret Manager secret per value (providers/gcp/secrets.py) before any
VM starts, and deletes them at the run's end; a run with a bucket (outputs, or the spec's `storage:` on gs://) is read
back by gpuplan from the launching machine. A caller without those permissions used to learn it half-way: a 403 at
the first secret (after the run was recorded), or a run whose logs and checkpoints gpuplan could not read back.

How, as documented: IAM answers "which of these permissions do I hold on this resource" without needing any
permission itself. Secret Manager's permissions at launch are project-level (a secret does not exist yet), asked with
Resource Manager's projects.testIamPermissions
(https://cloud.google.com/resource-manager/reference/rest/v1/projects/testIamPermissions: "Returns permissions that a
caller has on the specified Project"; POST .../v1/projects/PROJECT:testIamPermissions {"permissions": [...]}).
The bucket's with buckets.testIamPermissions (https://cloud.google.com/storage/docs/json_api/v1/buckets/
testIamPermissions: GET .../storage/v1/b/BUCKET/iam/testPermissions?permissions=...), through google-cloud-storage's
`Bucket.test_iam_permissions`. The permissions asked are the ones gpuplan's own calls need (the shipped list,
providers/gcp/launch_roles.json). `CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER` (gcloud's override) moves
Resource Manager; as everywhere, only a loopback endpoint is used without credentials (the tests' fakes).

A missing permission refuses the launch before anything is recorded (UserError, exit 2, naming the permissions and
the role that grants them); a check that cannot run (no credentials, no network) is a note, never a refusal.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from gpuplan.providers.gcp.rules import CLOUD_PLATFORM_SCOPE, Endpoint

RESOURCEMANAGER_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDRESOURCEMANAGER"
RESOURCEMANAGER_DEFAULT = "https://cloudresourcemanager.googleapis.com"
# What SecretStore calls from the launching machine: create + addVersion at launch, list + delete at the run's end.
SECRET_PERMISSIONS = ("secretmanager.secrets.create", "secretmanager.secrets.delete", "secretmanager.secrets.list",
                      "secretmanager.versions.add")
SECRET_ROLE = "roles/secretmanager.admin"
# What gpuplan does with the run's bucket from the launching machine: code and checkpoints up, outputs back.
BUCKET_PERMISSIONS = ("storage.objects.create", "storage.objects.get", "storage.objects.list")
BUCKET_ROLE = "roles/storage.objectUser"


class AccessNotChecked(Exception):
    """The check could not run (no credentials, no network, the project or bucket not visible)."""


def resourcemanager_endpoint() -> Endpoint:
    parsed = Endpoint.parse(os.environ.get(RESOURCEMANAGER_ENDPOINT_ENV), "cloudresourcemanager")
    if parsed.api_endpoint and parsed.api_endpoint.endswith("/v1"):  # gcloud's form names the version
        parsed = Endpoint(parsed.api_endpoint.removesuffix("/v1"), parsed.loopback)
    return parsed


def missing_on_project(project: str, permissions: Sequence[str], credentials: Any = None) -> list[str]:
    """The `permissions` the caller lacks on `project` (projects.testIamPermissions)."""
    from google.auth.transport.requests import AuthorizedSession

    endpoint = resourcemanager_endpoint()
    if endpoint.loopback or credentials is None:
        try:
            credentials, _ = endpoint.default_credentials([CLOUD_PLATFORM_SCOPE])
        except Exception as exc:
            raise AccessNotChecked(str(exc)) from exc
    base = endpoint.api_endpoint or RESOURCEMANAGER_DEFAULT
    try:
        answer = AuthorizedSession(credentials).post(f"{base}/v1/projects/{project}:testIamPermissions",
                                                     json={"permissions": list(permissions)}, timeout=30)
    except Exception as exc:
        raise AccessNotChecked(f"{type(exc).__name__}: {exc}") from exc
    if answer.status_code != 200:
        raise AccessNotChecked(f"projects.testIamPermissions answered HTTP {answer.status_code}")
    granted = set(answer.json().get("permissions") or [])
    return [p for p in permissions if p not in granted]


def missing_on_bucket(storage_client: Callable[[], Any], bucket: str, permissions: Sequence[str]) -> list[str]:
    """The `permissions` the caller lacks on `bucket` (buckets.testIamPermissions); `storage_client` makes the
    google-cloud-storage client (it may need credentials)."""
    try:
        granted = set(storage_client().bucket(bucket).test_iam_permissions(list(permissions)))
    except Exception as exc:
        raise AccessNotChecked(f"{type(exc).__name__}: {exc}") from exc
    return [p for p in permissions if p not in granted]


def refusal(what: str, where: str, missing: Sequence[str], role: str) -> str:
    """The one line a launch refused for want of permissions shows."""
    return (f"{what} needs {', '.join(missing)} on {where}, which your credentials lack (IAM testIamPermissions); "
            f"grant {role} or a custom role with them (docs/providers/gcp-permissions.md)")


def check_caller_access(provider: Any, request: Any) -> list[str]:
    """Refuse (UserError) a launch the caller's credentials cannot carry out in Secret Manager or the run's buckets;
    returns notes for the checks that could not run."""
    from gpuplan.errors import UserError

    notes: list[str] = []
    if request.secrets:
        try:
            missing = missing_on_project(provider.project, SECRET_PERMISSIONS)
        except AccessNotChecked as exc:
            notes.append(f"Secret Manager permissions not checked: {exc}")
        else:
            if missing:
                raise UserError(refusal("keeping the run's secrets in Secret Manager", f"project {provider.project}",
                                        missing, SECRET_ROLE))
    storage = str(request.options.get("run_storage_url") or "")
    buckets = [b for b in dict.fromkeys([provider.bucket, storage.removeprefix("gs://").split("/")[0]
                                         if storage.startswith("gs://") else None]) if b]
    for bucket in buckets:
        try:
            missing = missing_on_bucket(provider.outputs.client, bucket, BUCKET_PERMISSIONS)
        except AccessNotChecked as exc:
            notes.append(f"permissions on gs://{bucket} not checked: {exc}")
            continue
        if missing:
            raise UserError(refusal("the run's storage", f"gs://{bucket}", missing, BUCKET_ROLE))
    return notes
