"""AWS EC2: launch a run's GPU instances, watch them, end them, and find every one gpuplan owns.

Safety rules this module keeps, because each one is a way to get a surprise bill or a breach:

- Idempotency: before any RunInstances the provider looks for live instances tagged with the run id (moto, and
  a crashed earlier attempt, both make ClientToken alone insufficient), and the ClientToken is derived from the
  run id, generation, failover attempt, zone, instance type and node rank (gpuplan.providers.aws.launch_call).
- Zones: the catalog's zone ids are resolved to this account's zone names before any call that takes a zone;
  Local Zones only when the spec names them; regions the account has not enabled are skipped
  (gpuplan.providers.aws.zones).
- Every instance and its volumes carry gpuplan's tags (reconcile finds them); the instance terminates on
  shutdown, so the boot script's `max_hours` poweroff is a real fail-safe.
- IMDSv2 only; a security group open only between its own members (SSH only when asked, and only from one
  address): gpuplan.providers.aws.network.
- A multi-node run starts in one RunInstances call into a cluster placement group; each node learns its rank and
  rank 0's address from instance tags at boot (gpuplan.providers.aws.ranks), with EFA where the type has it.
- The AMI matches the instance type's architecture (gpuplan.providers.aws.image); user data is gzip-compressed
  and measured against EC2's 16 KB (gpuplan.providers.aws.userdata); a launch whose machines need credentials
  (secrets, outputs) refuses to start without a usable instance profile (gpuplan.providers.aws.iam). Those checks
  run in `check_launch`, before anything is recorded.
- Throttling is retried by botocore's own retry modes ("adaptive" by default), except for RunInstances, whose
  client retries nothing and whose retries are launch_call's (capacity errors are 5xx and must not be retried).

boto3 is imported inside the provider only: `gpuplan --help` must not pay for it. Credentials come from the
standard chain and `AWS_ENDPOINT_URL` is honoured by boto3 itself (that is how the tests reach moto).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

from gpuplan.providers.aws import iam as aws_iam
from gpuplan.providers.aws import network, ranks, userdata
from gpuplan.providers.aws.capabilities import AwsCapabilities
from gpuplan.providers.aws.image import (
    ImageChoice,
    boots,
    choose_image,
    image_architecture,
    own_parameter,
    read_parameter,
)
from gpuplan.providers.aws.instance_types import TypeInfo, describe_type
from gpuplan.providers.aws.launch_call import client_token, default_profile_wait, run_instances
from gpuplan.providers.aws.places import AccountPlaces
from gpuplan.providers.aws.rules import (
    DEFAULT_AMI_PARAMETER,
    DEFAULT_REGION,
    ENDED_EC2_STATES,
    LIVE_EC2_STATES,
    NOT_FOUND_CODES,
    SECURITY_GROUP_NAME,
    TAG_NODE_RANK,
    TAG_PRICE,
    Where,
    caller_address,
    decimal,
    ended_at,
    map_client_error,
    map_state,
    run_tags,
    single_address_cidr,
    tag_dict,
    tag_list,
)
from gpuplan.providers.aws.storage import RunStorage
from gpuplan.providers.aws.zones import AccountRegions, AccountZones
from gpuplan.providers.base import (
    TAG_RUN_ID,
    Instance,
    InstanceState,
    LaunchCheck,
    LaunchRequest,
    PlacementError,
    Provider,
    ProviderError,
)

log = logging.getLogger(__name__)


class AwsProvider(AccountPlaces, RunStorage, AwsCapabilities, Provider):
    """EC2 instances for gpuplan runs.

    Configuration (constructor keywords, else the environment variables GPUPLAN_AWS_REGIONS, GPUPLAN_AWS_IMAGE_ID,
    GPUPLAN_AWS_AMI_PARAMETER, GPUPLAN_AWS_SSH_FROM, GPUPLAN_AWS_KEY_NAME, GPUPLAN_AWS_INSTANCE_PROFILE; most are
    overridable per launch through `LaunchRequest.options`):
    `region` (default: the SDK's configured region, else us-east-1), `regions` (every region list_tagged and
    describe search), `ami_parameter` (SSM parameter holding the AMI id), `image_id` (explicit AMI, wins over the
    parameter), `ssh_from` (an address to open port 22 to; "auto" asks checkip.amazonaws.com), `key_name`,
    `instance_profile`, `root_volume_gb`, `spot_max_price`, `retry_mode` and `max_attempts` (botocore retries;
    default: the user's AWS_MAX_ATTEMPTS / config-file setting, else 8: gpuplan.providers.aws.retries),
    `waiter_delay` and `waiter_max_attempts` (waiting for `terminated`), `profile_wait` (else
    GPUPLAN_AWS_PROFILE_WAIT: how long a new instance profile may take to reach EC2, .launch_call), `bucket`
    (else GPUPLAN_AWS_BUCKET: the S3 bucket the boot script ships each node's job.log, metrics and exit.json to, under
    `gpuplan/<run_id>/node-<rank>/`; without it a finished run cannot report its exit code).

    Secrets never ride in user-data: their values are stored as SSM SecureString parameters
    `/gpuplan/<run_id>/<NAME>` (tagged like the run) in the launch region, the boot script reads them at boot,
    and they are deleted once the run has no live instance left there.
    """

    name: ClassVar[str] = "aws"
    cloud: ClassVar[str] = "aws"
    min_billed_seconds: ClassVar[int] = 60
    boots_from_script: ClassVar[bool] = True  # each node runs jobs.bootstrap's script from its user data
    node_identity_tags = ranks.IDENTITY_TAGS  # multi-node: one script, rank and master address from tags
    storage_schemes: ClassVar[tuple[str, ...]] = ("s3",)
    credential_hint: ClassVar[str] = "configure them with `aws configure` or AWS_PROFILE / AWS_ACCESS_KEY_ID"
    code_only_parameters: ClassVar[tuple[str, ...]] = ("session",)
    secrets_by_reference: ClassVar[bool] = True

    def __init__(
        self,
        *,
        region: str | None = None,
        regions: Sequence[str] | None = None,
        ami_parameter: str | None = None,
        image_id: str | None = None,
        ssh_from: str | None = None,
        key_name: str | None = None,
        instance_profile: str | None = None,
        root_volume_gb: int | None = None,
        spot_max_price: str | None = None,
        retry_mode: str = "adaptive",
        max_attempts: int | None = None,
        waiter_delay: float = 5.0,
        waiter_max_attempts: int = 120,
        bucket: str | None = None,
        session: Any = None,
        launch_retry_delay: float = 1.0,
        profile_wait: float | None = None,
    ) -> None:
        env = os.environ
        self.bucket = (bucket or env.get("GPUPLAN_AWS_BUCKET") or "").strip() or None
        self._etags: dict[str, str] = {}  # key -> ETag of the copy fetched last
        self._session = session
        self.region = region or self._default_region()
        self.regions: list[str] = []
        extra = [r.strip() for r in env.get("GPUPLAN_AWS_REGIONS", "").split(",") if r.strip()]
        for r in [self.region, *(regions or []), *extra]:
            if r and r not in self.regions:
                self.regions.append(r)
        self.ami_parameter = ami_parameter or env.get("GPUPLAN_AWS_AMI_PARAMETER") or DEFAULT_AMI_PARAMETER
        self.image_id = image_id or env.get("GPUPLAN_AWS_IMAGE_ID") or None
        self.ssh_from = ssh_from or env.get("GPUPLAN_AWS_SSH_FROM") or None
        self.key_name = key_name or env.get("GPUPLAN_AWS_KEY_NAME") or None
        self.instance_profile = instance_profile or env.get("GPUPLAN_AWS_INSTANCE_PROFILE") or None
        self.root_volume_gb = root_volume_gb
        self.spot_max_price = spot_max_price
        self.retry_mode = retry_mode
        self.max_attempts = max_attempts
        self.waiter_delay = waiter_delay
        self.waiter_max_attempts = waiter_max_attempts
        self._clients: dict[tuple[str, str], Any] = {}
        self._region_of: dict[str, str] = {}
        self._group_of: dict[str, str] = {}
        self._ip_of: dict[str, str] = {}
        self.launch_retry_delay = launch_retry_delay
        self.profile_wait = default_profile_wait() if profile_wait is None else float(profile_wait)
        self._zones = AccountZones(lambda region: self.client("ec2", region))
        self._regions = AccountRegions(lambda: self.client("ec2", self.region, retries=2))  # see AccountPlaces
        self._types: dict[tuple[str, str], TypeInfo] = {}
        self._image_arch: str | None = None  # the explicit image's architecture ("" unknown), looked up once

    # ---- clients -------------------------------------------------------------------------------------------

    def _boto_session(self) -> Any:
        if self._session is None:
            import boto3

            self._session = boto3.session.Session()
        return self._session

    def _default_region(self) -> str:
        if self._session is not None and self._session.region_name:
            return str(self._session.region_name)
        return os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION

    def client(self, service: str, region: str, *, retries: int | None = None) -> Any:
        """One botocore client per (service, region, retries), with botocore's retry mode for throttling;
        `retries=0` is the launch client (no botocore retries: gpuplan.providers.aws.launch_call)."""
        attempts = self.max_attempts if retries is None else retries
        key = (service, region) if retries is None else (service, f"{region}#{attempts}")
        if key not in self._clients:
            from botocore.config import Config

            from .retries import retries_config

            config = Config(retries=retries_config(self._boto_session(), self.retry_mode, attempts),
                            user_agent_extra="gpuplan")
            self._clients[key] = self._boto_session().client(service, region_name=region, config=config)
        return self._clients[key]

    def launch_client(self, region: str) -> Any:
        """The EC2 client RunInstances goes through: botocore retries off (a capacity refusal is a 5xx botocore
        would retry), launch_call retries throttling itself. Tests hook RunInstances on this client.

        botocore's `retries.max_attempts` counts retries after the first request (it becomes total_max_attempts =
        max_attempts + 1), so 0 is "send once"; 1 sent every capacity refusal twice."""
        return self.client("ec2", region, retries=0)

    def include_regions(self, regions: Iterable[str | None]) -> None:
        """Search these regions too (list_tagged, describe): orchestration passes the regions a run may be in."""
        for region in regions:
            if region:
                self._remember_region(region)

    def _remember_region(self, region: str) -> None:
        if region not in self.regions:
            self.regions.append(region)

    # ---- launch --------------------------------------------------------------------------------------------

    def launch(self, request: LaunchRequest) -> list[Instance]:
        """Start the run's nodes in one zone with one RunInstances call, all or nothing; machines the run already
        has are returned, never doubled.

        Every node gets `request.boot_script`; with several nodes it reads its rank and rank 0's address from the
        instance tags set right after the call (gpuplan.providers.aws.ranks), so orchestration renders it for
        that (`node_identity_tags`); a per-rank `options["boot_script_for"]` is not used here.
        """
        region = request.region or self.region
        self._remember_region(region)
        if not request.instance_type:
            raise ProviderError("an AWS launch needs an instance type", code="NoInstanceType", region=region)
        existing = self._find(region, run_id=request.run_id)
        if existing:
            return self._existing_nodes(request, region, existing)
        zone = self._launch_zone(region, request.zones[0] if request.zones else None,
                                 [str(z) for z in self._option(request, "zones", ())])
        # check_launch verified the profile exists before anything was recorded; never start a machine that would
        # fail at boot for want of one (gpuplan.providers.aws.iam).
        storage = request.options.get("run_storage_url")
        needed = aws_iam.needed_for(secrets=bool(request.secrets), bucket=self.bucket, storage=storage)
        if needed and not self._option(request, "instance_profile", self.instance_profile):
            raise ProviderError(str(aws_iam.check_profile(None, None, needed, fix=aws_iam.setup_fix(
                self.bucket, storage)).problem), code="NoInstanceProfile", region=region)
        self._put_secrets(region, request)
        try:
            return self._launch_nodes(request, region, zone)
        except ProviderError:
            # This region will not run the job: its copy of the secrets and an empty placement group must not linger.
            self._forget_secrets(region, request.run_id)
            if request.nodes > 1:
                network.delete_placement_group(self.client("ec2", region),
                                               network.placement_group_name(request.run_id), attempts=1)
            raise

    def _existing_nodes(self, request: LaunchRequest, region: str, existing: list[Instance]) -> list[Instance]:
        """A retried launch (a crash after RunInstances): the same machines, their rank tags completed."""
        if len(existing) >= request.nodes:
            log.info("run %s already has %d instance(s) in %s; not launching again", request.run_id,
                     len(existing), region)
            if request.nodes > 1:
                return ranks.tag_ranks(self.client("ec2", region), existing, self._ip_of, region)
            return existing
        # Some nodes only: a run cannot train on part of its nodes, and one RunInstances cannot add to them.
        log.warning("run %s has %d of %d node(s) in %s: terminating them", request.run_id, len(existing),
                    request.nodes, region)
        self.terminate([i.instance_id for i in existing])
        raise ProviderError(f"run {request.run_id} had {len(existing)} of its {request.nodes} nodes in {region}; "
                            "they were terminated, launch again", code="IncompleteNodes", region=region)

    def _launch_nodes(self, request: LaunchRequest, region: str, zone: str | None) -> list[Instance]:
        nodes = self._run(request, region, zone, count=request.nodes, user_data=request.boot_script or "")
        if request.nodes == 1:
            return nodes
        try:
            return ranks.tag_ranks(self.client("ec2", region), nodes, self._ip_of, region)
        except ProviderError:
            # All or nothing: nodes that cannot learn their rank would wait at boot and then power off.
            log.warning("run %s: terminating %d node(s) that could not be tagged", request.run_id, len(nodes))
            self.terminate([i.instance_id for i in nodes])
            raise

    # ---- checks before anything is recorded -----------------------------------------------------------------

    def check_launch(self, request: LaunchRequest) -> LaunchCheck:
        """User data within 16 KB, a usable instance profile when the machines need credentials, the machine
        image of the type's architecture: gpuplan.providers.aws.checks."""
        from gpuplan.providers.aws.checks import check_launch

        return check_launch(self, request)

    def image_for(self, request: LaunchRequest, region: str) -> ImageChoice:
        """The machine image a launch of `request` in `region` boots (gpuplan.providers.aws.image)."""
        return self._image(request, region)

    def _run(self, request: LaunchRequest, region: str, zone: str | None, *, count: int,
             user_data: str) -> list[Instance]:
        """One RunInstances call, its errors mapped to the typed ones."""
        where = Where(region=region, zone=zone, instance_type=request.instance_type, spot=request.spot)
        try:
            params = self._run_params(request, region, zone, count=count, user_data=user_data)
            response = run_instances(self.launch_client(region), params, delay=self.launch_retry_delay,
                                     profile_wait=self.profile_wait)
        except ProviderError:
            raise
        except Exception as exc:
            raise self._error(exc, dataclasses.replace(where, zone=zone or where.zone)) from exc
        instances = [self._to_instance(raw, region, request=request) for raw in response.get("Instances", [])]
        for inst in instances:
            self._region_of[inst.instance_id] = region
        return sorted(instances, key=lambda i: i.node_rank)

    def _option(self, request: LaunchRequest, key: str, default: Any) -> Any:
        value = request.options.get(key) if request.options else None
        return default if value is None else value

    def _run_params(self, request: LaunchRequest, region: str, zone: str | None, *, count: int,
                    user_data: str) -> dict[str, Any]:
        """The RunInstances parameters: tags, IMDSv2 with instance tags, terminate on shutdown, SG (or an EFA
        interface carrying it), spot, placement group, the AMI of the type's architecture, gzip user data."""
        packed = userdata.compress(user_data)
        problem = userdata.too_big(packed)
        if problem:  # check_launch refuses this before anything is recorded; never send what EC2 must refuse
            raise ProviderError(problem, code="UserDataTooLarge", region=region, zone=zone)
        tags = {**run_tags(request), "Name": f"gpuplan-{request.name}-{request.run_id}"[:255]}
        if count == 1 and request.nodes == 1:
            tags[TAG_NODE_RANK] = "0"  # several nodes get theirs after the call (gpuplan.providers.aws.ranks)
        if request.price_per_hour is not None:
            tags[TAG_PRICE] = str(request.price_per_hour)
        subnet = network.find_subnet(self.client("ec2", region), region, zone,
                                     self._option(request, "subnet_id", None))
        zone = zone or subnet["AvailabilityZone"]
        image_id = self._image(request, region).image_id
        token = client_token(request.run_id, generation=int(self._option(request, "generation", 0)),
                             attempt=int(self._option(request, "attempt", 0)), zone=zone,
                             instance_type=request.instance_type, rank=None)  # one call starts every node
        groups = self._security_groups(region, subnet["VpcId"], request)
        params: dict[str, Any] = {
            "ImageId": image_id,
            "InstanceType": request.instance_type,
            "MinCount": count,
            "MaxCount": count,
            "ClientToken": token,
            "UserData": packed.payload,
            "InstanceInitiatedShutdownBehavior": "terminate",
            "MetadataOptions": {
                "HttpTokens": "required",
                "HttpEndpoint": "enabled",
                # 2 hops: the job runs in a container, one hop further from the instance's metadata service.
                "HttpPutResponseHopLimit": 2,
                "InstanceMetadataTags": "enabled",
            },
            "TagSpecifications": [
                {"ResourceType": "instance", "Tags": tag_list(tags)},
                {"ResourceType": "volume", "Tags": tag_list(tags)},
            ],
        }
        if network.wants_efa(info := self._type_info(region, str(request.instance_type)), request.nodes):
            params["NetworkInterfaces"] = network.network_interfaces(subnet, groups, info)
        else:
            params["SubnetId"] = subnet["SubnetId"]
            params["SecurityGroupIds"] = groups
        placement: dict[str, Any] = {"AvailabilityZone": zone}
        if request.nodes > 1:
            placement["GroupName"] = network.ensure_placement_group(
                self.client("ec2", region), network.placement_group_name(request.run_id), run_tags(request), region)
        params["Placement"] = placement
        if request.spot:
            spot_options: dict[str, Any] = {"SpotInstanceType": "one-time",
                                            "InstanceInterruptionBehavior": "terminate"}
            max_price = self._option(request, "spot_max_price", self.spot_max_price)
            if max_price is not None:
                spot_options["MaxPrice"] = str(max_price)
            params["InstanceMarketOptions"] = {"MarketType": "spot", "SpotOptions": spot_options}
        key_name = self._option(request, "key_name", self.key_name)
        if key_name:
            params["KeyName"] = key_name
        profile = self._option(request, "instance_profile", self.instance_profile)
        if profile:
            params["IamInstanceProfile"] = {"Arn": profile} if profile.startswith("arn:") else {"Name": profile}
        root_gb = self._option(request, "root_volume_gb", self.root_volume_gb)
        if root_gb:
            params["BlockDeviceMappings"] = [{
                "DeviceName": self._root_device(region, image_id),
                "Ebs": {"VolumeSize": int(root_gb), "VolumeType": "gp3", "DeleteOnTermination": True},
            }]
        return params

    def usable_instance_type(self, instance_type: str | None) -> bool:
        """With one configured image (an explicit AMI, or an AMI parameter of the user's own), only types of its
        architecture (EC2 refuses the mismatch: image.py); with the DLAMI default every type, each getting its
        architecture's image. Unknown answers keep the type (the launch check then says)."""
        own = own_parameter(self.ami_parameter)
        if not instance_type or not (self.image_id or own):
            return True
        if self._image_arch is None:  # asked once per provider, not once per offer the planner weighs
            try:
                image_id = self.image_id or read_parameter(self.client("ssm", self.region), str(own), self.region)
                self._image_arch = image_architecture(self.client("ec2", self.region), image_id, self.region) or ""
            except ProviderError:
                self._image_arch = ""  # unknown
        try:
            return boots(self._type_info(self.region, instance_type), self._image_arch)
        except ProviderError:
            return True

    def _type_info(self, region: str, instance_type: str) -> TypeInfo:
        key = (region, instance_type)
        if key not in self._types:
            self._types[key] = describe_type(self.client("ec2", region), instance_type, region)
        return self._types[key]

    def _image(self, request: LaunchRequest, region: str) -> ImageChoice:
        """The AMI for the request's instance type: the configured one (architecture checked), else the DLAMI of
        the type's architecture (gpuplan.providers.aws.image)."""
        info = self._type_info(region, str(request.instance_type))
        parameter = self._option(request, "ami_parameter", self.ami_parameter)
        return choose_image(self.client("ec2", region), self.client("ssm", region), info, region,
                            image_id=self._option(request, "image_id", self.image_id), ami_parameter=parameter)

    def _root_device(self, region: str, image_id: str) -> str:
        images = self.client("ec2", region).describe_images(ImageIds=[image_id]).get("Images", [])
        return str(images[0].get("RootDeviceName") or "/dev/sda1") if images else "/dev/sda1"

    def _security_groups(self, region: str, vpc_id: str, request: LaunchRequest) -> list[str]:
        """gpuplan's group in this VPC (open only between its members), plus an SSH group for one address when
        asked (gpuplan.providers.aws.network)."""
        ec2 = self.client("ec2", region)
        groups = [network.ensure_group(ec2, vpc_id, SECURITY_GROUP_NAME,
                                       "gpuplan instances: traffic between gpuplan nodes only", self_rules=True)]
        ssh_from = self._option(request, "ssh_from", self.ssh_from)
        if ssh_from:
            cidr = single_address_cidr(caller_address() if ssh_from == "auto" else str(ssh_from))
            groups.append(network.ensure_group(ec2, vpc_id, network.ssh_group_name(cidr),
                                               f"gpuplan: SSH from {cidr} only", ssh_cidr=cidr))
        return groups

    # ---- describe / list / terminate -----------------------------------------------------------------------

    def _to_instance(self, raw: Mapping[str, Any], region: str,
                     request: LaunchRequest | None = None) -> Instance:
        tags = tag_dict(raw.get("Tags"))
        state = raw.get("State", {}).get("Name", "unknown")
        reason = raw.get("StateReason") or {}
        market = (raw.get("InstanceMarketOptions") or {}).get("MarketType")
        spot = raw.get("InstanceLifecycle") == "spot" or market == "spot" or bool(request and request.spot)
        mapped = map_state(state, reason.get("Code"))
        if raw.get("PrivateIpAddress"):
            self._ip_of[raw["InstanceId"]] = raw["PrivateIpAddress"]
        rank = tags.get(TAG_NODE_RANK)
        return Instance(
            provider=self.name,
            instance_id=raw["InstanceId"],
            state=mapped,
            run_id=tags.get(TAG_RUN_ID) or (request.run_id if request else None),
            cloud=self.cloud,
            region=region,
            zone=(raw.get("Placement") or {}).get("AvailabilityZone"),
            instance_type=raw.get("InstanceType"),
            gpu=request.gpu if request else None,
            gpu_count=request.gpus_per_node if request else 0,
            spot=spot,
            node_rank=int(rank) if rank and rank.isdigit() else int(raw.get("AmiLaunchIndex") or 0),
            price_per_hour=request.price_per_hour if request else decimal(tags.get(TAG_PRICE)),
            launched_at=raw.get("LaunchTime"),
            created_at=raw.get("LaunchTime"),  # gpuplan never stops and restarts a machine, so this is its birth
            ended_at=ended_at(raw) if mapped in InstanceState.GONE else None,
            state_reason=reason.get("Code") or raw.get("StateTransitionReason") or None,
            tags=tags,
        )

    def _describe(self, region: str, filters: list[dict[str, Any]]) -> list[Instance]:
        try:
            paginator = self.client("ec2", region).get_paginator("describe_instances")
            found: list[Instance] = []
            for page in paginator.paginate(Filters=filters):
                for reservation in page.get("Reservations", []):
                    for raw in reservation.get("Instances", []):
                        inst = self._to_instance(raw, region)
                        self._region_of[inst.instance_id] = region
                        group = (raw.get("Placement") or {}).get("GroupName")
                        if group:
                            self._group_of[inst.instance_id] = group
                        found.append(inst)
            return found
        except Exception as exc:
            raise self._error(exc, Where(region=region)) from exc

    def _find(self, region: str, run_id: str | None, *, include_ended: bool = False) -> list[Instance]:
        states = [*LIVE_EC2_STATES, *ENDED_EC2_STATES] if include_ended else list(LIVE_EC2_STATES)
        filters: list[dict[str, Any]] = [{"Name": "instance-state-name", "Values": states}]
        if run_id:
            filters.append({"Name": f"tag:{TAG_RUN_ID}", "Values": [run_id]})
        else:
            filters.append({"Name": "tag-key", "Values": [TAG_RUN_ID]})
        return sorted(self._describe(region, filters), key=lambda i: (i.run_id or "", i.node_rank))

    def list_tagged(self, run_id: str | None = None, *, include_ended: bool = False) -> list[Instance]:
        """Live instances carrying gpuplan's run tag in every configured region (reconcile compares these).

        `include_ended` (with a run id: adoption, gpuplan.supervise.adopt) adds the ones that already ended, which EC2
        keeps listing for about an hour after termination: a machine a crashed launch started that ended by itself (the
        on-instance fail-safe, a spot interruption) still ran and is billed from its launch to its end."""
        if include_ended and run_id is None:
            raise ValueError("include_ended needs a run id: ended machines are adopted one run at a time")
        found: list[Instance] = []
        refused: PlacementError | None = None
        enabled = self.enabled_regions()
        for region in list(self.regions):
            if enabled is not None and region not in enabled:
                continue  # a region the account has not enabled holds no machine of its
            try:
                found.extend(self._find(region, run_id, include_ended=include_ended))
            except PlacementError as exc:  # this region refuses us (an opt-in region): the others are still searched
                refused = refused or exc
        if refused is not None and not found:
            raise refused  # failover blocks that region; every other region was searched and holds nothing
        return found

    def describe(self, instance_ids: Sequence[str]) -> list[Instance]:
        """Current state of these instances; one no configured region knows comes back TERMINATED."""
        wanted = list(dict.fromkeys(instance_ids))
        if not wanted:
            return []
        found: dict[str, Instance] = {}
        known = {self._region_of.get(i) for i in wanted}
        ordered_regions = sorted(self.regions, key=lambda r: 0 if r in known else 1)
        for region in ordered_regions:
            missing = [i for i in wanted if i not in found]
            if not missing:
                break
            for inst in self._describe(region, [{"Name": "instance-id", "Values": missing}]):
                found[inst.instance_id] = inst
        now = dt.datetime.now(dt.timezone.utc)
        return [found.get(i) or Instance(provider=self.name, instance_id=i, state=InstanceState.TERMINATED,
                                         cloud=self.cloud, region=self._region_of.get(i), ended_at=now,
                                         state_reason="not found")
                for i in wanted]

    def terminate(self, instance_ids: Sequence[str]) -> None:
        """Terminate, wait until EC2 reports `terminated`, then drop the runs' placement groups."""
        by_region: dict[str, list[str]] = {}
        runs: dict[str, set[str]] = {}
        groups: dict[str, set[str]] = {}
        for inst in self.describe(instance_ids):
            if inst.region and inst.state_reason != "not found":  # ending an ended machine is harmless
                by_region.setdefault(inst.region, []).append(inst.instance_id)
                if inst.run_id:
                    runs.setdefault(inst.region, set()).add(inst.run_id)
                group = self._placement_group_of(inst)
                if group:
                    groups.setdefault(inst.region, set()).add(group)
        for region, ids in by_region.items():
            ec2 = self.client("ec2", region)
            try:
                ec2.terminate_instances(InstanceIds=ids)
                ec2.get_waiter("instance_terminated").wait(
                    InstanceIds=ids,
                    WaiterConfig={"Delay": self.waiter_delay, "MaxAttempts": self.waiter_max_attempts})
            except Exception as exc:
                from botocore.exceptions import WaiterError

                if isinstance(exc, WaiterError):
                    raise ProviderError(f"instances in {region} did not reach `terminated`: {exc}",
                                        code="WaiterError", region=region) from exc
                error = map_client_error(exc, region=region)
                if error.code not in NOT_FOUND_CODES:
                    raise error from exc
            for group in sorted(groups.get(region, ())):
                network.delete_placement_group(ec2, group, delay=self.waiter_delay)
            for run_id in sorted(runs.get(region, ())):
                self._forget_secrets_if_done(region, run_id)

    def _placement_group_of(self, inst: Instance) -> str | None:
        """The run's cluster placement group, deleted once the machines are `terminated` (teardown).

        Only groups gpuplan names (`gpuplan-<run id>`): the one EC2 reports the instance in, or the one of a
        multi-node run (its nodes carry the master-address tag); `InvalidPlacementGroup.InUse` while EC2 catches
        up is retried by gpuplan.providers.aws.network.delete_placement_group.
        """
        group = self._group_of.get(inst.instance_id, "")
        if group.startswith(network.PLACEMENT_GROUP_PREFIX):
            return group
        if inst.run_id and ranks.TAG_MASTER_ADDR in inst.tags:
            return network.placement_group_name(inst.run_id)
        return None
