"""What Google Cloud holds for a run, as the GCP page's examples show it: the run's VMs as the Compute API returns
them, and gpuplan's secrets in Secret Manager; `add-secret` leaves a secret as another gpuplan (another database)
would have left it, for the reconcile example.

It reads the REST APIs directly (instances.aggregatedList, secrets.list), not through gpuplan, so the page shows
what gpuplan asked Google for. The endpoints are gcloud's own overrides (CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE,
_SECRETMANAGER: the docs' loopback fakes) and the project GOOGLE_CLOUD_PROJECT; it refuses any endpoint that is not
on loopback, since it sends no credentials.

    python3 scripts/docsite/show_gcp_run.py vm RUN_ID [--script-lines PATTERN]
    python3 scripts/docsite/show_gcp_run.py secrets
    python3 scripts/docsite/show_gcp_run.py add-secret RUN_ID NAME
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import re
import urllib.parse
import urllib.request
from typing import Any

LOOPBACK = re.compile(r"^http://127\.0\.0\.1:\d+/")


def _endpoint(variable: str) -> str:
    url = os.environ.get(variable, "")
    if not LOOPBACK.match(url):
        raise SystemExit(f"{variable} must name a loopback endpoint (http://127.0.0.1:PORT/...), not {url!r}")
    return url if url.endswith("/") else url + "/"


def _call(url: str, method: str = "GET", body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return dict(json.loads(response.read() or b"{}"))


def show_vm(run_id: str, script_lines: str | None) -> None:
    project = os.environ["GOOGLE_CLOUD_PROJECT"]
    listing = _call(f"{_endpoint('CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE')}projects/{project}/aggregated/instances")
    for scoped in listing.get("items", {}).values():
        for vm in scoped.get("instances", []):
            if vm.get("labels", {}).get("gpuplan-run-id") != run_id:
                continue
            print(f"name: {vm['name']} ({vm['zone'].rsplit('/', 1)[-1]}, {vm['machineType'].rsplit('/', 1)[-1]})")
            print(f"labels: {dict(sorted(vm.get('labels', {}).items()))}")
            print(f"scheduling: {vm.get('scheduling', {})}")
            gpus = [(a["acceleratorType"].rsplit("/", 1)[-1], a["acceleratorCount"])
                    for a in vm.get("guestAccelerators", [])]
            print(f"gpus: {gpus or '(with the machine type)'}")
            for disk in vm.get("disks", []):
                if disk.get("boot"):
                    print(f"image: {disk.get('initializeParams', {}).get('sourceImage')}")
            accounts = [(a.get("email"), a.get("scopes")) for a in vm.get("serviceAccounts", [])]
            print(f"serviceAccounts: {accounts}")
            if script_lines:
                items = {i["key"]: i.get("value", "") for i in vm.get("metadata", {}).get("items", [])}
                pattern = re.compile(script_lines)
                for line in items.get("startup-script", "").splitlines():
                    if pattern.match(line):
                        print(f"  startup-script: {line}")


def show_secrets() -> None:
    project = os.environ["GOOGLE_CLOUD_PROJECT"]
    base = _endpoint("CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER")
    secrets = _call(f"{base}v1/projects/{project}/secrets").get("secrets", [])
    if not secrets:
        print("(no secrets)")
    for secret in sorted(secrets, key=lambda s: s["name"]):
        print(f"{secret['name']}  labels={dict(sorted(secret.get('labels', {}).items()))}")


def add_secret(run_id: str, name: str) -> None:
    """A secret as gpuplan stores one (its id, labels and one version), for a run this database does not hold."""
    project = os.environ["GOOGLE_CLOUD_PROJECT"]
    base = _endpoint("CLOUDSDK_API_ENDPOINT_OVERRIDES_SECRETMANAGER")
    secret_id = f"gpuplan-{run_id}-{name}"
    labels = {"gpuplan-created-by": "gpuplan", "gpuplan-run-id": run_id}
    query = urllib.parse.urlencode({"secretId": secret_id})
    _call(f"{base}v1/projects/{project}/secrets?{query}", "POST",
          {"replication": {"automatic": {}}, "labels": labels})
    payload = base64.b64encode(b"left-behind").decode()
    _call(f"{base}v1/projects/{project}/secrets/{secret_id}:addVersion", "POST", {"payload": {"data": payload}})
    print(f"projects/{project}/secrets/{secret_id}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    vm = sub.add_parser("vm")
    vm.add_argument("run_id")
    vm.add_argument("--script-lines", help="print the startup script's lines that match this regex")
    sub.add_parser("secrets")
    add = sub.add_parser("add-secret")
    add.add_argument("run_id")
    add.add_argument("name")
    args = parser.parse_args()
    if args.what == "vm":
        show_vm(args.run_id, args.script_lines)
    elif args.what == "secrets":
        show_secrets()
    else:
        add_secret(args.run_id, args.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
