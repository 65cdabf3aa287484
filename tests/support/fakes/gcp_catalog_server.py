"""A small fake of the Cloud Billing Catalog (list_skus) and Compute machineTypes/acceleratorTypes REST APIs.

Served by werkzeug on 127.0.0.1 (port 0) inside the test process, so the REAL google-cloud-billing and
google-cloud-compute clients (REST transport) talk to it exactly as they would to Google. The responses have
the recorded shapes of the real APIs (camelCase JSON, Money as units + nanos, aggregated lists keyed by
`zones/<zone>`); the prices are GCP's published us-central1 list prices, so the composed a2-highgpu-1g price
equals the shipped snapshot's (0.73948 host + 2.93391 GPU).

Failure injection: `server.fail[path_fragment] = status` makes every request whose path contains the fragment
answer that HTTP status with a Google-style error body.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

from support.fakes.wsgi import QuietHandler

COMPUTE_SERVICE = "6F81-5844-456A"


def money(price: str) -> dict[str, Any]:
    value = Decimal(price)
    units = int(value)
    return {"currencyCode": "USD", "units": str(units), "nanos": int((value - units) * 10**9)}


def sku(sku_id: str, description: str, group: str, usage: str, regions: list[str], price: str,
        unit: str = "h") -> dict[str, Any]:
    """One Sku resource in the shape list_skus returns."""
    return {
        "name": f"services/{COMPUTE_SERVICE}/skus/{sku_id}",
        "skuId": sku_id,
        "description": description,
        "category": {"serviceDisplayName": "Compute Engine", "resourceFamily": "Compute",
                     "resourceGroup": group, "usageType": usage},
        "serviceRegions": regions,
        "pricingInfo": [{
            "effectiveTime": "2026-11-01T00:00:00Z",
            "pricingExpression": {"usageUnit": unit, "usageUnitDescription": "hour" if unit == "h" else
                                  "gibibyte hour", "baseUnit": "s", "displayQuantity": 1,
                                  "tieredRates": [{"startUsageAmount": 0, "unitPrice": money(price)}]},
            "currencyConversionRate": 1,
        }],
        "serviceProviderName": "Google",
    }


def default_skus() -> list[dict[str, Any]]:
    us, eu = ["us-central1"], ["europe-west4"]
    return [
        sku("A001", "Nvidia Tesla A100 GPU running in Americas", "GPU", "OnDemand", us, "2.933908"),
        sku("A002", "Nvidia Tesla A100 GPU attached to Spot Preemptible VMs running in Americas", "GPU",
            "Preemptible", us, "1.4341"),
        sku("A003", "A2 Instance Core running in Americas", "CPU", "OnDemand", us, "0.031611"),
        sku("A004", "A2 Instance Ram running in Americas", "RAM", "OnDemand", us, "0.004237", "GiBy.h"),
        sku("A005", "Spot Preemptible A2 Instance Core running in Americas", "CPU", "Preemptible", us, "0.015806"),
        sku("A006", "Spot Preemptible A2 Instance Ram running in Americas", "RAM", "Preemptible", us, "0.002118",
            "GiBy.h"),
        sku("N001", "N1 Predefined Instance Core running in Americas", "N1Standard", "OnDemand", us, "0.031611"),
        sku("N002", "N1 Predefined Instance Ram running in Americas", "N1Standard", "OnDemand", us, "0.004237",
            "GiBy.h"),
        sku("N003", "Spot Preemptible N1 Predefined Instance Core running in Americas", "N1Standard",
            "Preemptible", us, "0.00698"),
        sku("N004", "Spot Preemptible N1 Predefined Instance Ram running in Americas", "N1Standard",
            "Preemptible", us, "0.000936", "GiBy.h"),
        sku("N005", "N1 Predefined Instance Core running in Netherlands", "N1Standard", "OnDemand", eu,
            "0.034773"),
        sku("N006", "N1 Predefined Instance Ram running in Netherlands", "N1Standard", "OnDemand", eu,
            "0.004661", "GiBy.h"),
        sku("T001", "Nvidia Tesla T4 GPU running in Americas", "GPU", "OnDemand", us, "0.35"),
        sku("T002", "Nvidia Tesla T4 GPU attached to Spot Preemptible VMs running in Americas", "GPU",
            "Preemptible", us, "0.14"),
        sku("T003", "Nvidia Tesla T4 GPU running in Netherlands", "GPU", "OnDemand", eu, "0.35"),
        sku("V001", "Nvidia Tesla V100 GPU running in Americas", "GPU", "OnDemand", us, "2.48"),
        sku("L001", "Nvidia L4 GPU running in Americas", "GPU", "OnDemand", us, "0.5601"),
        sku("G001", "G2 Instance Core running in Americas", "CPU", "OnDemand", us, "0.024988"),
        sku("G002", "G2 Instance Ram running in Americas", "RAM", "OnDemand", us, "0.002927", "GiBy.h"),
        # Distractors a real catalog is full of: other purchase models, other GPUs, other resources.
        sku("X001", "Commitment v1: Nvidia Tesla T4 GPU in Americas for 1 Year", "GPU", "Commit1Yr", us, "0.22"),
        sku("X002", "Nvidia Tesla K80 GPU running in Americas", "GPU", "OnDemand", us, "0.45"),
        sku("X003", "Storage PD Capacity", "PDStandard", "OnDemand", us, "0.04", "GiBy.mo"),
        sku("X004", "E2 Instance Core running in Americas", "CPU", "OnDemand", us, "0.021811"),
    ]


def machine_type(zone: str, name: str, cpus: int, memory_mb: int, accel: str | None = None,
                 count: int = 0) -> dict[str, Any]:
    out: dict[str, Any] = {
        "kind": "compute#machineType", "id": str(abs(hash((zone, name))) % 10**12), "name": name,
        "description": f"{cpus} vCPUs", "guestCpus": cpus, "memoryMb": memory_mb, "zone": zone,
        "isSharedCpu": False, "maximumPersistentDisks": 128,
        "selfLink": f"https://www.googleapis.com/compute/v1/projects/p/zones/{zone}/machineTypes/{name}",
    }
    if accel:
        out["accelerators"] = [{"guestAcceleratorType": accel, "guestAcceleratorCount": count}]
    return out


def default_machine_types() -> dict[str, list[dict[str, Any]]]:
    n1 = [("n1-standard-4", 4, 15360), ("n1-standard-8", 8, 30720), ("n1-standard-16", 16, 61440),
          ("n1-standard-32", 32, 122880)]
    zones: dict[str, list[dict[str, Any]]] = {}
    for zone in ("us-central1-a", "us-central1-b", "europe-west4-a"):
        zones[zone] = [machine_type(zone, name, cpus, mem) for name, cpus, mem in n1]
        zones[zone].append(machine_type(zone, "e2-standard-4", 4, 16384))
    zones["us-central1-a"] += [
        machine_type("us-central1-a", "a2-highgpu-1g", 12, 87040, "nvidia-tesla-a100", 1),
        machine_type("us-central1-a", "g2-standard-4", 4, 16384, "nvidia-l4", 1),
    ]
    return zones


def default_accelerator_types() -> dict[str, list[dict[str, Any]]]:
    def accel(zone: str, name: str, maximum: int) -> dict[str, Any]:
        return {"kind": "compute#acceleratorType", "name": name, "description": name.upper(),
                "zone": f"https://www.googleapis.com/compute/v1/projects/p/zones/{zone}",
                "maximumCardsPerInstance": maximum}

    return {
        "us-central1-a": [accel("us-central1-a", "nvidia-tesla-t4", 4), accel("us-central1-a", "nvidia-tesla-v100", 8),
                          accel("us-central1-a", "nvidia-tesla-a100", 16), accel("us-central1-a", "nvidia-l4", 8)],
        "us-central1-b": [accel("us-central1-b", "nvidia-tesla-t4", 4)],
        "europe-west4-a": [accel("europe-west4-a", "nvidia-tesla-t4", 4)],
    }


@dataclass
class FakeGcpCatalog:
    """The fake server; `with FakeGcpCatalog() as fake:` serves on fake.url until the block ends."""

    skus: list[dict[str, Any]] = field(default_factory=default_skus)
    machine_types: dict[str, list[dict[str, Any]]] = field(default_factory=default_machine_types)
    accelerator_types: dict[str, list[dict[str, Any]]] = field(default_factory=default_accelerator_types)
    page_size: int = 5  # small, so the clients' pagination is exercised
    fail: dict[str, int] = field(default_factory=dict)
    requests: list[str] = field(default_factory=list)
    api_keys: list[str] = field(default_factory=list)  # the x-goog-api-key of each request that sent one
    url: str = ""

    def __enter__(self) -> FakeGcpCatalog:
        self._server = make_server("127.0.0.1", 0, self._app, threaded=True, request_handler=QuietHandler)
        self.url = f"http://127.0.0.1:{self._server.server_port}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)

    def env(self) -> dict[str, str]:
        """The gcloud-style endpoint overrides that point gpuplan at this server."""
        return {"CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE": f"{self.url}/compute/v1/",
                "CLOUDSDK_API_ENDPOINT_OVERRIDES_CLOUDBILLING": f"{self.url}/"}

    def _app(self, environ: dict[str, Any], start_response: Any) -> Any:
        request = Request(environ)
        self.requests.append(request.path)
        if request.headers.get("x-goog-api-key") or request.args.get("key"):
            self.api_keys.append(request.headers.get("x-goog-api-key") or request.args.get("key", ""))
        response = self._route(request)
        return response(environ, start_response)

    def _route(self, request: Request) -> Response:
        for fragment, status in self.fail.items():
            if fragment in request.path:
                return _json({"error": {"code": status, "message": f"injected failure on {request.path}",
                                        "status": "PERMISSION_DENIED" if status == 403 else "INTERNAL"}}, status)
        parts = request.path.strip("/").split("/")
        if parts[:2] == ["v1", "services"] and len(parts) == 4 and parts[3] == "skus":
            if parts[2] != COMPUTE_SERVICE:
                return _json({"skus": []})
            start = int(request.args.get("pageToken") or 0)
            size = int(request.args.get("pageSize") or self.page_size)
            page = self.skus[start:start + size]
            token = str(start + size) if start + size < len(self.skus) else ""
            return _json({"skus": page, "nextPageToken": token})
        if parts[:3] == ["compute", "v1", "projects"] and len(parts) == 6 and parts[4] == "aggregated":
            kind = parts[5]
            table = {"machineTypes": self.machine_types, "acceleratorTypes": self.accelerator_types}.get(kind)
            if table is None:
                return _json({"error": {"code": 404, "message": "not found"}}, 404)
            items = {f"zones/{zone}": {kind: rows} for zone, rows in table.items()}
            return _json({"kind": f"compute#{kind[:-1]}AggregatedList", "id": f"projects/{parts[3]}/aggregated",
                          "items": items})
        return _json({"error": {"code": 404, "message": f"no route {request.path}"}}, 404)


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status=status, mimetype="application/json")
