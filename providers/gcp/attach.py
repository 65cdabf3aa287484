"""`gpuplan exec/ssh` into a GCE run: `gcloud compute ssh --tunnel-through-iap`, so the machine needs no external
address or open port 22 to the internet, only the IAP range (35.235.240.0/20) allowed to port 22 and the user's
roles/iap.tunnelResourceAccessor. gpuplan builds the command; the user's gcloud does the talking.
https://cloud.google.com/iap/docs/using-tcp-forwarding#tunneling_ssh_connections
https://cloud.google.com/sdk/gcloud/reference/compute/ssh (--zone, --project, --tunnel-through-iap, --command)
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost, remote_snippet
from gpuplan.providers.base import ProviderError


def gcp_ssh_host(target: AttachTarget, project: str | None = None) -> SshHost:
    """The node as an ssh_config Host: ssh through an IAP TCP tunnel (`gcloud compute start-iap-tunnel ...
    --listen-on-stdin`, https://cloud.google.com/iap/docs/using-tcp-forwarding) with the key gcloud made for
    `gcloud compute ssh` (~/.ssh/google_compute_engine) and your local user name, as gcloud logs in."""
    zone, _, name = target.instance_id.rpartition("/")
    zone = zone or target.zone or ""
    if not zone or not name:
        raise ProviderError(f"run {target.run_id} node {target.node_rank}: no zone was recorded for "
                            f"{target.instance_id}; cannot reach it")
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or os.environ.get("CLOUDSDK_CORE_PROJECT")
    proxy = ["gcloud", "compute", "start-iap-tunnel", name, "%p", "--listen-on-stdin", f"--zone={zone}"]
    if project:
        proxy.append(f"--project={project}")
    return SshHost(name, None, shlex.join(proxy), {"IdentityFile": "~/.ssh/google_compute_engine"})


def gcp_attach(target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               project: str | None = None) -> Attach:
    # The recorded id is ZONE/NAME (providers/gcp/instance.py); the row's zone column says the same.
    zone, _, name = target.instance_id.rpartition("/")
    zone = zone or target.zone or ""
    if not zone or not name:
        raise ProviderError(f"run {target.run_id} node {target.node_rank}: no zone was recorded for "
                            f"{target.instance_id}; cannot reach it")
    project = project or os.environ.get("GOOGLE_CLOUD_PROJECT") or \
        os.environ.get("CLOUDSDK_CORE_PROJECT")
    argv = ["gcloud", "compute", "ssh", name, f"--zone={zone}", "--tunnel-through-iap"]
    if project:
        argv.append(f"--project={project}")
    argv += [f"--command={remote_snippet(target, command)}"]
    if interactive or command is None:
        argv += ["--", "-t"]
    return Attach(argv, f"gcloud compute ssh (IAP) to {name} in {zone}")
