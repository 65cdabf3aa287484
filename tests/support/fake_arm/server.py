"""The fake Azure Resource Manager as a werkzeug app: resource groups, Microsoft.Network and Microsoft.Compute
resources under them, long-running operations, and an App Service style managed-identity token endpoint (so
`DefaultAzureCredential` in a CLI under test gets a token without a cloud: IDENTITY_ENDPOINT + IDENTITY_HEADER,
https://learn.microsoft.com/azure/app-service/overview-managed-identity#rest-endpoint-reference).

Paths are matched case-insensitively, as ARM does. Every ARM call needs `api-version` (400
MissingApiVersionParameter) and a bearer token (401 AuthenticationFailed). The strict rules (strict.py) are
applied where Azure applies them: before a create is accepted, or when a delete would break a reference.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from typing import Any

from werkzeug.wrappers import Request, Response

from support.fake_arm.model import ArmError, ArmState, Json, now_iso
from support.fake_arm.strict import StrictArmRules, check_tags, check_vm, private_ip

_GROUPS = re.compile(r"^/subscriptions/([^/]+)/resourcegroups/?$", re.I)
_GROUP = re.compile(r"^/subscriptions/([^/]+)/resourcegroups/([^/]+)$", re.I)
_RESOURCE = re.compile(r"^/subscriptions/([^/]+)/resourcegroups/([^/]+)/providers/([^/]+)/([^/]+)/([^/]+)$", re.I)
_LIST_IN_GROUP = re.compile(r"^/subscriptions/([^/]+)/resourcegroups/([^/]+)/providers/([^/]+)/([^/]+)$", re.I)
_LIST_ALL = re.compile(r"^/subscriptions/([^/]+)/providers/([^/]+)/([^/]+)$", re.I)
_ASYNC = re.compile(r"^/subscriptions/[^/]+/providers/microsoft\.fake/operations/([^/]+)$", re.I)
_RESULT = re.compile(r"^/subscriptions/[^/]+/operationresults/([^/]+)$", re.I)
_SECRETS = re.compile(r"^/(secrets|deletedsecrets)(?:/([^/]+))?$", re.I)
_FILTER = re.compile(r"tagName eq '((?:[^']|'')*)' and tagValue eq '((?:[^']|'')*)'")
IDENTITY_HEADER = "fake-identity-header"
TOKEN = "fake-arm-token"
# How soon a client should poll again. azure-core reads `retry-after-ms` (and Retry-After, whole seconds, where 0
# falls back to its 30 s default): 10 ms keeps the tests fast while the client still really polls.
POLL_SOON = {"retry-after-ms": "10"}

VM = "microsoft.compute/virtualmachines"
NIC = "microsoft.network/networkinterfaces"
PIP = "microsoft.network/publicipaddresses"
VNET = "microsoft.network/virtualnetworks"
NSG = "microsoft.network/networksecuritygroups"
DISK = "microsoft.compute/disks"


def _json(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Response:
    text = "" if body is None else json.dumps(body)
    return Response(text, status=status, headers=headers or {}, content_type="application/json")


class FakeArmApp:
    """WSGI app over an ArmState, with the strict rules in front."""

    def __init__(self, state: ArmState, rules: StrictArmRules) -> None:
        self.state = state
        self.rules = rules
        self.base = ""  # https://127.0.0.1:PORT, set once served

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        with self.state.lock:
            self.state.requests.append((request.method, request.path))
            try:
                response = self.dispatch(request)
            except ArmError as exc:
                response = _json(exc.status, exc.body())
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        path = request.path.rstrip("/") if request.path != "/" else "/"
        if path.lower() == "/msi/token":
            return self.token(request)
        if "api-version" not in request.args:
            raise ArmError(400, "MissingApiVersionParameter", "The api-version query parameter (?api-version=) is "
                           "required for all requests.")
        if not request.headers.get("Authorization", "").startswith("Bearer "):
            raise ArmError(401, "AuthenticationFailed", "Authentication failed. The 'Authorization' header is "
                           "missing.")
        if m := _SECRETS.match(path):
            return self.secret(request, m.group(1).lower(), m.group(2))
        if m := _ASYNC.match(path):
            op = self.state.operations.get(m.group(1))
            if op is None:
                raise ArmError(404, "NotFound", "operation not found")
            return _json(200, op.poll(), {**POLL_SOON})
        if m := _RESULT.match(path):
            op = self.state.operations.get(m.group(1))
            if op is None:
                raise ArmError(404, "NotFound", "operation not found")
            body = op.poll()
            if body["status"] == "InProgress":
                return _json(202, None, {"Location": request.url, **POLL_SOON})
            return _json(200 if body["status"] == "Succeeded" else 500, None if op.error is None else op.error.body())
        if m := _GROUPS.match(path):
            return self.list_groups(request)
        if m := _GROUP.match(path):
            return self.group(request, m.group(2))
        if m := _RESOURCE.match(path):
            return self.resource(request, m.group(2), f"{m.group(3)}/{m.group(4)}", m.group(5))
        if m := _LIST_IN_GROUP.match(path):
            return self.list_resources(request, f"{m.group(3)}/{m.group(4)}", m.group(2))
        if m := _LIST_ALL.match(path):
            return self.list_resources(request, f"{m.group(2)}/{m.group(3)}", None)
        raise ArmError(404, "InvalidResourceType", f"The fake ARM does not serve {request.method} {path}")

    # ---- identity ------------------------------------------------------------------------------------------

    def token(self, request: Request) -> Response:
        if request.headers.get("X-IDENTITY-HEADER") != IDENTITY_HEADER:
            return _json(401, {"error": "missing X-IDENTITY-HEADER"})
        return _json(200, {"access_token": TOKEN, "expires_on": str(int(time.time()) + 3600),
                           "resource": request.args.get("resource", ""), "token_type": "Bearer"})

    # ---- Key Vault (served here too: the product's vault URL may be any https endpoint) ---------------------

    def secret(self, request: Request, collection: str, name: str | None) -> Response:
        """Set / Get / Delete Secret and Get Secrets (https://learn.microsoft.com/rest/api/keyvault/secrets/);
        names are 1-127 letters, digits and dashes (400 BadParameter otherwise)."""
        vault = self.state.secrets
        if name is not None and not re.fullmatch(r"[0-9A-Za-z-]{1,127}", name):
            raise ArmError(400, "BadParameter", "The request URI contains an invalid name: " + name)
        if collection == "deletedsecrets":  # purge
            if name is not None and name.lower() in self.state.deleted_secrets:
                self.state.deleted_secrets.discard(name.lower())
                return _json(204)
            raise ArmError(404, "SecretNotFound", f"Deleted Secret not found: {name}")
        if name is None:
            return _json(200, {"value": [{"id": f"{self.base}/secrets/{n}", "tags": v.get("tags", {})}
                                         for n, v in sorted(vault.items())], "nextLink": None})
        key = name.lower()
        if request.method == "PUT":
            body = request.get_json(force=True)
            check_tags(self.rules, body)
            vault[key] = {"value": body["value"], "contentType": body.get("contentType"), "tags": body.get("tags", {})}
            return _json(200, {"id": f"{self.base}/secrets/{name}/1", **{k: v for k, v in vault[key].items()
                                                                           if k != "value"}})
        if key not in vault:
            raise ArmError(404, "SecretNotFound", f"A secret with (name/id) {name} was not found in this key vault.")
        if request.method == "DELETE":
            vault.pop(key)
            self.state.deleted_secrets.add(key)
            return _json(200, {"recoveryId": f"{self.base}/deletedsecrets/{name}"})
        return _json(200, {"id": f"{self.base}/secrets/{name}/1", **vault[key]})

    # ---- resource groups -----------------------------------------------------------------------------------

    def list_groups(self, request: Request) -> Response:
        groups = list(self.state.groups.values())
        flt = request.args.get("$filter")
        if flt:
            m = _FILTER.search(flt)
            if not m:
                raise ArmError(400, "InvalidFilterInQueryString", f"Invalid $filter '{flt}'")
            name, value = (g.replace("''", "'") for g in m.groups())
            groups = [g for g in groups if (g.get("tags") or {}).get(name) == value]
        return _json(200, {"value": groups})

    def group(self, request: Request, name: str) -> Response:
        key = name.lower()
        found = self.state.groups.get(key)
        if request.method == "PUT":
            body = request.get_json(force=True)
            check_tags(self.rules, body)
            if found and found["properties"]["provisioningState"] == "Deleting" and self.rules.group_deleting:
                raise ArmError(409, "ResourceGroupBeingDeleted", f"The resource group '{name}' is in deprovisioning "
                               "state and cannot perform this operation.")
            group = {"id": f"/subscriptions/{self.state.subscription}/resourceGroups/{name}", "name": name,
                     "type": "Microsoft.Resources/resourceGroups", "location": body["location"],
                     "tags": body.get("tags") or {}, "properties": {"provisioningState": "Succeeded"}}
            self.state.groups[key] = group
            return _json(200 if found else 201, group)
        if found is None:
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{name}' could not be found.")
        if request.method in ("GET", "HEAD"):
            return _json(204 if request.method == "HEAD" else 200, None if request.method == "HEAD" else found)
        if request.method == "DELETE":
            found["properties"]["provisioningState"] = "Deleting"

            def finish() -> ArmError | None:
                prefix = found["id"].lower() + "/"
                for rid in [r for r in self.state.resources if r.startswith(prefix)]:
                    self.state.resources.pop(rid, None)
                self.state.groups.pop(key, None)
                return None

            op = self.state.new_operation(finish)
            location = f"{self.base}/subscriptions/{self.state.subscription}/operationresults/{op.op_id}" \
                       f"?api-version=2022-09-01"
            return _json(202, None, {"Location": location, **POLL_SOON})
        raise ArmError(405, "MethodNotAllowed", request.method)

    # ---- resources -----------------------------------------------------------------------------------------

    def list_resources(self, request: Request, kind: str, group: str | None) -> Response:
        if group is not None and group.lower() not in self.state.groups:
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{group}' could not be found.")
        prefix = f"/subscriptions/{self.state.subscription}/resourcegroups/{group.lower()}/" if group else ""
        found = [self.state.public(r, expand=request.args.get("$expand")) for rid, r in self.state.resources.items()
                 if r["type"].lower() == kind.lower() and rid.startswith(prefix)]
        return _json(200, {"value": found})

    def resource(self, request: Request, group: str, kind: str, name: str) -> Response:
        group_rec = self.state.groups.get(group.lower())
        if group_rec is None:
            raise ArmError(404, "ResourceGroupNotFound", f"Resource group '{group}' could not be found.")
        if kind.lower() == "microsoft.resources/tags" and request.method == "PATCH":
            return self.merge_tags(group_rec, request.get_json(force=True))
        rid = self.state.rid(group_rec["name"], kind, name)
        found = self.state.resources.get(rid.lower())
        if request.method == "GET":
            if found is None:
                raise ArmError(404, "ResourceNotFound", f"The Resource '{kind}/{name}' under resource group "
                               f"'{group}' was not found.")
            return _json(200, self.state.public(found, expand=request.args.get("$expand")))
        if request.method == "PUT":
            if group_rec["properties"]["provisioningState"] == "Deleting" and self.rules.group_deleting:
                raise ArmError(409, "ResourceGroupBeingDeleted", f"The resource group '{group}' is in "
                               "deprovisioning state and cannot perform this operation.")
            return self.put(rid, kind, name, found, request.get_json(force=True))
        if request.method == "DELETE":
            if found is None:
                return _json(204)
            return self.delete(found)
        raise ArmError(405, "MethodNotAllowed", request.method)

    def merge_tags(self, group: Json, body: Json) -> Response:
        """Tags - Update At Scope, operation Merge, on a resource group
        (https://learn.microsoft.com/rest/api/resources/tags/update-at-scope)."""
        if body.get("operation") not in ("Merge", "Replace", "Delete"):
            raise ArmError(400, "InvalidRequestContent", "operation must be Merge, Replace or Delete")
        new = dict(body.get("properties", {}).get("tags") or {})
        merged = {**(group.get("tags") or {}), **new} if body["operation"] == "Merge" else new
        check_tags(self.rules, {"tags": merged})
        group["tags"] = merged
        return _json(200, {"id": f"{group['id']}/providers/Microsoft.Resources/tags/default", "name": "default",
                           "type": "Microsoft.Resources/tags", "properties": {"tags": merged}})

    def _async(self, status: int, resource: Json, finish: Any) -> Response:
        op = self.state.new_operation(finish)
        url = f"{self.base}/subscriptions/{self.state.subscription}/providers/Microsoft.Fake/operations/{op.op_id}" \
              f"?api-version=2024-01-01"
        return _json(status, self.state.public(resource) if status != 202 else None,
                     {"Azure-AsyncOperation": url, **POLL_SOON})

    def put(self, rid: str, kind: str, name: str, existing: Json | None, body: Json) -> Response:
        check_tags(self.rules, body)
        lkind = kind.lower()
        if lkind == VM:
            check_vm(self.rules, self.state, existing, body)
        resource: Json = {"id": rid, "name": name, "type": kind, "location": body["location"],
                          "tags": body.get("tags") or {}, "properties": dict(body.get("properties") or {})}
        for extra in ("zones", "sku", "identity"):
            if extra in body:
                resource[extra] = body[extra]
        props = resource["properties"]
        finish = None
        if lkind == VM:
            finish = self._prepare_vm(resource, existing)
        elif lkind == NIC:
            self._prepare_nic(resource, existing)
        elif lkind == PIP:
            props["ipAddress"] = (existing or {}).get("properties", {}).get("ipAddress") or \
                f"203.0.113.{len(self.state.of_type(PIP)) + 10}"
        elif lkind == VNET:
            for subnet in props.get("subnets", []):
                subnet["id"] = f"{rid}/subnets/{subnet['name']}"
        elif lkind == NSG:
            for rule in props.get("securityRules", []):
                rule["id"] = f"{rid}/securityRules/{rule['name']}"
            props["defaultSecurityRules"] = DEFAULT_RULES
        props["provisioningState"] = "Updating" if existing else "Creating"
        self.state.resources[rid.lower()] = resource

        def done() -> ArmError | None:
            error = finish() if finish else None
            props["provisioningState"] = "Failed" if error else "Succeeded"
            return error

        return self._async(200 if existing else 201, resource, done)

    def _prepare_vm(self, vm: Json, existing: Json | None) -> Any:
        props = vm["properties"]
        region, size = vm["location"], props["hardwareProfile"]["vmSize"]
        zone = (vm.get("zones") or [None])[0]
        if existing is None:
            fault = self.state.take_fault(region, size, zone, sync=True)
            if fault is not None:
                raise ArmError(409, fault.code, fault.message.format(size=size, region=region))
        for ref in props["networkProfile"].get("networkInterfaces", []):
            nic = self.state.resources.get(ref["id"].lower())
            if nic is None:
                raise ArmError(400, "InvalidResourceReference", f"Resource {ref['id']} referenced by resource "
                               f"{vm['id']} was not found.")
            if nic["location"] != region:
                raise ArmError(400, "InvalidParameter", "The NIC and the VM must be in the same region.")
            owner = nic["properties"].get("virtualMachine", {}).get("id")
            if owner and owner.lower() != vm["id"].lower():
                raise ArmError(400, "NicInUse", f"Network interface {ref['id']} is used by {owner}.")
            nic["properties"]["virtualMachine"] = {"id": vm["id"]}
        os_disk = props["storageProfile"].setdefault("osDisk", {})
        if existing is None:
            disk_name = f"{vm['name']}_OsDisk_1_{uuid.uuid4().hex}"
            disk_id = self.state.rid(vm["id"].split("/")[4], "Microsoft.Compute/disks", disk_name)
            os_disk["name"] = disk_name
            os_disk.setdefault("managedDisk", {})["id"] = disk_id
            self.state.resources[disk_id.lower()] = {
                "id": disk_id, "name": disk_name, "type": "Microsoft.Compute/disks", "location": region,
                "tags": {}, "properties": {"managedBy": vm["id"], "diskSizeGB": os_disk.get("diskSizeGB", 30)}}
            props["vmId"] = str(uuid.uuid4())
            props["timeCreated"] = now_iso()
        else:
            props["storageProfile"]["osDisk"] = existing["properties"]["storageProfile"]["osDisk"]
            props["vmId"] = existing["properties"]["vmId"]
            props["timeCreated"] = existing["properties"]["timeCreated"]
            vm["_power"] = existing.get("_power")

        def finish() -> ArmError | None:
            fault = self.state.take_fault(region, size, zone, sync=False) if existing is None else None
            if fault is not None:  # the VM stays, provisioningState Failed, as Azure leaves it
                return ArmError(200, fault.code, fault.message.format(size=size, region=region))
            vm["_power"] = "PowerState/running"
            return None

        return finish

    def _prepare_nic(self, nic: Json, existing: Json | None) -> None:
        before = {c["name"]: c.get("properties", {}) for c in (existing or {}).get("properties", {})
                  .get("ipConfigurations", [])}
        for config in nic["properties"].get("ipConfigurations", []):
            cprops = config.setdefault("properties", {})
            config["id"] = f"{nic['id']}/ipConfigurations/{config['name']}"
            subnet = cprops.get("subnet", {}).get("id", "")
            vnet_id = subnet.rsplit("/subnets/", 1)[0].lower()
            vnet = self.state.resources.get(vnet_id)
            found = [s for s in (vnet or {}).get("properties", {}).get("subnets", [])
                     if s.get("id", "").lower() == subnet.lower()]
            if vnet is None or not found:
                raise ArmError(400, "InvalidResourceReference", f"Resource {subnet} referenced by resource "
                               f"{nic['id']} was not found.")
            if vnet["location"] != nic["location"]:
                raise ArmError(400, "InvalidResourceReference", "The subnet's virtual network is in another "
                               "region than the network interface.")
            ip_ref = cprops.get("publicIPAddress", {}).get("id")
            if ip_ref and ip_ref.lower() not in self.state.resources:
                raise ArmError(400, "InvalidResourceReference", f"Resource {ip_ref} referenced by resource "
                               f"{nic['id']} was not found.")
            cprops["privateIPAddress"] = private_ip(self.rules, self.state, nic["id"], found[0], cprops,
                                                    before.get(config["name"]))

    def delete(self, resource: Json) -> Response:
        lkind = resource["type"].lower()
        props = resource["properties"]
        if self.rules.in_use:
            if lkind == NIC and props.get("virtualMachine"):
                raise ArmError(400, "NicInUse", f"Network Interface {resource['id']} is used by existing resource "
                               f"{props['virtualMachine']['id']}. In order to delete the network interface, it "
                               "must be dissociated from the resource.")
            if lkind == PIP:
                users = [n["id"] for n in self.state.of_type(NIC) for c in n["properties"].get("ipConfigurations", [])
                         if c.get("properties", {}).get("publicIPAddress", {}).get("id", "").lower()
                         == resource["id"].lower()]
                if users:
                    raise ArmError(400, "PublicIPAddressInUse", f"Public IP address {resource['id']} can not be "
                                   f"deleted since it is still allocated to resource {users[0]}.")
            if lkind == VNET:
                used = [n["id"] for n in self.state.of_type(NIC) for c in n["properties"].get("ipConfigurations", [])
                        if c.get("properties", {}).get("subnet", {}).get("id", "").lower()
                        .startswith(resource["id"].lower() + "/")]
                if used:
                    raise ArmError(400, "InUseSubnetCannotBeDeleted", f"Subnet of {resource['id']} is in use by "
                                   f"{used[0]} and cannot be deleted.")
            if lkind == DISK and props.get("managedBy"):
                raise ArmError(409, "OperationNotAllowed", f"Disk {resource['name']} is attached to VM "
                               f"{props['managedBy']}.")
        props["provisioningState"] = "Deleting"

        def finish() -> ArmError | None:
            if lkind == VM:
                self.state.delete_vm(resource)
            else:
                self.state.resources.pop(resource["id"].lower(), None)
            return None

        return self._async(202, resource, finish)


# Every NSG's default rules: all traffic inside the VNet allowed, all other inbound denied.
# https://learn.microsoft.com/azure/virtual-network/network-security-groups-overview#default-security-rules
DEFAULT_RULES = [
    {"name": "AllowVnetInBound", "properties": {"priority": 65000, "direction": "Inbound", "access": "Allow",
                                                "protocol": "*", "sourceAddressPrefix": "VirtualNetwork",
                                                "destinationAddressPrefix": "VirtualNetwork",
                                                "sourcePortRange": "*", "destinationPortRange": "*"}},
    {"name": "AllowAzureLoadBalancerInBound", "properties": {
        "priority": 65001, "direction": "Inbound", "access": "Allow", "protocol": "*",
        "sourceAddressPrefix": "AzureLoadBalancer", "destinationAddressPrefix": "*", "sourcePortRange": "*",
        "destinationPortRange": "*"}},
    {"name": "DenyAllInBound", "properties": {"priority": 65500, "direction": "Inbound", "access": "Deny",
                                              "protocol": "*", "sourceAddressPrefix": "*",
                                              "destinationAddressPrefix": "*", "sourcePortRange": "*",
                                              "destinationPortRange": "*"}},
]
