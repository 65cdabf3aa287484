"""A GCP run's secrets in Secret Manager, so the VM's startup-script metadata carries only their names.

Why: the startup script is instance metadata, readable by anyone allowed `compute.instances.get` in the project
(Compute Viewer). AWS keeps the values in SSM Parameter Store for the same reason (providers/aws.py); on GCP each
secret of a run becomes a Secret Manager secret `gpuplan-<run_id>-<NAME>`, labelled like every gpuplan resource,
with one version holding the value. The boot script (jobs.bootstrap) fetches `.../versions/latest:access` with
the VM service account's token, so the VM needs a service account with the cloud-platform scope (Secret Manager
has no narrower OAuth scope: IAM narrows it, see providers/gcp_outputs.vm_service_account and the README).

The run's secrets are deleted when the run no longer needs them: a launch that failed (its zone will not run
the job), and a run with no VM left running (stop, a cap, the job's own power-off). Deleting is best effort: a
failure is logged as a warning, never raised (the run's end must not fail over a leftover secret).

The client is the official `google-cloud-secret-manager` on the REST transport, imported inside the methods only
(`gpuplan --help` and `estimate` must not pay for it). `CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER` (gcloud's
own override) or the provider's `secretmanager_endpoint` option moves the endpoint, for both this client and the
VM; only a loopback endpoint is used without credentials (the tests' fake, tests/support/fakes/secretmanager_server.py).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from gpuplan.providers.base import CloudSecret, ProviderError
from gpuplan.providers.gcp.rules import (
    CLOUD_PLATFORM_SCOPE,
    LABEL_CREATED_BY,
    LABEL_RUN_ID,
    Endpoint,
    label_value,
    map_api_error,
    service_disabled,
)

log = logging.getLogger(__name__)

SECRETMANAGER_ENDPOINT_ENV = "CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER"
SECRETMANAGER_SERVICE = "secretmanager.googleapis.com"
SECRET_PREFIX = "gpuplan-"
# The VM label that says "this run keeps secrets in Secret Manager": a later process (`gpuplan stop`, a watch
# step) learns from the VM alone that the run's secrets must be deleted when it ends.
LABEL_SECRETS = "gpuplan-secrets"
LABEL_SECRETS_VALUE = "secret-manager"
_SECRET_ID = re.compile(r"[A-Za-z0-9_-]{1,255}")
# After a failed delete of a run's secrets, how long the same process leaves them alone: one `gpuplan stop` asks
# more than once (terminate, then the gone VM's outputs fetch), and asking an unreachable API again within the
# same command only doubles the wait (and used to repeat the warning); a long watch still tries again later.
RETRY_FORGET_SECONDS = 60.0


def secret_id(run_id: str, name: str) -> str:
    """`gpuplan-<run_id>-<NAME>`, checked against Secret Manager's id rules ([A-Za-z0-9_-], at most 255)."""
    candidate = f"{SECRET_PREFIX}{run_id}-{name}"
    if not _SECRET_ID.fullmatch(candidate):
        raise ProviderError(f"cannot keep secret {name!r} of run {run_id!r} in Secret Manager: the id {candidate!r} "
                            "must be at most 255 letters, digits, '_' or '-'", code="BadSecretName")
    return candidate


def run_prefix(run_id: str) -> str:
    return f"{SECRET_PREFIX}{run_id}-"


