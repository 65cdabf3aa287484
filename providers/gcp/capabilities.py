"""What GCP offers beyond starting machines (gpuplan.providers.base capabilities): a way in (`gcloud compute ssh`
through IAP), live prices (the Cloud Billing catalog with the Compute type lists), and the boot script's hooks
(Secret Manager, GCS, guest attributes, the preemption notice). Kept apart from provider.py, which is the
machines' lifecycle."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from gpuplan.catalog.offer import Offer
from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.errors import UserError
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost
from gpuplan.providers.base import Attachable, PublishesPrices, RefreshesPrices
from gpuplan.providers.gcp.boot import gcp_boot_cloud


class GcpCapabilities(Attachable, RefreshesPrices, PublishesPrices):
    """Mixed into GcpProvider; uses its project setting and its storage and Secret Manager endpoints."""

    refresh_settings: ClassVar[tuple[str, ...]] = ("project",)
    # Spot interruptions per node-hour (gpuplan.planning.planner.SpotModel): Spot VMs have no maximum runtime
    # but are preempted more readily than AWS spot in the same traces and in SkyPilot's published measurements;
    # we take a mean time between preemptions of 12 h.
    spot_interruptions_per_hour: ClassVar[float | None] = 1 / 12
    # Start-up before any run is measured (gpuplan.calibration.startup): from the insert request to SSH on Debian
    # ~25 s for VMs up to 32 vCPUs over ~5,000 launches (R. Aboukhalil, "Move Fast and Break the Cloud", 2018) and
    # 41.5 s for a 2-vCPU VM (C. McAnlis, Google Cloud Performance Atlas, 2017): ~40 s boot + the same 60 s image
    # allowance as AWS.
    startup_seconds: ClassVar[float | None] = 100.0
    startup_why: ClassVar[str] = ("GCE boot 25-42 s (Aboukhalil 2018; McAnlis, Google Cloud 2017) + 60 s image pull "
                                  "and torch start (allowance)")
    _project: str | None

    def outputs_endpoint(self) -> str | None:
        raise NotImplementedError  # GcpProvider's

    def secrets_endpoint(self) -> str | None:
        raise NotImplementedError  # GcpProvider's

    def compute_endpoint(self) -> str | None:
        raise NotImplementedError  # GcpProvider's

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        from gpuplan.providers.gcp.attach import gcp_attach

        return gcp_attach(target, command, interactive=interactive, project=self._project)

    def ssh_host(self, target: AttachTarget) -> SshHost:
        from gpuplan.providers.gcp.attach import gcp_ssh_host

        return gcp_ssh_host(target, self._project)

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        from gpuplan.catalog.gcp_clients import default_project
        from gpuplan.catalog.refresh_gcp import SOURCE, fetch_gcp_offers

        project = self._project or default_project()
        if not project:
            raise UserError("no GCP project: pass --project or set GOOGLE_CLOUD_PROJECT")
        fetched = fetch_gcp_offers(project, regions, now)
        return PriceRefresh(offers=fetched.offers, source=SOURCE, notes=fetched.notes)

    account_needed_for: ClassVar[str] = "machine types and zones (Compute Engine machineTypes, acceleratorTypes)"
    # The Cloud Billing Catalog API answers an API key (no account on the project, no credentials):
    # https://cloud.google.com/billing/docs/how-to/get-pricing-information-api ("API key" authentication).
    public_source_needs: ClassVar[str] = "an API key in GPUPLAN_GCP_API_KEY"

    @classmethod
    def has_price_credentials(cls) -> bool:
        """Application Default Credentials from a file, or no API key to use instead (the metadata server of a
        GCE VM is not asked: that is a network call)."""
        from gpuplan.catalog.refresh_gcp_key import api_key

        config = Path(os.environ.get("CLOUDSDK_CONFIG") or Path.home() / ".config" / "gcloud")
        return bool(os.environ.get("GOOGLE_APPLICATION_CREDENTIALS")) or \
            (config / "application_default_credentials.json").exists() or api_key() is None

    def refresh_public_prices(self, regions: Sequence[str] | None, now: dt.datetime, previous: Sequence[Offer],
                              origin: str, progress: Callable[[str], None] | None = None) -> PriceRefresh:
        """The Billing Catalog with an API key (gpuplan.catalog.refresh_gcp_key), on `previous`'s machines."""
        from gpuplan.catalog import refresh_gcp_key

        key = refresh_gcp_key.api_key()
        if key is None:
            raise UserError("no GCP prices without an account or an API key: set GPUPLAN_GCP_API_KEY (the Billing "
                            "Catalog needs an API key or credentials), or run `gcloud auth application-default "
                            "login` and pass --project")
        offers, notes = refresh_gcp_key.fetch_with_key(key, regions, now, previous)
        return PriceRefresh(offers=offers, source=f"{refresh_gcp_key.SOURCE}; machine types from {origin}",
                            notes=notes)

    def boot_cloud(self) -> BootCloud:
        return gcp_boot_cloud(gcs_endpoint=self.outputs_endpoint(), secretmanager_endpoint=self.secrets_endpoint(),
                              compute_endpoint=self.compute_endpoint())
