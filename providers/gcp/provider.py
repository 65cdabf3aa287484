"""Google Compute Engine: launch a run's GPU VMs, watch them, delete them, and find every one gpuplan owns.

Safety rules this module keeps, because each one is a way to get a surprise bill or a breach:

- Idempotency, twice over: before any insert the provider looks for live VMs labelled with the run id (a crashed
  earlier attempt may have started them in another zone), and every insert carries a `requestId` derived from the
  run id, the zone, the launch generation and the node rank, so a retried call returns the same operation on GCE
  instead of a second VM. The VM names are deterministic as well, so a third insert would hit `alreadyExists`.
- Every VM and its boot disk carry gpuplan's labels (reconcile finds them by label).
- The on-cloud fail-safe: `scheduling.maxRunDuration` from `max_hours` with `instanceTerminationAction=DELETE`,
  so a VM whose controller died is deleted by GCE itself; spot VMs are deleted on preemption, not stopped
  (a stopped VM still bills its disk).
- GPUs cannot live-migrate: `onHostMaintenance=TERMINATE`, no automatic restart.
- Throttling (429/503, `rateLimitExceeded`) is retried with google-api-core's own Retry, which is safe because
  every insert is idempotent through its requestId.

`google.cloud.compute_v1` costs ~2 s to import, so it is imported inside this module's methods only. Clients use
the REST transport. Credentials are Application Default Credentials; the Compute endpoint honours gcloud's own
`CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE`, and anonymous credentials are used only when that endpoint is on the
loopback interface (that is how the tests reach the fake server in tests/support/fakes/gce_server.py).

Long-running operations are awaited with our own `ZoneOperationsClient.wait`: the client's built-in
`operation.result()` polls through an internal client that ignores a custom endpoint.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

from gpuplan.errors import UserError
from gpuplan.providers.base import (
    CapacityError,
    CloudSecret,
    Instance,
    InstanceState,
    LaunchCheck,
    LaunchRequest,
    Provider,
    ProviderError,
)
from gpuplan.providers.gcp.caller_access import check_caller_access
from gpuplan.providers.gcp.capabilities import GcpCapabilities
from gpuplan.providers.gcp.data_nics import DataNic, data_fabric, ensure_data_nics
from gpuplan.providers.gcp.firewall import ensure_internal_rule
from gpuplan.providers.gcp.instance import image, instance_body, to_instance
from gpuplan.providers.gcp.offered import offered_gpus
from gpuplan.providers.gcp.outputs import GcsOutputs, outcome_from_attributes, read_guest_attributes
from gpuplan.providers.gcp.placement import delete_compact_policy, ensure_compact_policy, wants_compact
from gpuplan.providers.gcp.preflight import ImageFamilies, check_labels
from gpuplan.providers.gcp.rules import (
    CLOUD_PLATFORM_SCOPE,
    DEFAULT_BOOT_DISK_GB,
    DEFAULT_BOOT_DISK_TYPE,
    DEFAULT_IMAGE_FAMILY,
    DEFAULT_IMAGE_PROJECT,
    DEFAULT_REGION,
    ENDPOINT_ENV,
    LABEL_CREATED_BY,
    LABEL_RUN_ID,
    MAX_REQUEST_ATTEMPTS,
    PREEMPTED_OPERATION,
    PROJECT_ENVS,
    Endpoint,
    check_market,
    choose_machine_type,
    instance_name,
    label_value,
    labels_for,
    last_segment,
    map_api_error,
    map_operation_error,
    region_of,
    request_id,
    retryable,
)
from gpuplan.providers.gcp.secrets import LABEL_SECRETS, LABEL_SECRETS_VALUE, SecretStore
from gpuplan.providers.outputs import read_exit_record, write_exit_record

log = logging.getLogger(__name__)


class GcpProvider(GcpCapabilities, Provider):
    """Compute Engine VMs for gpuplan runs.

    Configuration (constructor keywords; most are overridable per launch through `LaunchRequest.options`):
    `project` (else GOOGLE_CLOUD_PROJECT / CLOUDSDK_CORE_PROJECT / the ADC project), `region` (used when a launch
    names no zone), `regions` (accepted for parity with AWS; list_tagged still searches every zone, because one
    aggregatedList call covers them all and an orphan in a region the books never mention must not be missed),
    `endpoint` (else CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE), `delete_when_stopped` (default on: see describe),
    `image` (an explicit VM image URL; per launch `options["vm_image"]`) or `image_project` + `image_family`,
    `boot_disk_gb`, `boot_disk_type`, `network`, `subnetwork`, `external_ip`, `service_account` (+ `scopes`;
    default: no service account, least privilege), `wait_timeout` (seconds to wait for an operation),
    `retry_initial` / `retry_timeout` (throttling), `bucket` (else GPUPLAN_GCS_BUCKET: the GCS bucket the boot
    script ships each node's job.log, metrics and exit.json to, under `gpuplan/<run_id>/node-<rank>/`; with it
    the VM gets a service account with the devstorage.read_write scope: see providers/gcp_outputs.py) and
    `storage_endpoint` (else CLOUDSDK_API_ENDPOINT_OVERRIDES_STORAGE), `secretmanager_endpoint` (else
    CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER: where a run's secrets are kept, providers/gcp_secrets.py).
    """

    name: ClassVar[str] = "gcp"
    cloud: ClassVar[str] = "gcp"
    min_billed_seconds: ClassVar[int] = 60
    boots_from_script: ClassVar[bool] = True  # each node runs jobs.bootstrap's script from its user data
    secrets_by_reference: ClassVar[bool] = True  # Secret Manager: the startup script names secrets, holds no value
    storage_schemes: ClassVar[tuple[str, ...]] = ("gs",)
    # GCE spot prices change at most once a month: the catalog's is what a spot VM was charged.
    spot_priced_by_catalog: ClassVar[bool] = True
    credential_hint: ClassVar[str] = ("run `gcloud auth application-default login` or set "
                                      "GOOGLE_APPLICATION_CREDENTIALS")
    code_only_parameters: ClassVar[tuple[str, ...]] = ("credentials",)

    def __init__(
        self,
        *,
        project: str | None = None,
        region: str | None = None,
        regions: Sequence[str] | None = None,
        endpoint: str | None = None,
        image: str | None = None,
        image_project: str = DEFAULT_IMAGE_PROJECT,
        image_family: str = DEFAULT_IMAGE_FAMILY,
        boot_disk_gb: int = DEFAULT_BOOT_DISK_GB,
        boot_disk_type: str = DEFAULT_BOOT_DISK_TYPE,
        network: str = "global/networks/default",
        subnetwork: str | None = None,
        external_ip: bool = True,
        service_account: str | None = None,
        scopes: Sequence[str] | None = None,
        delete_when_stopped: bool = True,
        wait_timeout: float = 900.0,
        retry_initial: float = 1.0,
        retry_timeout: float = 120.0,
        bucket: str | None = None,
        storage_endpoint: str | None = None,
        secretmanager_endpoint: str | None = None,
        credentials: Any = None,
    ) -> None:
        self.endpoint = Endpoint.parse(endpoint if endpoint is not None else os.environ.get(ENDPOINT_ENV))
        self._credentials = credentials
        self._project = project
        self.region = region or DEFAULT_REGION
        self.regions = list(dict.fromkeys(regions or []))
        self.image = image
        self.image_project = image_project
        self.image_family = image_family
        self.boot_disk_gb = boot_disk_gb
        self.boot_disk_type = boot_disk_type
        self.network = network
        self.subnetwork = subnetwork
        self.external_ip = external_ip
        self.service_account = service_account
        self.scopes = list(scopes) if scopes else None
        self.delete_when_stopped = delete_when_stopped
        self.wait_timeout = wait_timeout
        self.retry_initial = retry_initial
        self.retry_timeout = retry_timeout
        self._clients: dict[str, Any] = {}
        # zone/name -> the exit record read from the VM's guest attributes (read before gpuplan deletes the VM).
        self._outcomes: dict[str, dict[str, Any]] = {}
        self.outputs = GcsOutputs.configure(bucket, storage_endpoint, credentials=credentials,
                                            project=lambda: self.project)
        self.secrets = SecretStore.configure(secretmanager_endpoint, lambda: self.project, credentials=credentials)
        self._run_of: dict[str, str] = {}  # zone/name -> run id, from the VMs' labels
        self._placed: dict[str, str] = {}  # zone/name -> run id of VMs in a compact placement policy
        self.image_families = ImageFamilies()  # images.getFromFamily, once per (project, family)

    @property
    def bucket(self) -> str | None:
        return self.outputs.bucket

    # ---- configuration and clients -------------------------------------------------------------------------

    @property
    def project(self) -> str:
        """The GCP project: the `project` option, else GOOGLE_CLOUD_PROJECT / CLOUDSDK_CORE_PROJECT, else ADC's."""
        if self._project:
            return self._project
        for var in PROJECT_ENVS:
            if os.environ.get(var):
                self._project = os.environ[var]
                return self._project
        _, adc_project = self._default_credentials()
        if not adc_project:
            raise ProviderError("no GCP project: pass --project, or set GOOGLE_CLOUD_PROJECT", code="NoProject")
        self._project = str(adc_project)
        return self._project

    def _default_credentials(self) -> tuple[Any, str | None]:
        """Anonymous credentials for a loopback endpoint (the tests' fake), Application Default Credentials else."""
        return self.endpoint.default_credentials([CLOUD_PLATFORM_SCOPE])

    def client(self, kind: str) -> Any:
        """One REST client per service (`InstancesClient`, `ZoneOperationsClient`, ...), all on the same endpoint."""
        if kind not in self._clients:
            from google.cloud import compute_v1

            if self._credentials is None:
                self._credentials, _ = self._default_credentials()
            self._clients[kind] = getattr(compute_v1, kind)(credentials=self._credentials, transport="rest",
                                                            **self.endpoint.client_kwargs())
        return self._clients[kind]

    def _retry(self) -> Any:
        from google.api_core.retry import Retry

        return Retry(predicate=retryable, initial=self.retry_initial, maximum=max(self.retry_initial * 16, 1.0),
                     multiplier=2.0, timeout=self.retry_timeout)

    def _call(self, fn: Any, **kwargs: Any) -> Any:
        """Call a client method with the throttling retry, mapping every failure to a typed ProviderError."""
        try:
            return fn(retry=self._retry(), **kwargs)
        except ProviderError:
            raise
        except Exception as exc:
            raise map_api_error(exc, zone=kwargs.get("zone")) from exc

    def _option(self, request: LaunchRequest, key: str, default: Any) -> Any:
        value = request.options.get(key) if request.options else None
        return default if value is None else value

    # ---- zones ---------------------------------------------------------------------------------------------

    def zones(self, region: str) -> list[str]:
        """The region's zones that are UP, in name order: the failover loop tries them one after the other."""
        pager = self._call(self.client("ZonesClient").list, project=self.project)
        found = [z.name for z in pager
                 if last_segment(z.region) == region and (z.status or "UP") == "UP"]
        return sorted(found)

    # ---- launch --------------------------------------------------------------------------------------------

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        """Refuse before anything is recorded (UserError, exit 2) what GCE would refuse in every zone because of the
        user's own configuration: spec labels breaking GCE's label rules, a boot image family missing from its image
        project (providers/gcp/preflight.py), credentials lacking what the run's secrets and buckets need."""
        check_labels(request.labels)
        notes = check_caller_access(self, request)  # Secret Manager and bucket permissions (.caller_access)
        try:
            self.image_families.check_for_user(image(self, request), lambda: self.client("ImagesClient"),
                                               self._retry())
        except UserError:
            raise  # the family is missing: the user's configuration
        except ProviderError as exc:  # no credentials or no network (a dry run on a laptop): the launch will say
            notes.append(f"boot image family not checked: {exc}")
        return LaunchCheck(notes=tuple(notes))

    def launch(self, request: LaunchRequest) -> list[Instance]:
        """Start the run's nodes in one zone (all or nothing); return the existing ones if the run already has some."""
        existing = [i for i in self.list_tagged(request.run_id)
                    if i.state not in InstanceState.GONE and i.ended_at is None]  # a stopped VM is not "running"
        have = {i.node_rank for i in existing}
        missing = [rank for rank in range(request.nodes) if rank not in have]
        if not missing:
            log.info("run %s already has %d VM(s) in %s; not launching again", request.run_id, len(existing),
                     existing[0].zone)
            for inst in existing:
                inst.price_per_hour = request.price_per_hour
            return sorted(existing, key=lambda i: i.node_rank)
        # A multi-node launch cut short (a crash between two inserts) is completed in the zone it started in.
        zone = (existing[0].zone if existing else None) or self._zone_for(request)
        machine_type = choose_machine_type(request.instance_type, request.gpu, request.gpus_per_node)
        check_market(machine_type, request.spot, zone=zone)  # Spot/Flex-only shapes: no on-demand insert
        # A missing image family is the same 404 in every zone: stop before any insert (asked once, then cached).
        self.image_families.check(image(self, request), lambda: self.client("ImagesClient"), self._retry())
        gpus = offered_gpus(self.client, self.project, self._retry(), zone, machine_type, request)
        if request.nodes > 1:  # the ranks must reach each other on a network of the user's own (.firewall)
            ensure_internal_rule(self, str(self._option(request, "network", self.network)))
        fabric = data_fabric(machine_type, request.nodes)  # A3 GPUDirect data NICs (.data_nics)
        data_nics = ensure_data_nics(self, region_of(zone), fabric[1]) if fabric else []
        generation = int(self._option(request, "generation", 0))
        started: list[tuple[str, Any]] = []  # (name, insert operation)
        compact = wants_compact(machine_type, request.nodes)  # the nodes close together (.placement)
        try:
            if request.secrets:  # before any VM: its boot script reads them
                self.secrets.known.add(request.run_id)
                self.secrets.put(request.run_id, request.secrets, labels_for(request))
            policy = ensure_compact_policy(self, region_of(zone), request.run_id, request.nodes) if compact else None
            for rank in missing:
                name = instance_name(request.run_id, rank, generation)
                body = self._instance_body(request, zone, name, machine_type, gpus, rank, data_nics)
                body.resource_policies = [policy] if policy else []
                req_id = self._unspent_request_id(zone, request.run_id, generation, rank)
                started.append((name, self._insert(zone, body, req_id)))
            for _, operation in started:
                self._wait(zone, operation)
        except ProviderError:
            self._delete_quietly(zone, [name for name, _ in started])
            if not existing and request.secrets:  # this zone will not run the job: its secrets must not linger
                self.secrets.forget(request.run_id)
            if not existing and compact:
                delete_compact_policy(self, region_of(zone), request.run_id)
            raise
        instances = [*existing, *self.describe([f"{zone}/{name}" for name, _ in started])]
        for inst in instances:
            inst.price_per_hour = request.price_per_hour
        return sorted(instances, key=lambda i: i.node_rank)

    def _zone_for(self, request: LaunchRequest) -> str:
        if request.zones:
            return request.zones[0]
        region = request.region or self.region
        zones = self.zones(region)
        if not zones:
            raise CapacityError(f"no zone is UP in {region}", code="NoZone", region=region)
        return zones[0]

    def _instance_body(self, request: LaunchRequest, zone: str, name: str, machine_type: str,
                       gpus: tuple[str | None, int], rank: int, data_nics: Sequence[DataNic] = ()) -> Any:
        """The Instance resource for one node (providers/gcp/instance.py)."""
        return instance_body(self, request, zone, name, machine_type, gpus, rank, data_nics)

    def _unspent_request_id(self, zone: str, run_id: str, generation: int, rank: int) -> str:
        """The requestId for this insert: attempt 0's, unless GCE already finished an insert with that id.

        GCE answers a reused requestId with the first operation, so after a definite failure (no capacity an hour
        ago) or a VM since deleted, the same id would replay the old outcome. Operations carry the requestId as
        `clientOperationId`; an id whose operation is DONE (and whose VM the label lookup did not find) is spent,
        and the next attempt number is used. An id whose operation still runs is reused: that is the retry case.
        """
        from google.cloud import compute_v1

        ops = self.client("ZoneOperationsClient")
        for attempt in range(MAX_REQUEST_ATTEMPTS):
            req_id = request_id(run_id, zone, generation, rank, attempt)
            listing = compute_v1.ListZoneOperationsRequest(project=self.project, zone=zone,
                                                           filter=f'(clientOperationId = "{req_id}")')
            previous = list(self._call(ops.list, request=listing))
            if not any(_is_done(op) for op in previous):
                return req_id
            log.info("requestId attempt %d of %s in %s was used already; taking the next", attempt, run_id, zone)
        raise ProviderError(f"{MAX_REQUEST_ATTEMPTS} launches of run {run_id} in {zone} already finished; start a "
                            "new run instead of relaunching this one", code="TooManyAttempts", zone=zone,
                            region=region_of(zone))

    def _insert(self, zone: str, body: Any, req_id: str) -> Any:
        from google.api_core import exceptions as gexc
        from google.cloud import compute_v1

        insert = compute_v1.InsertInstanceRequest(project=self.project, zone=zone, instance_resource=body,
                                                  request_id=req_id)
        try:
            return self.client("InstancesClient").insert(request=insert, retry=self._retry())
        except gexc.Conflict:
            # The deterministic name exists: an earlier attempt of this same run made it (list_tagged missed it
            # only if it was not labelled yet). Wait on nothing; describe() reads it.
            log.info("VM %s already exists in %s; reusing it", body.name, zone)
            return None
        except Exception as exc:
            raise map_api_error(exc, zone=zone, project=self.project) from exc

    def _wait(self, zone: str, operation: Any) -> None:
        """Wait for a zone operation with our own ZoneOperationsClient (operation.result() ignores the endpoint)."""
        if operation is None:
            return
        name = operation.name
        ops = self.client("ZoneOperationsClient")
        deadline = time.monotonic() + self.wait_timeout
        current = operation
        while not _is_done(current):
            if time.monotonic() > deadline:
                raise ProviderError(f"operation {name} in {zone} did not finish within {self.wait_timeout:.0f} s",
                                    code="OperationTimeout", zone=zone, region=region_of(zone))
            # wait() returns when the operation is DONE or after ~2 minutes, whichever comes first.
            current = self._call(ops.wait, project=self.project, zone=zone, operation=name)
        if current.error and list(current.error.errors):
            raise map_operation_error(current, zone=zone, project=self.project)

    def _delete_quietly(self, zone: str, names: Iterable[str]) -> None:
        """All or nothing: a multi-node launch that failed half-way deletes the VMs it did start."""
        ids = [f"{zone}/{n}" for n in names]
        if not ids:
            return
        try:
            self.terminate(ids)
        except ProviderError as exc:
            log.warning("could not clean up %s after a failed launch: %s (reconcile will find them)", ids, exc)

    # ---- describe / list / terminate -----------------------------------------------------------------------

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        """Current state of `zone/name` VMs; a VM GCE no longer knows comes back TERMINATED (or PREEMPTED)."""
        from google.api_core import exceptions as gexc

        out: list[Instance] = []
        preempted: dict[str, set[str]] = {}
        for instance_id in instance_ids:
            zone, name = split_instance_id(instance_id)
            try:
                raw = self.client("InstancesClient").get(project=self.project, zone=zone, instance=name,
                                                         retry=self._retry())
            except gexc.NotFound:
                if zone not in preempted:
                    preempted[zone] = self._preempted_names(zone)
                gone = InstanceState.PREEMPTED if name in preempted[zone] else InstanceState.TERMINATED
                out.append(Instance(provider=self.name, instance_id=instance_id, state=gone, cloud=self.cloud,
                                    zone=zone, region=region_of(zone),
                                    state_reason="preempted (spot)" if gone == InstanceState.PREEMPTED
                                    else "deleted"))
                continue
            except Exception as exc:
                raise map_api_error(exc, zone=zone) from exc
            inst = self._to_instance(raw)
            if str(raw.status) == "TERMINATED":
                inst.state = InstanceState.TERMINATED
                # The exit code lives in the VM's guest attributes: read them BEFORE the VM is deleted.
                self._learn_outcome(inst, zone, name)
                if self.delete_when_stopped and inst.tags.get(LABEL_CREATED_BY) == "gpuplan":
                    # The job powered the VM off (its end, or the boot script's max_hours fail-safe). On GCE a
                    # guest shutdown only stops the VM and its disk keeps billing; AWS would terminate it
                    # (shutdown behaviour "terminate"). Do what AWS does: delete it (without waiting).
                    self._delete_nowait(zone, name)
                    inst.state_reason = "powered off by its job; deleted by gpuplan"
                outcome = self._outcomes.get(instance_id)
                if outcome and outcome.get("reason") == "max_hours":
                    inst.state_reason = "max_hours"
            if inst.spot and inst.state in (InstanceState.STOPPING, InstanceState.TERMINATED):
                if zone not in preempted:
                    preempted[zone] = self._preempted_names(zone)
                if name in preempted[zone]:
                    inst.state = InstanceState.PREEMPTED
                    inst.state_reason = "preempted (spot)"
            out.append(inst)
        return out

    def guest_attributes(self, zone: str, name: str) -> dict[str, str]:
        """The VM's `gpuplan/` guest attributes (key -> value); {} when it has written none yet."""
        return read_guest_attributes(self.client("InstancesClient"), self.project, zone, name, self._retry())

    def _learn_outcome(self, inst: Instance, zone: str, name: str) -> None:
        """Read the exit code the boot script left in guest attributes; remember it and put it on `inst`."""
        if inst.instance_id not in self._outcomes:
            try:
                attributes = self.guest_attributes(zone, name)
            except ProviderError as exc:
                log.warning("cannot read the guest attributes of %s/%s: %s", zone, name, exc)
                return
            outcome = outcome_from_attributes(attributes, inst.ended_at.isoformat() if inst.ended_at else None)
            if outcome is None:
                return
            self._outcomes[inst.instance_id] = outcome
        inst.exit_code = int(self._outcomes[inst.instance_id]["exit_code"])

    def outputs_url(self, run_id: str) -> str | None:
        return self.outputs.url(run_id)

    def secret_parameter(self, run_id: str, name: str) -> str:
        return self.secrets.resource(run_id, name)

    def secrets_endpoint(self) -> str | None:
        return self.secrets.vm_endpoint()

    def compute_endpoint(self) -> str | None:
        """The Compute API the VMs call to delete themselves (providers/gcp/self_delete.py), when not Google's."""
        return self.endpoint.api_endpoint

    def list_secrets(self) -> list[CloudSecret]:
        """gpuplan's secrets in the project's Secret Manager (names and runs only): reconcile's leftover check."""
        return self.secrets.list_all(self.name)

    def delete_secrets(self, secrets: Sequence[CloudSecret]) -> dict[CloudSecret, str]:
        return self.secrets.delete(secrets)

    def _forget_secrets_if_done(self, run_id: str | None) -> None:
        """Delete the run's secrets once none of its VMs is starting or running (a relaunch puts them again)."""
        self.secrets.forget_if_done(run_id, lambda run: any(
            i.state in (InstanceState.PENDING, InstanceState.RUNNING) for i in self.list_tagged(run)))

    def outputs_endpoint(self) -> str | None:
        return self.outputs.upload_endpoint()

    def fetch_outputs(self, instance: Instance, run_dir: str) -> None:
        """Copy what the node shipped to GCS (with a bucket) into the run folder; failing an exit.json there,
        write the exit record learnt from the VM's guest attributes into RUN_DIR/node-<rank>/exit.json.

        describe() reads the attributes when the job has powered the VM off (before deleting it); a VM that is
        shutting down is asked here too (its job may have written the code a moment ago). A VM that is gone
        may end its run: the run's secrets are deleted once no VM of it is left running.
        """
        if instance.state in InstanceState.GONE:
            self._forget_secrets_if_done(instance.run_id or self._run_of.get(instance.instance_id))
        if not run_dir:
            return
        try:
            self.outputs.fetch(instance, run_dir)
        finally:
            if read_exit_record(run_dir, instance.node_rank) is None:
                outcome = self._outcomes.get(instance.instance_id)
                if outcome is None and instance.state == InstanceState.STOPPING:
                    zone, name = split_instance_id(instance.instance_id)
                    self._learn_outcome(instance, zone, name)
                    outcome = self._outcomes.get(instance.instance_id)
                if outcome is not None:
                    write_exit_record(run_dir, instance.node_rank, outcome["exit_code"], outcome.get("reason"),
                                      outcome.get("ended_at"))

    def outcome_hint(self) -> str | None:
        return self.outputs.hint()

    def _delete_nowait(self, zone: str, name: str) -> None:
        from google.api_core import exceptions as gexc

        try:
            self.client("InstancesClient").delete(project=self.project, zone=zone, instance=name,
                                                  retry=self._retry())
        except gexc.NotFound:
            return
        except Exception as exc:
            log.warning("could not delete the stopped VM %s/%s: %s (reconcile will list it)", zone, name,
                        map_api_error(exc, zone=zone))

    def _preempted_names(self, zone: str) -> set[str]:
        """Names of VMs GCE preempted in this zone (system events of type compute.instances.preempted)."""
        from google.cloud import compute_v1

        request = compute_v1.ListZoneOperationsRequest(project=self.project, zone=zone,
                                                       filter=f'(operationType = "{PREEMPTED_OPERATION}")')
        try:
            pager = self._call(self.client("ZoneOperationsClient").list, request=request)
            return {last_segment(op.target_link) for op in pager}
        except ProviderError as exc:
            log.warning("could not read preemption events in %s: %s", zone, exc)
            return set()

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        """Every VM labelled by gpuplan (optionally of one run), across all zones (aggregatedList by label)."""
        from google.cloud import compute_v1

        parts = [f'(labels.{LABEL_CREATED_BY} = "gpuplan")']
        if run_id:
            parts.append(f'(labels.{LABEL_RUN_ID} = "{label_value(run_id)}")')
        request = compute_v1.AggregatedListInstancesRequest(project=self.project, filter=" ".join(parts))
        pager = self._call(self.client("InstancesClient").aggregated_list, request=request)
        found: list[Instance] = []
        for _scope, scoped in pager:
            for raw in scoped.instances:
                inst = self._to_instance(raw)
                found.append(inst)
        return sorted(found, key=lambda i: (i.run_id or "", i.node_rank, i.instance_id))

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Delete these VMs and wait until GCE has (idempotent: a VM already gone is fine); then delete the
        secrets of each run left with no VM running."""
        from google.api_core import exceptions as gexc

        pending: list[tuple[str, Any]] = []
        for instance_id in instance_ids:
            zone, name = split_instance_id(instance_id)
            if instance_id not in self._run_of:  # another process launched it: its labels name the run
                self._read_labels(zone, name)
            try:
                op = self.client("InstancesClient").delete(project=self.project, zone=zone, instance=name,
                                                           retry=self._retry())
            except gexc.NotFound:
                continue
            except Exception as exc:
                raise map_api_error(exc, zone=zone) from exc
            pending.append((zone, op))
        for zone, op in pending:
            self._wait(zone, op)
        for run_id in sorted({self._run_of[i] for i in instance_ids if i in self._run_of}):
            self._forget_secrets_if_done(run_id)
        for run_id, zone in sorted({(self._placed[i], split_instance_id(i)[0]) for i in instance_ids
                                    if i in self._placed}):
            if not self.list_tagged(run_id):  # its placement policy can go once no VM uses it (.placement)
                delete_compact_policy(self, region_of(zone), run_id)

    def _read_labels(self, zone: str, name: str) -> None:
        try:  # gone already, or unreadable: terminate's delete says which
            self._to_instance(self.client("InstancesClient").get(project=self.project, zone=zone, instance=name))
        except Exception as exc:
            log.debug("cannot read %s/%s before deleting it: %s", zone, name, type(exc).__name__)

    def _to_instance(self, raw: Any) -> Instance:
        inst = to_instance(self, raw)
        if inst.run_id:
            self._run_of[inst.instance_id] = inst.run_id
            if list(getattr(raw, "resource_policies", None) or ()):
                self._placed[inst.instance_id] = inst.run_id
            if inst.tags.get(LABEL_SECRETS) == LABEL_SECRETS_VALUE:
                self.secrets.known.add(inst.run_id)
        return inst


def _is_done(operation: Any) -> bool:
    """Operation.status is a proto enum in compute_v1 (its `.name` is "DONE" when finished)."""
    return getattr(operation.status, "name", str(operation.status)) == "DONE"


def split_instance_id(instance_id: str) -> tuple[str, str]:
    """gpuplan's GCP instance id `zone/name` -> (zone, name)."""
    zone, sep, name = instance_id.partition("/")
    if not sep or not zone or not name:
        raise ProviderError(f"not a GCP instance id (zone/name): {instance_id!r}", code="BadInstanceId")
    return zone, name

