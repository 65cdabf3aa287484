"""VPC networks and subnetworks for the fake Compute API: insert/get/aggregatedList, mechanics only.

networks.insert / get (https://cloud.google.com/compute/docs/reference/rest/v1/networks) and subnetworks.insert /
get / aggregatedList (https://cloud.google.com/compute/docs/reference/rest/v1/subnetworks); an insert is DONE at
once. The auto-mode `default` network is there from the start, as in a new project. The plain fake checks nothing
GCE would (MTU range, overlapping ranges): tests/support/strict_gce.py keeps the documented rules.
"""

from __future__ import annotations

import uuid
from typing import Any

from werkzeug.wrappers import Request

from support.fakes.gce_errors import ApiError

BASE = "https://compute.googleapis.com/compute/v1"


def _operation(name: str | None = None) -> dict[str, Any]:
    return {"kind": "compute#operation", "name": name or f"operation-{uuid.uuid4().hex[:20]}", "status": "DONE",
            "progress": 100}


def network_call(state: Any, endpoint: str, request: Request, region: str | None, name: str | None) -> dict[str, Any]:
    """The `networks`/`network`/`subnetworks`/`subnetwork`/`aggregated_subnetworks` endpoints of GceApp."""
    project = state.project
    with state._lock:
        if endpoint == "networks" and request.method == "POST":
            body = request.get_json(force=True)
            if body["name"] in state.networks or body["name"] == "default":
                raise ApiError(409, f"The resource 'projects/{project}/global/networks/{body['name']}' already "
                               "exists", "alreadyExists")
            state.networks[body["name"]] = {**body, "kind": "compute#network", "mtu": body.get("mtu") or 1460,
                                            "selfLink": f"{BASE}/projects/{project}/global/networks/{body['name']}"}
            return _operation()
        if endpoint == "networks":
            return {"kind": "compute#networkList", "items": list(state.networks.values())}
        if endpoint == "network":
            if name == "default":
                return {"kind": "compute#network", "name": "default", "autoCreateSubnetworks": True, "mtu": 1460,
                        "selfLink": f"{BASE}/projects/{project}/global/networks/default"}
            if name not in state.networks:
                raise ApiError(404, f"The resource 'projects/{project}/global/networks/{name}' was not found",
                               "notFound")
            return dict(state.networks[str(name)])
        if endpoint == "subnetworks" and request.method == "POST":
            body = request.get_json(force=True)
            if (region, body["name"]) in state.subnetworks:
                raise ApiError(409, f"The resource 'projects/{project}/regions/{region}/subnetworks/{body['name']}' "
                               "already exists", "alreadyExists")
            network = str(body.get("network") or "").rstrip("/").rsplit("/", 1)[-1]
            if network not in state.networks:
                raise ApiError(404, f"The resource 'projects/{project}/global/networks/{network}' was not found",
                               "notFound")
            state.subnetworks[(str(region), body["name"])] = {
                **body, "kind": "compute#subnetwork", "region": f"{BASE}/projects/{project}/regions/{region}",
                "network": f"{BASE}/projects/{project}/global/networks/{network}",
                "selfLink": f"{BASE}/projects/{project}/regions/{region}/subnetworks/{body['name']}"}
            return _operation()
        if endpoint == "subnetwork":
            found = state.subnetworks.get((str(region), str(name)))
            if found is None:
                raise ApiError(404, f"The resource 'projects/{project}/regions/{region}/subnetworks/{name}' was not "
                               "found", "notFound")
            return dict(found)
        items: dict[str, Any] = {}
        for (where, _name), subnet in state.subnetworks.items():
            items.setdefault(f"regions/{where}", {"subnetworks": []})["subnetworks"].append(subnet)
        return {"kind": "compute#subnetworkAggregatedList", "items": items}