class SecretStore:
    """One project's Secret Manager as gpuplan uses it: put a run's secrets, delete them, name them for the VM.

    `project` is asked only when a call is made (it may need Application Default Credentials).
    """

    def __init__(self, endpoint: Endpoint, project: Callable[[], str], *, credentials: Any = None) -> None:
        self.endpoint = endpoint
        self._project = project
        self._credentials = credentials
        self._client: Any = None
        self.known: set[str] = set()  # runs known to keep secrets here (put by this process, or VM labels)
        # Runs whose secrets this store failed to delete, and when (time.monotonic); those warned about.
        self._failed_at: dict[str, float] = {}
        self._warned: set[str] = set()

    @classmethod
    def configure(cls, endpoint: str | None, project: Callable[[], str], **kwargs: Any) -> SecretStore:
        """From the provider's `secretmanager_endpoint`, else CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER."""
        override = endpoint if endpoint is not None else os.environ.get(SECRETMANAGER_ENDPOINT_ENV)
        parsed = Endpoint.parse(override, "secretmanager")
        if parsed.api_endpoint and parsed.api_endpoint.endswith("/v1"):  # gcloud's form names the version
            parsed = Endpoint(parsed.api_endpoint.removesuffix("/v1"), parsed.loopback)
        return cls(parsed, project, **kwargs)

    def resource(self, run_id: str, name: str) -> str:
        """The secret's resource name, what the boot script reads (`<resource>/versions/latest:access`)."""
        return f"projects/{self._project()}/secrets/{secret_id(run_id, name)}"

    def vm_endpoint(self) -> str | None:
        """The API endpoint the VMs read from when it is not Secret Manager's default (None: the default)."""
        return self.endpoint.api_endpoint

    def client(self) -> Any:
        """The google-cloud-secret-manager client on the REST transport and the configured endpoint (made once)."""
        if self._client is None:
            from google.cloud import secretmanager

            credentials = self._credentials
            if self.endpoint.loopback or credentials is None:
                credentials, _ = self.endpoint.default_credentials([CLOUD_PLATFORM_SCOPE])
            self._client = secretmanager.SecretManagerServiceClient(credentials=credentials, transport="rest",
                                                                    **self.endpoint.client_kwargs())
        return self._client

    def put(self, run_id: str, secrets: Mapping[str, str], labels: Mapping[str, str]) -> None:
        """Create `gpuplan-<run_id>-<NAME>` (labelled) for each secret and add a version holding its value.

        A secret that exists already (a retried launch, another zone of the same run) gets a new version, so the
        VM's `latest` is this launch's value. Errors name the secret, never the value (`from None`: no chained
        exception carries the request).
        """
        if not secrets:
            return
        from google.api_core import exceptions as gexc

        client = self.client()
        parent = f"projects/{self._project()}"
        for name, value in sorted(secrets.items()):
            sid = secret_id(run_id, name)
            try:
                try:
                    client.create_secret(request={
                        "parent": parent, "secret_id": sid,
                        "secret": {"replication": {"automatic": {}}, "labels": dict(labels)}})
                except gexc.Conflict:  # 409 ALREADY_EXISTS
                    log.debug("secret %s exists already (a retried launch): adding a version", sid)
                data = value.encode()
                client.add_secret_version(request={
                    "parent": f"{parent}/secrets/{sid}",
                    "payload": {"data": data, "data_crc32c": _crc32c(data)}})
            except Exception as exc:
                error = map_api_error(exc)
                raise type(error)(f"cannot store secret {name} of run {run_id} in Secret Manager: {error}",
                                  code=error.code) from None

    def forget_if_done(self, run_id: str | None, runs_a_vm: Callable[[str], bool]) -> None:
        """Delete the secrets of a run known to have some once `runs_a_vm(run_id)` says no VM needs them."""
        if not run_id or run_id not in self.known:
            return
        try:
            if runs_a_vm(run_id):
                return
        except ProviderError as exc:
            log.warning("cannot tell whether run %s still needs its secrets: %s", run_id, exc)
            return
        self.forget(run_id)

    def forget(self, run_id: str) -> bool:
        """Delete every secret of the run (found by name prefix, checked against gpuplan's labels).

        Best effort: a failure is logged and False is returned, never raised. The warning (with what to delete by
        hand) comes once per run and process: a later failure, or a call within RETRY_FORGET_SECONDS of the last
        one (not sent at all), is a debug line; a run not known to have secrets only ever gets debug lines.
        """
        import time

        from google.api_core import exceptions as gexc

        prefix = run_prefix(run_id)
        failed_at = self._failed_at.get(run_id)
        if failed_at is not None and time.monotonic() - failed_at < RETRY_FORGET_SECONDS:
            log.debug("not asking again to delete the secrets of run %s: it failed %.0f s ago", run_id,
                      time.monotonic() - failed_at)
            return False
        try:
            client = self.client()
            listing = client.list_secrets(request={"parent": f"projects/{self._project()}",
                                                   "filter": f"name:{prefix}"})
            names = [s.name for s in listing if _owned(s, prefix, run_id)]
            for name in names:
                try:
                    client.delete_secret(request={"name": name})
                except gexc.NotFound:
                    continue
            if names:
                log.info("deleted %d secret(s) of run %s from Secret Manager", len(names), run_id)
            self.known.discard(run_id)
            self._failed_at.pop(run_id, None)
            return True
        except Exception as exc:
            self._failed_at[run_id] = time.monotonic()
            warn = run_id in self.known and run_id not in self._warned
            if warn:
                self._warned.add(run_id)
            say = log.warning if warn else log.debug
            say("could not delete the secrets of run %s from Secret Manager: %s (delete the secrets named %s* by "
                "hand)", run_id, map_api_error(exc), prefix)
            return False


    def list_all(self, provider: str) -> list[CloudSecret]:
        """Every secret gpuplan made in the project (id prefix `gpuplan-` and gpuplan's created-by label), with the
        run its labels name: what `gpuplan reconcile` checks for leftovers. Only metadata is read, never a value.

        None found when the project has the Secret Manager API disabled (a 403 SERVICE_DISABLED): gpuplan stores
        secrets only through that API, so a project that never enabled it (no spec with `secrets:` ever ran there)
        holds none of gpuplan's, and reconcile need not warn on every run. Any other failure, a missing permission
        above all, raises the mapped ProviderError: then there may be secrets it cannot see."""
        try:
            listing = self.client().list_secrets(request={"parent": f"projects/{self._project()}",
                                                          "filter": f"name:{SECRET_PREFIX}"})
            found = []
            for secret in listing:
                sid = str(secret.name).rsplit("/", 1)[-1]
                labels = dict(secret.labels)
                if not sid.startswith(SECRET_PREFIX) or labels.get(LABEL_CREATED_BY) != "gpuplan":
                    continue
                found.append(CloudSecret(provider=provider, name=sid, run_id=run_of(sid, labels.get(LABEL_RUN_ID)),
                                         created_at=_timestamp(getattr(secret, "create_time", None))))
            return found
        except ProviderError:
            raise
        except Exception as exc:
            if service_disabled(exc, SECRETMANAGER_SERVICE):
                log.debug("the Secret Manager API is not enabled in the project: no gpuplan secret can be there")
                return []
            error = map_api_error(exc)
            raise type(error)(f"cannot list Secret Manager secrets: {error}", code=error.code) from None

    def delete(self, secrets: Sequence[CloudSecret]) -> dict[CloudSecret, str]:
        """Delete these secrets by id (one already gone counts as deleted); returns the refused ones with why."""
        from google.api_core import exceptions as gexc

        failed: dict[CloudSecret, str] = {}
        for secret in secrets:
            try:
                self.client().delete_secret(request={"name": f"projects/{self._project()}/secrets/{secret.name}"})
            except gexc.NotFound:
                continue
            except Exception as exc:
                failed[secret] = str(map_api_error(exc))
        return failed


