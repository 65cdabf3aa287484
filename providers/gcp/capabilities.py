"""What GCP offers beyond starting machines (gpuplan.providers.base capabilities): a way in (`gcloud compute ssh`
through IAP), live prices (the Cloud Billing catalog with the Compute type lists), and the boot script's hooks
(Secret Manager, GCS, guest attributes, the preemption notice). Kept apart from provider.py, which is the
machines' lifecycle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import ClassVar

from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.errors import UserError
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.attach_base import Attach, AttachTarget
from gpuplan.providers.base import Attachable, RefreshesPrices
from gpuplan.providers.gcp.boot import gcp_boot_cloud


class GcpCapabilities(Attachable, RefreshesPrices):
    """Mixed into GcpProvider; uses its project setting and its storage and Secret Manager endpoints."""

    refresh_settings: ClassVar[tuple[str, ...]] = ("project",)
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

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        from gpuplan.catalog.gcp_clients import default_project
        from gpuplan.catalog.refresh_gcp import SOURCE, fetch_gcp_offers

        project = self._project or default_project()
        if not project:
            raise UserError("no GCP project: pass --project or set GOOGLE_CLOUD_PROJECT")
        fetched = fetch_gcp_offers(project, regions, now)
        return PriceRefresh(offers=fetched.offers, source=SOURCE, notes=fetched.notes)

    def boot_cloud(self) -> BootCloud:
        return gcp_boot_cloud(gcs_endpoint=self.outputs_endpoint(), secretmanager_endpoint=self.secrets_endpoint(),
                              compute_endpoint=self.compute_endpoint())
