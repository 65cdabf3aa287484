"""`gpuplan ssh RUN --config` for a GCP node: an IAP-tunnel Host entry the real ssh client reads (`ssh -G`)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from gpuplan.providers.attach_base import AttachTarget
from gpuplan.providers.gcp.attach import gcp_ssh_host
from gpuplan.runs.ssh_config import entry_text


def test_the_entry_tunnels_through_iap_with_gclouds_key(tmp_path: Path) -> None:
    target = AttachTarget(run_id="r-gcpssh0001", provider="gcp", instance_id="us-central1-a/gpuplan-r-gcpssh0001-0",
                          node_rank=0, nodes=1, zone="us-central1-a")
    host = gcp_ssh_host(target, "my-proj")
    config = tmp_path / "config"
    config.write_text(entry_text("r-gcpssh0001", [(0, host)]))
    resolved = subprocess.run(["ssh", "-G", "-F", str(config), "gpuplan-r-gcpssh0001"], capture_output=True,
                              text=True, check=True).stdout.lower()
    assert "hostname gpuplan-r-gcpssh0001-0" in resolved
    assert ("proxycommand gcloud compute start-iap-tunnel gpuplan-r-gcpssh0001-0 %p --listen-on-stdin "
            "--zone=us-central1-a --project=my-proj") in resolved
    assert "google_compute_engine" in resolved and "stricthostkeychecking accept-new" in resolved


def test_a_value_with_a_line_break_never_becomes_a_second_keyword() -> None:
    from gpuplan.providers.attach_base import SshHost

    with pytest.raises(ValueError, match="line break"):
        entry_text("r-x", [(0, SshHost("host\nProxyCommand evil"))])