def run_of(secret_id: str, run_label: str | None) -> str | None:
    """The run a secret `gpuplan-<run_id>-<NAME>` belongs to, read from its id where its run-id label agrees.

    The id alone is ambiguous (run ids and names may hold `-`), and the label is the run id made label-safe
    (lower case, at most 63 characters), so the run id is the stretch of the id after the prefix that the label
    describes. None when they disagree: reconcile then cannot tell the secret's run and never deletes it.
    """
    if not run_label or not secret_id.startswith(SECRET_PREFIX):
        return None
    rest = secret_id[len(SECRET_PREFIX):]
    if rest.startswith(run_label + "-"):
        return run_label
    candidate = rest[:len(run_label)]
    if len(run_label) < 63 and label_value(candidate) == run_label and rest[len(run_label):].startswith("-"):
        return candidate
    return None


def _timestamp(value: Any) -> dt.datetime | None:
    """createTime as an aware datetime (proto-plus gives a DatetimeWithNanoseconds, already a datetime)."""
    if not isinstance(value, dt.datetime):
        return None
    return value if value.tzinfo else value.replace(tzinfo=dt.timezone.utc)


def _owned(secret: Any, prefix: str, run_id: str) -> bool:
    """A secret this run made: its id has the run's prefix and it carries gpuplan's labels for the run."""
    sid = str(secret.name).rsplit("/", 1)[-1]
    labels = dict(secret.labels)
    return (sid.startswith(prefix) and labels.get(LABEL_CREATED_BY) == "gpuplan"
            and labels.get(LABEL_RUN_ID) == label_value(run_id))


def _crc32c(data: bytes) -> int:
    """Secret Manager checks the payload against this checksum (a value damaged on the way is refused)."""
    import google_crc32c

    return int(google_crc32c.value(data))
