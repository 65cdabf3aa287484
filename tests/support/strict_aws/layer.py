"""The strict layer itself: a WSGI app that checks each request against the documented AWS rules (rules.py,
zones.py, placement.py) and forwards everything it does not refuse to moto unchanged."""

from __future__ import annotations

import datetime as dt
import http.client
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlparse

from . import placement, rules
from .account import AccountRules, simulate_principal_policy
from .efa import check_network_interfaces
from .model import Injection, Launch, LocalZone, PlacementGroup, Recorded, default_local_zones
from .spot_prices import SpotPriceRow, describe_spot_price_history
from .view import MotoView
from .wire import (
    QueryRequest,
    Reply,
    Signed,
    ec2_error,
    json_error,
    parse_query,
    query_xml_error,
    rest_xml_error,
    signed_scope,
)
from .zones import (
    Zone,
    describe_availability_zones,
    describe_regions,
    invalid_zone,
    modify_availability_zone_group,
    region_enabled,
    zone_table,
)

_HOP_BY_HOP = {"connection", "transfer-encoding", "content-length", "keep-alive", "server", "date"}


class StrictAws:
    """The layer's rules and state; call it as a WSGI app. One layer fronts one moto server (`moto_endpoint`)."""

    def __init__(self, moto_endpoint: str) -> None:
        self.moto_endpoint = moto_endpoint
        parsed = urlparse(moto_endpoint)
        self._moto_host, self._moto_port = parsed.hostname or "127.0.0.1", parsed.port or 80
        self.view = MotoView(moto_endpoint)
        self._lock = threading.RLock()
        self.reset()

    # ---- what a test configures ---------------------------------------------------------------------------------

    def reset(self) -> None:
        """Forget every remembered token, placement group, queued error and opt-in (moto is reset separately)."""
        with self._lock:
            self.opted_in_regions: set[str] = set()
            self.local_zones: list[LocalZone] = default_local_zones()
            self.launches: dict[tuple[str, str, str, str], Launch] = {}
            self.placement_groups: dict[tuple[str, str], dict[str, PlacementGroup]] = {}
            self.injections: list[Injection] = []
            self.requests: list[Recorded] = []
            # Rules 11-14 (account.py): IAM propagation, SSM tiers, SimulatePrincipalPolicy, the caller's policy.
            self.account = AccountRules()
            # moto's RegisterImage drops Architecture (its DescribeImages then has none); the layer keeps what the
            # request said, adds it to DescribeImages answers and checks launches against it.
            self.image_architectures: dict[tuple[str, str], str] = {}
            # Rule 10 (spot_prices.py): the spot price history per region, seeded by the test; moto invents one.
            self.spot_history: dict[str, list[SpotPriceRow]] = {}
            # What RunInstances into a not-opted-in Local/Wavelength Zone answers. Not documented (notes §AWS 1: "The
            # exact error for launching into a not-opted-in Local Zone was NOT found in docs"); the default is EC2's
            # observed answer for a zone name the account cannot launch in. A test may set ("OptInRequired", ..., 401).
            self.local_zone_error: tuple[str, str, int] = (
                "InvalidParameterValue", "Invalid availability zone: [{zone}]", 400)

    def seed_spot_history(self, region: str, zone: str, instance_type: str,
                          changes: list[tuple[dt.datetime, Decimal]]) -> None:
        """Spot price changes (when, USD/h) of `instance_type` in the zone NAMED `zone`, answered by
        DescribeSpotPriceHistory instead of moto's invented price (rule 10)."""
        with self._lock:
            self.spot_history.setdefault(region, []).extend(
                SpotPriceRow(zone, instance_type, at, Decimal(price)) for at, price in changes)

    def enable_region(self, *regions: str) -> None:
        """Opt the account in to these opt-in regions (default regions are always enabled and cannot be disabled)."""
        self.opted_in_regions.update(regions)

    def inject(self, code: str, *, message: str | None = None, status: int | None = None, region: str | None = None,
               zone: str | None = None, instance_type: str | None = None, market: str | None = None,
               times: int | None = 1) -> Injection:
        """Queue an error for RunInstances requests matching the given fields (see model.Injection). The status and
        message default to what EC2 sends for that code (rules.INJECTABLE)."""
        default_status, default_message = rules.INJECTABLE.get(code, (400, f"{code} (injected by the test)"))
        injection = Injection(code=code, message=message or default_message, status=status or default_status,
                              region=region, zone=zone, instance_type=instance_type, market=market, times=times)
        with self._lock:
            self.injections.append(injection)
        return injection

    def calls(self, action: str) -> list[Recorded]:
        """The requests of one action (EC2/Query Action or JSON target) the layer saw, in order."""
        return [r for r in self.requests if r.action == action]

    # ---- WSGI -----------------------------------------------------------------------------------------------------

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length:
            body = environ["wsgi.input"].read(length)
        elif environ.get("wsgi.input_terminated"):  # chunked upload: werkzeug ends the stream for us
            body = environ["wsgi.input"].read()
        else:
            body = b""
        headers = _headers_of(environ)
        # The path as sent (PATH_INFO is percent-decoded: an S3 key "a%2Fb" would become "a/b").
        raw = environ.get("RAW_URI") or environ.get("REQUEST_URI") or environ.get("PATH_INFO", "/")
        path = raw.split("?", 1)[0]
        query = environ.get("QUERY_STRING", "")
        reply = self.handle(environ["REQUEST_METHOD"], path, query, headers, body)
        out = [(k, v) for k, v in reply.headers if k.lower() not in _HOP_BY_HOP]
        upstream = next((v for k, v in reply.headers if k.lower() == "content-length"), None)
        # A HEAD answer has no body but says how long the GET body is (S3 HeadObject's ContentLength).
        length = upstream if environ["REQUEST_METHOD"] == "HEAD" and upstream else str(len(reply.body))
        out.append(("Content-Length", length))
        start_response(f"{reply.status} {http.client.responses.get(reply.status, 'Status')}", out)
        return [reply.body]

    def handle(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> Reply:
        signed = signed_scope(headers.get("Authorization", "")) or _presigned_scope(query)
        if path.startswith("/moto-api") or signed is None:
            return self.forward(method, path, query, headers, body)
        target = headers.get("X-Amz-Target", "")
        req = parse_query(body, query, signed) if signed.service in ("ec2", "iam", "sts") else None
        record = Recorded(signed.service, req.action if req else target or f"{method} {path}", signed.region,
                          dict(req.params) if req else {})
        self.requests.append(record)
        account = self.account
        if not region_enabled(signed.region, self.opted_in_regions):
            reply = disabled_region(signed, bool(target))
        elif (refused := account.caller_refusal(signed, req, target, method, path, query, body)) is not None:
            reply = refused  # rule 14
        elif signed.service == "ec2" and req is not None:
            reply = self.ec2(req, method, path, query, headers, body)
        elif signed.service == "iam" and req is not None and req.action == "SimulatePrincipalPolicy":
            reply = simulate_principal_policy(req, self.view.client("iam", "us-east-1"))  # rule 13
        elif (refused := account.ssm_refusal(target, body)) is not None:
            reply = refused  # rule 12
        else:
            reply = self.forward(method, path, query, headers, body)
            if signed.service == "iam" and req is not None:
                account.observe_iam(req, reply.status)  # rule 11
        record.status = reply.status
        return reply

    def forward(self, method: str, path: str, query: str, headers: dict[str, str], body: bytes) -> Reply:
        """Send the request to moto as it came and return moto's answer."""
        # The body is whole here (a chunked upload was joined): http.client sends it with its own Content-Length.
        headers = {k: v for k, v in headers.items() if k.lower() not in ("transfer-encoding", "connection")}
        conn = http.client.HTTPConnection(self._moto_host, self._moto_port, timeout=120)
        try:
            conn.request(method, path + (f"?{query}" if query else ""), body=body, headers=headers)
            resp = conn.getresponse()
            return Reply(resp.status, resp.read(), list(resp.getheaders()))
        finally:
            conn.close()

    # ---- EC2 ------------------------------------------------------------------------------------------------------

    def ec2(self, req: QueryRequest, method: str, path: str, query: str, headers: dict[str, str],
            body: bytes) -> Reply:
        action = req.action
        if action == "DescribeRegions":
            return describe_regions(req, self.view, self.opted_in_regions)
        if action == "DescribeAvailabilityZones":
            return describe_availability_zones(req, self.zones(req.region))
        if action == "ModifyAvailabilityZoneGroup":
            return modify_availability_zone_group(req, self.local_zones)
        if action == "DescribeSpotPriceHistory":
            with self._lock:
                return describe_spot_price_history(req, list(self.spot_history.get(req.region, [])))
        refused = rules.check_tags(req)
        if refused:
            return refused
        with self._lock:
            groups = self.placement_groups.setdefault((req.signed.access_key, req.region), {})
            if action == "CreatePlacementGroup":
                return placement.create(req, groups)
            if action == "DescribePlacementGroups":
                return placement.describe(req, groups)
            if action == "DeletePlacementGroup":
                return placement.delete(req, groups, lambda ids: self.view.instances(req.region, ids))
            if action == "RunInstances":
                return self.run_instances(req, groups, method, path, query, headers)
        reply = self.forward(method, path, query, headers, body)
        if action == "RegisterImage" and reply.status == 200 and "Architecture" in req.params:
            image_id = ET.fromstring(reply.body).findtext("{*}imageId", default="")
            self.image_architectures[(req.region, image_id)] = req.params["Architecture"]
        if action == "DescribeImages" and reply.status == 200:
            reply.body = _with_architectures(reply.body, req.region, self.image_architectures)
        if action == "DescribeInstances" and reply.status == 200:
            members = {i: g.name for g in groups.values() for i in g.instance_ids}
            if members:
                reply.body = _with_group_names(reply.body, members)
        return reply

    def zones(self, region: str) -> list[Zone]:
        return zone_table(self.view, self.local_zones, region)

    def resolve_zone(self, req: QueryRequest, params: dict[str, str]) -> tuple[Zone | None, Reply | None]:
        """The zone a RunInstances request lands in, checked against the account's zone table.

        Placement.AvailabilityZone takes a zone NAME, Placement.AvailabilityZoneId a zone ID, "you can specify
        AvailabilityZone or AvailabilityZoneId, but not both" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
        API_Placement.html); names are per account, IDs are not (https://docs.aws.amazon.com/global-infrastructure/
        latest/regions/az-ids.html). moto ignores AvailabilityZoneId (the instance lands in <region>a), so the layer
        forwards the zone's name instead. A SubnetId pins the subnet's zone. Local/Wavelength Zones must be opted in
        (https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html: "To use a Local Zone, you must
        first enable it").
        """
        table = self.zones(req.region)
        name, zone_id = params.get("Placement.AvailabilityZone"), params.get("Placement.AvailabilityZoneId")
        zone: Zone | None = None
        if name and zone_id:
            return None, ec2_error("InvalidParameterCombination", "The parameters availabilityZone and "
                                   "availabilityZoneId cannot be used together; specify one of them.")
        if name:
            zone = next((z for z in table if z.name == name), None)
            if zone is None:
                return None, invalid_zone(name)
        elif zone_id:
            zone = next((z for z in table if z.zone_id == zone_id), None)
            if zone is None:
                return None, invalid_zone(zone_id)
            del params["Placement.AvailabilityZoneId"]
            params["Placement.AvailabilityZone"] = zone.name
        subnet_id = params.get("SubnetId") or params.get("NetworkInterface.1.SubnetId")
        if zone is None and subnet_id:
            subnet = self.view.subnet(req.region, subnet_id)
            if subnet:
                zone = next((z for z in table if z.name == subnet["AvailabilityZone"]), None)
        if zone is not None and not zone.launchable:
            code, message, status = self.local_zone_error
            return None, ec2_error(code, message.format(zone=zone.name), status)
        return zone, None

    def run_instances(self, req: QueryRequest, groups: dict[str, PlacementGroup], method: str, path: str,
                      query: str, headers: dict[str, str]) -> Reply:
        for check in (rules.check_client_token, rules.check_user_data):
            refused = check(req)
            if refused:
                return refused
        params = dict(req.params)
        zone, refused = self.resolve_zone(req, params)
        if refused:
            return refused
        group: PlacementGroup | None = None
        group_name = params.get("Placement.GroupName")
        if group_name:
            group = groups.get(group_name)
            if group is None:
                return placement.unknown_group(group_name)
            if group.strategy == "cluster" and group.zone:
                if zone is not None and zone.name != group.zone:
                    return placement.wrong_zone(group, zone.name)
                if zone is None:
                    params["Placement.AvailabilityZone"] = group.zone
                    zone = next((z for z in self.zones(req.region) if z.name == group.zone), None)
        image_id = params.get("ImageId")
        instance_type = params.get("InstanceType", "m1.small")
        refused = check_network_interfaces(params, self.view.instance_type(instance_type))  # rule 15 (efa.py)
        if refused:
            return refused
        if image_id:
            image = self.view.image(req.region, image_id)
            if image is None:
                return rules.ami_not_found(image_id)
            type_info = self.view.instance_type(instance_type)
            arch = image.get("Architecture") or self.image_architectures.get((req.region, image_id))
            if type_info is not None and arch:
                refused = rules.check_architecture({**image, "Architecture": arch}, type_info)
                if refused:
                    return refused
        # Idempotency is zonal when a zone is given explicitly (Placement) or implicitly (SubnetId), else regional
        # (https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html).
        token = params.get("ClientToken")
        key = (req.signed.access_key, req.region, token or "", zone.name if zone else "")
        if token and key in self.launches:
            prior = self.launches[key]
            if rules.comparable(prior.params) != rules.comparable(params):
                return rules.idempotent_mismatch()
            states = [i["State"]["Name"] for i in self.view.instances(req.region, prior.instance_ids)]
            if any(state == "terminated" for state in states):
                return rules.idempotent_terminated()
            return Reply(prior.status, prior.body)
        refused = self.account.profile_refusal(params)  # rule 11: a new profile EC2 does not see yet
        if refused:
            return refused
        injected = self.injected(req, params, zone, instance_type)
        if injected:
            return injected
        body = QueryRequest(req.action, params, req.signed).encode()
        headers = {k: v for k, v in headers.items() if k.lower() != "content-length"}
        reply = self.forward(method, path, query, headers, body)
        if reply.status == 404 and b"NoSuchEntity" in reply.body:
            return unknown_instance_profile(params)
        if reply.status == 200:
            ids, zones = _launched(reply.body)
            if group is not None:
                group.instance_ids += ids
                group.zone = group.zone or (zones[0] if zones else None)
                reply.body = _with_group_names(reply.body, {i: group.name for i in ids})
            if token:
                self.launches[key] = Launch(params=params, status=reply.status, body=reply.body, instance_ids=ids)
        return reply

    def injected(self, req: QueryRequest, params: dict[str, str], zone: Zone | None,
                 instance_type: str) -> Reply | None:
        market = "spot" if params.get("InstanceMarketOptions.MarketType") == "spot" else "on-demand"
        zone_names = (zone.name, zone.zone_id) if zone else ()
        for injection in self.injections:
            if injection.matches(req.region, zone_names, instance_type, market):
                injection.hits += 1
                others = ", ".join(z.name for z in self.zones(req.region)
                                   if z.zone_type == "availability-zone" and (zone is None or z.name != zone.name))
                message = injection.message.format_map(_Defaults(
                    type=instance_type, zone=zone.name if zone else req.region, others=others, region=req.region,
                    image=params.get("ImageId", ""), vpc="vpc-default"))
                return ec2_error(injection.code, message, injection.status)
        return None


class _Defaults(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "{" + key + "}"


def disabled_region(signed: Signed, json_protocol: bool) -> Reply:
    """A request signed for a region the account has not enabled.

    EC2 answers AuthFailure "AWS was not able to validate the provided access credentials" with HTTP 401 (observed:
    turbot/steampipe-plugin-aws#75, fog/fog-aws#585 for af-south-1; the AWS Knowledge Center explains it for regions
    "not enabled by default": https://repost.aws/knowledge-center/iam-validate-access-credentials). STS answers
    InvalidClientTokenId, HTTP 403 (segmentio/aws-okta#225). For JSON-protocol services (SSM, ...) and S3 the layer
    uses those services' own invalid-credentials answers (UnrecognizedClientException 400 / InvalidAccessKeyId 403);
    these two are modelled, not observed for disabled regions. Region opt-in:
    https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html
    """
    if signed.service == "ec2":
        return ec2_error("AuthFailure", "AWS was not able to validate the provided access credentials", 401)
    if signed.service == "sts":
        return query_xml_error("InvalidClientTokenId", "The security token included in the request is invalid.", 403)
    if json_protocol:
        return json_error("UnrecognizedClientException", "The security token included in the request is invalid.",
                          400)
    if signed.service == "s3":
        return rest_xml_error("InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our "
                              "records.", 403)
    return query_xml_error("InvalidClientTokenId", "The security token included in the request is invalid.", 403)


def unknown_instance_profile(params: dict[str, str]) -> Reply:
    """moto answers an unknown IamInstanceProfile with IAM's NoSuchEntity and HTTP 404; EC2 answers
    InvalidParameterValue, HTTP 400, "Value (<name>) for parameter iamInstanceProfile.name is invalid. Invalid IAM
    Instance Profile name" (observed: aws/aws-sdk-js-v3#5253, hashicorp/terraform-provider-aws#27516; also for a few
    seconds after CreateInstanceProfile). Instance profiles: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    iam-roles-for-amazon-ec2.html"""
    if "IamInstanceProfile.Name" in params:
        name = params["IamInstanceProfile.Name"]
        return ec2_error("InvalidParameterValue", f"Value ({name}) for parameter iamInstanceProfile.name is invalid. "
                         "Invalid IAM Instance Profile name")
    arn = params.get("IamInstanceProfile.Arn", "")
    return ec2_error("InvalidParameterValue", f"Value ({arn}) for parameter iamInstanceProfile.arn is invalid. "
                     "Invalid IAM Instance Profile ARN")


def _with_group_names(body: bytes, members: dict[str, str]) -> bytes:
    """Put `placement/groupName` on the instances launched into a placement group (moto drops Placement.GroupName)."""
    root = ET.fromstring(body)
    namespace = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
    qualified = (lambda tag: f"{{{namespace}}}{tag}") if namespace else (lambda tag: tag)
    changed = False
    for item in root.findall(".//{*}instancesSet/{*}item"):
        name = members.get(item.findtext("{*}instanceId", default=""))
        if name is None:
            continue
        place = item.find("{*}placement")
        if place is None:
            place = ET.SubElement(item, qualified("placement"))
        element = place.find("{*}groupName")
        if element is None:
            element = ET.SubElement(place, qualified("groupName"))
        element.text = name
        changed = True
    if not changed:
        return body
    ET.register_namespace("", namespace)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _headers_of(environ: dict[str, Any]) -> dict[str, str]:
    headers = {key[5:].replace("_", "-").title(): value for key, value in environ.items() if key.startswith("HTTP_")}
    if environ.get("CONTENT_TYPE"):
        headers["Content-Type"] = environ["CONTENT_TYPE"]
    if environ.get("CONTENT_LENGTH"):
        headers["Content-Length"] = environ["CONTENT_LENGTH"]
    # botocore sends these spelt differently from .title(); servers treat header names case-insensitively anyway.
    for spelt in ("X-Amz-Target", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Security-Token"):
        for key in list(headers):
            if key.lower() == spelt.lower() and key != spelt:
                headers[spelt] = headers.pop(key)
    return headers


def _presigned_scope(query: str) -> Signed | None:
    credential = parse_qs(query).get("X-Amz-Credential")
    return signed_scope(f"Credential={credential[0]}") if credential else None


def _launched(body: bytes) -> tuple[list[str], list[str]]:
    """Instance IDs and zones in a RunInstances answer."""
    root = ET.fromstring(body)  # any namespace: moto writes EC2's without the trailing slash
    items = root.findall("{*}instancesSet/{*}item")
    ids = [i.findtext("{*}instanceId", default="") for i in items]
    zones = [i.findtext("{*}placement/{*}availabilityZone", default="") for i in items]
    return ids, [z for z in zones if z]


def _with_architectures(body: bytes, region: str, known: dict[tuple[str, str], str]) -> bytes:
    """Add `<architecture>` to the DescribeImages items moto answers without one, from what RegisterImage said."""
    root = ET.fromstring(body)
    namespace = root.tag[1:].split("}")[0] if root.tag.startswith("{") else ""
    changed = False
    for item in root.findall("{*}imagesSet/{*}item"):
        arch = known.get((region, item.findtext("{*}imageId", default="")))
        if arch and item.find("{*}architecture") is None:
            ET.SubElement(item, f"{{{namespace}}}architecture" if namespace else "architecture").text = arch
            changed = True
    if not changed:
        return body
    ET.register_namespace("", namespace)
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)
