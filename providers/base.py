"""The provider contract: launch, describe, terminate and list gpuplan's machines on one backend.

Every provider (local, aws, gcp, slurm, or a third party's) implements `Provider` and is registered under the
entry-point group `gpuplan.providers`, so a package can add one without touching gpuplan. Providers never
import the CLI or the store; orchestration (gpuplan.launching.start) records what they return.

Errors are typed so orchestration can decide (gpuplan.launching.failover):
- `PlacementError`: this placement cannot start the machines but another may. Its `scope` (a `Scope`) says which
  placements share the fault and are skipped from now on: a zone, a region, an instance type or family, a market.
  Its subclasses `CapacityError` (default scope: this instance type in this zone) and `QuotaError` (default scope:
  the instance family's quota in this region and market, `Provider.instance_family`) keep their names because
  they are what users read.
- `AuthError`: the caller's identity is refused everywhere (bad or expired credentials, an IAM policy without
  the launch permission): stop and tell the user (exit 2).
- `ProviderError`: anything else; the launch stops, because retrying an unknown failure elsewhere can multiply
  machines.
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, ClassVar

from gpuplan.catalog.offer import Offer
from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost

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


@dataclass(frozen=True)
class Scope:
    """Which placements one failure rules out: every placement matching all the fields that are set.

    `Scope(region="ap-east-1")` is a whole region (not enabled for the account); `Scope(region=R, zone=Z,
    instance_type=T)` one type in one zone (no capacity); `Scope(region=R, family="P", spot=False)` an instance
    family's on-demand quota in a region. `family` is compared with `Provider.instance_family(instance_type)`.
    """

    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    family: str | None = None
    spot: bool | None = None

    def covers(self, *, region: str | None, zone: str | None, instance_type: str | None, family: str | None,
               spot: bool | None) -> bool:
        pairs = ((self.region, region), (self.zone, zone), (self.instance_type, instance_type),
                 (self.family, family), (self.spot, spot))
        return all(want is None or want == have for want, have in pairs)

    def describe(self) -> str:
        """`zone us-east-1a, type p4d.24xlarge` / `region ap-east-1, family P, spot`: what the table shows."""
        parts = [f"{name} {value}" for name, value in (("zone", self.zone), ("region", self.region),
                                                       ("type", self.instance_type), ("family", self.family))
                 if value is not None and not (name == "region" and self.zone)]
        if self.spot is not None:
            parts.append("spot" if self.spot else "on-demand")
        return ", ".join(parts) or "everywhere"


class PlacementError(ProviderError):
    """This placement cannot start the machines, another may: failover skips every placement `scope` covers.

    `scope` None lets failover use the class's default: the exact placement tried (its region, zone, instance
    type and market) for a plain PlacementError.
    """

    def __init__(self, message: str, *, scope: Scope | None = None, code: str | None = None,
                 zone: str | None = None, region: str | None = None) -> None:
        super().__init__(message, code=code, zone=zone, region=region)
        self.scope = scope


class CapacityError(PlacementError):
    """No capacity for this type here now (InsufficientInstanceCapacity, ZONE_RESOURCE_POOL_EXHAUSTED, ...);
    default scope: this instance type in this zone."""


class QuotaError(PlacementError):
    """An account limit stops the launch (VcpuLimitExceeded, QUOTA_EXCEEDED, ...); default scope: the instance
    family (`Provider.instance_family`) in this region and market, since quotas are counted per family."""


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
    (`Provider.node_identity_tags`), and every node's address (`node_ips`, rank order: GPUPLAN_NODE_IPS; empty:
    the provider does not tag them)."""

    rank: str
    master_addr: str
    node_ips: str = ""


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
    machine and must never log them or put them in tags, labels or errors. `labels` are the spec's own, put on
    every resource of the run next to `tags()`. `options` carries, among others, `zones` (the spec's
    `resources.zones`: the only zones to use, and the only way to use an AWS Local Zone), `attempt` (the failover
    attempt number) and `generation` (a spot relaunch's), which AWS puts in its ClientToken.
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
    # Why the job on it failed, in words the user can act on (image pull failed, no such command, out of memory),
    # when the provider learnt it from the runtime (local: gpuplan.jobs.failure_cause); the run's reason quotes it.
    failure_cause: str | None = None


@dataclass(frozen=True)
class SpotPricePoint:
    """From `at` on, the spot market charged `price_per_hour` (until the next point): one row of a price history."""

    at: dt.datetime
    price_per_hour: Decimal


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
    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        """Every live machine carrying gpuplan's tag (optionally of one run): what reconcile compares.

        `include_ended`: also the machines that have ended but the backend still reports (the local provider's
        finished nodes, a GCE VM that stopped), so adopt can bill the time they ran. A backend that forgets a
        machine once it ends returns the live ones either way."""

    # How orchestration places and starts this provider's machines; it reads these, never the provider's name.
    # True when a launch goes through failover over zones, regions and the catalog's next offers
    # (gpuplan.launching.failover); False when the provider has one place to start machines (this machine).
    tries_placements: ClassVar[bool] = True
    # True when each node is a fresh machine that runs the job from a rendered boot script (cloud user data).
    boots_from_script: ClassVar[bool] = False
    # True when the machines are this very computer, so a CPU bench taken here measures the job's own speed.
    runs_here: ClassVar[bool] = False
    # True when the machines see the run folder this computer wrote (this machine, a cluster's shared file system):
    # a checkpoint written there survives a relaunch without the run's durable storage (gpuplan.supervise.resume).
    shares_run_folder: ClassVar[bool] = False
    # True when a planned offer comes from the price catalog (a cloud); False when the provider quotes its own
    # rate (this machine, a cluster): `plan` leaves such providers out of its catalog search.
    priced_by_catalog: ClassVar[bool] = True
    # A spot machine whose history the provider cannot give (`spot_price_history` None) is billed at the newest
    # catalog spot price when this is True (GCP: spot prices change at most once a month, so the catalog's is
    # what was charged: gpuplan.supervise.spot_bill). False: it keeps its launch price.
    spot_priced_by_catalog: ClassVar[bool] = False
    # The run storage schemes this provider's machines reach (`s3`, `gs`, `path` for a shared folder; jobs.storage):
    # a spec's `storage:` of another scheme is refused before anything starts. Empty: any.
    storage_schemes: ClassVar[tuple[str, ...]] = ()
    # True when `fetch_outputs` copies a run's outputs from its `storage:` folder (`<storage>/<run id>/node-<r>/`)
    # when `outputs_url` names none, so `gpuplan logs` names that copy (gpuplan.cli.log_source).
    fetches_run_storage: ClassVar[bool] = False
    # How the user gives this provider credentials, for the error that says none were found.
    credential_hint: ClassVar[str] = ""
    # Spot interruptions per node-hour the planner assumes for this cloud (gpuplan.planning.planner.SpotModel;
    # `plan --interruption-rate` overrides it); None: the highest rate any cloud declares. Each provider cites its
    # figure where it sets it.
    spot_interruptions_per_hour: ClassVar[float | None] = None
    # Seconds a run here spends that no throughput explains (boot, image pull, torch start), used until the
    # provider's own finished runs measure it (gpuplan.calibration.startup), and where the figure comes from.
    startup_seconds: ClassVar[float | None] = None
    startup_why: ClassVar[str] = ""
    # True when `report --bill` can read this cloud's bill per run tag (AWS Cost Explorer: gpuplan.books.cloud_bill).
    bill_by_run_tag: ClassVar[bool] = False
    # Constructor parameters that take live objects from code (a boto3 session, Google credentials), never a value
    # from the config file: not settings (`[providers.aws] session = 0.0` crashed the constructor).
    code_only_parameters: ClassVar[tuple[str, ...]] = ()

    # When set, every node of a multi-node launch boots the *same* script and reads its node rank and the master's
    # address from these instance tags at boot: the provider starts all nodes in one call (so a cluster placement
    # group gets them in one request) and tags them once it knows rank 0's address. None (default): orchestration
    # renders one script per node (`options["boot_script_for"](rank, master_addr)`, with `node_addrs=` every node's
    # address in rank order where the provider knows them before boot).
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

    def missing_gpus(self, gpus_per_node: int) -> str | None:
        """Why this backend cannot give a job `gpus_per_node` GPUs (this machine has no NVIDIA device, a Slurm
        partition has no GPU GRES), in words the user reads after "asks for GPUs but"; None when it can or cannot
        tell. Asked before anything is planned or recorded (gpuplan.launching.gpu_check), so a GPU job never runs
        on a CPU unless the user says so (--allow-cpu). Default None: a cloud's offer has the GPUs it is priced for.
        """
        return None

    def zones(self, region: str) -> list[str]:
        """The zones of `region` a launch may try, in order; [] when the provider has no zones to choose from
        (the failover then tries the region as a whole)."""
        return []

    def named_zones(self, region: str, named: Sequence[str]) -> list[str]:
        """The zones of `region` among those a spec names (`resources.zones`), as this provider launches into them.

        Named zones may include ones `zones(region)` leaves out (AWS Local Zones). Default: the named zones that
        look like zones of `region` (`<region>-a`, `<region>a`)."""
        return [z for z in named if z.startswith(region) and len(z) > len(region)]

    def spot_price_history(self, region: str, zone: str | None, instance_type: str, start: dt.datetime,
                           end: dt.datetime) -> list[SpotPricePoint] | None:
        """The spot price of `instance_type` in `zone` over [start, end], including the price in effect at `start`
        (so a settled spot run is billed at what the cloud charged: gpuplan.supervise.spot_bill). None: this
        provider cannot say (its machines keep their launch price). Default: None."""
        return None

    def catalog_zone(self, region: str, zone: str) -> str:
        """The zone as the price catalog names it, so a placement is priced at its own zone's price
        (gpuplan.launching.zone_prices). Default: the zone itself (GCP zone names are the same in every project);
        AWS maps the account's zone name to its zone id."""
        return zone

    def standard_zone(self, zone: str) -> bool:
        """False for a zone a launch uses only when the spec names it (AWS Local and Wavelength Zones): planning
        leaves such catalog offers out. Default: every zone is standard."""
        return True

    def usable_instance_type(self, instance_type: str | None) -> bool:
        """False for an instance type the provider cannot start with its configured machine image (AWS: an
        explicit AMI of another architecture than the type's): planning leaves such offers out instead of
        choosing one the launch check then refuses. Default: every type."""
        return True

    def enabled_regions(self) -> frozenset[str] | None:
        """The regions this account may use, or None when unknown (then every region is tried): planning leaves
        offers elsewhere out. Raises AuthError when the caller's identity is refused."""
        return None

    def instance_family(self, instance_type: str | None) -> str | None:
        """The quota bucket an instance type counts against (a QuotaError blocks the whole bucket in its region).
        Default: the instance type itself."""
        return instance_type

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

    def outputs_url(self, run_id: str) -> str | None:
        """Where this run's machines ship their outputs (`s3://` or `gs://BUCKET/gpuplan/RUN_ID`), or None when
        the provider has no storage configured; node `r` writes under `<url>/node-<r>/`."""
        return None

    def secret_parameter(self, run_id: str, name: str) -> str:
        """The name under which a run's secret is kept in the cloud's secret store (secrets_by_reference)."""
        return f"/gpuplan/{run_id}/{name}"

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

    def spot_price_source(self) -> str:
        """How the spot bill names where its prices came from (`aws: DescribeSpotPriceHistory`)."""
        return f"{self.cloud}: spot price history"

    def boot_cloud(self) -> BootCloud:
        """The cloud's part of the boot script (gpuplan.jobs.boot_cloud): how a machine reads its run's secrets
        from the cloud's store, ships its outputs to the cloud's storage and reports its exit code. Default: no
        secret store, outputs only to a shared folder path, nothing to report to."""
        return BootCloud()


# ---- capabilities a provider declares by subclassing (dstack's `ComputeWith...` mixins): orchestration asks
# `isinstance(provider, Attachable)`, never the provider's name, and a capability's methods are abstract, so a
# provider that declares one and forgets a method cannot be built.


class Attachable(abc.ABC):
    """`gpuplan exec/ssh` can reach this provider's machines: `attach` builds the command line that does."""

    # The ways in `--via` may name, the default first; () for a provider with one way (then --via is refused).
    ways_in: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        """The command line into `target` for `command` (None: an interactive shell). `prepare=False` (--print)
        only builds it: nothing on the machine's side is changed. Raises ProviderError when it cannot."""

    # True when one recorded machine holds every node of a run (a Slurm job): `--node N` picks the node inside it
    # instead of a row per node.
    one_step_for_all_nodes: ClassVar[bool] = False

    def ssh_host(self, target: AttachTarget) -> SshHost | None:
        """How plain `ssh` reaches `target` (an ssh_config Host: `gpuplan ssh RUN --config`), or None when this
        provider's machines take no ssh login (this machine, a Slurm step)."""
        return None


class PublishesPrices(abc.ABC):
    """The cloud publishes prices anyone may read: `gpuplan catalog refresh --source public` (and `auto` without
    credentials) stores them. What the public source lacks (AWS: zones, spot prices; GCP: the machine types) is
    taken from the previous snapshot, named in `origin`, and the snapshot's source says so."""

    # What still needs an account, for the refresh's note (`zones and spot prices (EC2 ...)`).
    account_needed_for: ClassVar[str] = ""
    # True when the public source is the whole refresh (Azure's Retail Prices API has Spot too): `--source auto`
    # reads it whether or not credentials are found, and nothing is kept from the previous snapshot.
    public_source_complete: ClassVar[bool] = False
    # What the public source itself needs, for the stale-prices hint (GCP's Billing Catalog: an API key); empty:
    # nothing at all.
    public_source_needs: ClassVar[str] = ""

    @classmethod
    @abc.abstractmethod
    def has_price_credentials(cls) -> bool:
        """Whether the price API would find credentials here, asked without a network call."""

    @abc.abstractmethod
    def refresh_public_prices(self, regions: Sequence[str] | None, now: dt.datetime, previous: Sequence[Offer],
                              origin: str, progress: Callable[[str], None] | None = None) -> PriceRefresh:
        """The public source's offers (in `regions`, or where `previous` has offers), completed from `previous`;
        raises on any failure (the previous prices are kept)."""


class RefreshesPrices(abc.ABC):
    """The cloud has a price API: `gpuplan catalog refresh --cloud NAME` stores its live offers."""

    # The refresh's own options the CLI may pass to the constructor (GCP: `project`, its type lists' project).
    refresh_settings: ClassVar[tuple[str, ...]] = ()

    @abc.abstractmethod
    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        """Every GPU offer the cloud prices now (in `regions`, or everywhere); raises on any failure, so the
        caller keeps the previous prices (gpuplan.catalog.refresh)."""
