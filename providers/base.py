"""The provider contract: launch, describe, terminate and list gpuplan's machines on one backend.

Every provider (local, aws, gcp, slurm, or a third party's) implements `Provider` and is registered under the
entry-point group `gpuplan.providers`, so a package can add one without touching gpuplan. Providers never
import the CLI or the store; orchestration (gpuplan.launching.start) records what they return.

Errors are typed so orchestration can decide: `CapacityError` -> try the next zone/region/offer,
`QuotaError` -> the next region or offer, `AuthError` -> stop and tell the user, `ProviderError` -> anything else.
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

# Tags (AWS) / labels (GCP: lower-case, `-` instead of `:`) on every resource gpuplan creates.
TAG_RUN_ID = "gpuplan:run-id"
TAG_NAME = "gpuplan:name"
TAG_PROJECT = "gpuplan:project"
TAG_CREATED_BY = "gpuplan:created-by"
CREATED_BY = "gpuplan"


class ProviderError(Exception):
    """A provider could not do what was asked; the message is safe to show (no secrets)."""

    exit_code = 1

    def __init__(self, message: str, *, code: str | None = None, zone: str | None = None,
                 region: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.zone = zone
        self.region = region


class CapacityError(ProviderError):
    """No capacity for this type here now (InsufficientInstanceCapacity, ZONE_RESOURCE_POOL_EXHAUSTED, ...)."""


class QuotaError(ProviderError):
    """An account limit stops the launch (InstanceLimitExceeded, QUOTA_EXCEEDED, ...)."""


class AuthError(ProviderError):
    """Credentials are missing or not allowed to do this; retrying elsewhere will not help."""

    exit_code = 2


@dataclass(frozen=True)
class LaunchCheck:
    """What a provider found when checking a launch before anything is recorded (`Provider.check_launch`).

    `notes` are lines the user sees (e.g. which machine image, for which architecture); `details` the same facts
    for --json output.
    """

    notes: tuple[str, ...] = ()
    details: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeIdentityTags:
    """The instance tags from which each node of a multi-node run reads its rank and the master's address at boot
    (`Provider.node_identity_tags`)."""

    rank: str
    master_addr: str


class InstanceState:
    """Provider-neutral instance states."""

    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"
    SUCCEEDED = "succeeded"  # the job on it exited 0 (local/slurm know this; clouds learn it from the job)
    FAILED = "failed"
    TERMINATED = "terminated"
    PREEMPTED = "preempted"  # spot interruption / GCP preemption
    UNKNOWN = "unknown"

    GONE = frozenset({SUCCEEDED, FAILED, TERMINATED, PREEMPTED})


@dataclass(frozen=True)
class LaunchRequest:
    """Everything a provider needs to start a run's machines; built by gpuplan.launching.start from the job spec.

    `secrets` holds values read from the caller's environment at launch time: providers hand them to the
    machine and must never log them or put them in tags, labels or errors.
    """

    run_id: str
    name: str
    command: str
    run_dir: str
    project: str | None = None
    instance_type: str | None = None
    region: str | None = None
    zones: tuple[str, ...] = ()
    gpu: str | None = None
    gpus_per_node: float = 0
    nodes: int = 1
    spot: bool = False
    price_per_hour: Decimal | None = None
    max_hours: float | None = None
    image: str | None = None
    runtime: str | None = None
    workdir: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    boot_script: str | None = field(default=None, repr=False)
    labels: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)

    def tags(self) -> dict[str, str]:
        """The tags every resource of this run carries."""
        tags = {TAG_RUN_ID: self.run_id, TAG_NAME: self.name, TAG_CREATED_BY: CREATED_BY}
        if self.project:
            tags[TAG_PROJECT] = self.project
        return tags


@dataclass
class Instance:
    """A machine (or process group, or batch job) as a provider sees it."""

    provider: str
    instance_id: str
    state: str
    run_id: str | None = None
    cloud: str | None = None
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    gpu: str | None = None
    gpu_count: float = 0
    spot: bool = False
    node_rank: int = 0
    price_per_hour: Decimal | None = None
    launched_at: dt.datetime | None = None
    ended_at: dt.datetime | None = None
    exit_code: int | None = None
    state_reason: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    # When the provider accepted the create call (AWS LaunchTime, GCE creationTimestamp, Slurm submit time, local
    # process start). Unlike `launched_at`, which billing reads and which a queued Slurm job only gets when it
    # starts, this is set from the first moment the machine exists: `gpuplan reconcile` measures an unknown
    # machine's age from it, so a launch that has created its machine but not yet recorded it is not killed.
    created_at: dt.datetime | None = None


@dataclass(frozen=True)
class CloudSecret:
    """A run's secret as the cloud's secret store lists it: its name and whose it is, never its value.

    `name` is what the store calls it (AWS: the SSM parameter `/gpuplan/<run_id>/<NAME>`; GCP: the Secret Manager
    id `gpuplan-<run_id>-<NAME>`); `region` is where it lives (AWS) or None (GCP secrets are global).
    `created_at` is the store's own time (AWS: last modified; GCP: createTime): reconcile's grace rule reads it.
    """

    provider: str
    name: str
    run_id: str | None
    region: str | None = None
    created_at: dt.datetime | None = None


class Provider(abc.ABC):
    """One backend that can run a job's machines."""

    name: ClassVar[str]
    cloud: ClassVar[str]
    # Billing rule used to derive cost from instance rows: AWS Linux and GCP bill per second with a 60 s minimum.
    min_billed_seconds: ClassVar[int] = 0

    @abc.abstractmethod
    def launch(self, request: LaunchRequest) -> list[Instance]:
        """Start the run's machines. Idempotent per run id: if machines tagged with it exist, return them."""

    @abc.abstractmethod
    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        """Current state of these machines; a machine the backend no longer knows comes back TERMINATED."""

    @abc.abstractmethod
    def terminate(self, instance_ids: Sequence[str]) -> None:
        """End these machines (idempotent: ending an ended machine is not an error)."""

    @abc.abstractmethod
    def list_tagged(self, run_id: str | None = None) -> list[Instance]:
        """Every live machine carrying gpuplan's tag (optionally of one run): what reconcile compares."""

    # How orchestration places and starts this provider's machines; it reads these, never the provider's name.
    # True when a launch goes through failover over zones, regions and the catalog's next offers
    # (gpuplan.launching.failover); False when the provider has one place to start machines (this machine).
    tries_placements: ClassVar[bool] = True
    # True when each node is a fresh machine that runs the job from a rendered boot script (cloud user data).
    boots_from_script: ClassVar[bool] = False
    # True when the machines are this very computer, so a CPU bench taken here measures the job's own speed.
    runs_here: ClassVar[bool] = False

    # When set, every node of a multi-node launch boots the *same* script and reads its node rank and the master's
    # address from these instance tags at boot: the provider starts all nodes in one call (so a cluster placement
    # group gets them in one request) and tags them once it knows rank 0's address. None (default): orchestration
    # renders one script per node (`options["boot_script_for"](rank, master_addr)`).
    node_identity_tags: ClassVar[NodeIdentityTags | None] = None

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        """Check, before anything is recorded or started, that this launch can work on this backend.

        Orchestration (gpuplan.launching.sequence.check_gates) calls it with the planned request (a placeholder
        run id, secret names with empty values, the boot script rendered): a launch that cannot work once the
        machines bill (the boot script too big for the cloud, no credentials on the machine for its secrets or
        outputs) is refused here with gpuplan.errors.UserError (one line, exit 2), and nothing is recorded.
        Returns what the user should see about the launch. Default: nothing to check.
        """
        return LaunchCheck()

    def zones(self, region: str) -> list[str]:
        """The zones of `region` a launch may try, in order; [] when the provider has no zones to choose from
        (the failover then tries the region as a whole)."""
        return []

    def include_regions(self, regions: Iterable[str | None]) -> None:
        """Regions a run's machines may be in, beyond the provider's own: a provider that searches only the
        regions it knows (AWS) adds them before `describe`, `terminate` or `list_tagged`. Default: nothing to do."""
        return None

    def quoted_price_per_hour(self, gpus_per_node: float, nodes: int = 1) -> Decimal | None:
        """The provider's own rate for an allocation when it has no price catalog (this machine's configured
        price, a cluster's charge-back), or None: the catalog prices the machine."""
        return None

    # True when the provider keeps a run's secret values in the cloud's secret store (see `secret_parameter`),
    # so the boot script carries only names.
    secrets_by_reference: ClassVar[bool] = False
    # Which store the boot script reads those names from: "ssm" (AWS SSM) or "secretmanager" (GCP Secret Manager).
    secret_store: ClassVar[str] = "ssm"
    # True when the machine reports its exit code through the cloud's own metadata (GCP guest attributes).
    reports_guest_attributes: ClassVar[bool] = False

    def outputs_url(self, run_id: str) -> str | None:
        """Where this run's machines ship their outputs (`s3://` or `gs://BUCKET/gpuplan/RUN_ID`), or None when
        the provider has no storage configured; node `r` writes under `<url>/node-<r>/`."""
        return None

    def outputs_endpoint(self) -> str | None:
        """The storage API endpoint the machines upload to when it is not the cloud's default (GCP: a moved GCS
        JSON API endpoint), or None."""
        return None

    def secret_parameter(self, run_id: str, name: str) -> str:
        """The name under which a run's secret is kept in the cloud's secret store (secrets_by_reference)."""
        return f"/gpuplan/{run_id}/{name}"

    def secrets_endpoint(self) -> str | None:
        """The secret store's API endpoint the machines read from when it is not the cloud's default, or None."""
        return None

    def list_secrets(self) -> list[CloudSecret]:
        """Every run secret gpuplan keeps in this backend's secret store (names only): what reconcile checks for
        leftovers of runs that ended or that a crash forgot. Default: none (the backend keeps no secrets).

        Raises ProviderError when the store cannot be listed (no permission, no endpoint)."""
        return []

    def delete_secrets(self, secrets: Sequence[CloudSecret]) -> dict[CloudSecret, str]:
        """Delete these secrets (one already gone counts as deleted); returns those that could not be deleted,
        each with why. Never raises for a single refusal: reconcile reports it and goes on."""
        return {}

    def fetch_outputs(self, instance: Instance, run_dir: str) -> None:
        """Copy what this machine's job shipped (job.log, metrics, exit record) into the local run folder.

        Files land where the local provider writes them (RUN_DIR/node-<rank>/job.log and exit.json,
        RUN_DIR/metrics.jsonl from rank 0: see gpuplan.providers.outputs), so watch, status, logs and progress
        read a cloud run exactly like a local one. Default: nothing (the machine writes the folder itself).
        Best effort: an error here is logged by the caller, never fatal to a watch step.
        """
        return None

    def outcome_hint(self) -> str | None:
        """Why a finished machine may have left no exit record, and how to fix that (None: not applicable)."""
        return None

    def logs(self, instance: Instance, run_dir: str) -> str | None:
        """Where this machine's job log can be read locally, if the provider knows (default: run_dir/job.log)."""
        return None

    def offers(self) -> list[Any]:
        """Live offers where the backend has a price API (default: none; the shipped catalog is used)."""
        return []
