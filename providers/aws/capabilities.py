"""What AWS offers beyond starting machines (gpuplan.providers.base capabilities): a way in (Session Manager,
ssh through it, or ssh to a /32-opened public address), live prices (the Pricing API and spot price history),
and the boot script's hooks (SSM secrets, S3 copies, the spot notice). Kept apart from provider.py, which is
the machines' lifecycle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, ClassVar

from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.attach_base import Attach, AttachTarget
from gpuplan.providers.aws.boot import aws_boot_cloud
from gpuplan.providers.base import Attachable, RefreshesPrices


class AwsCapabilities(Attachable, RefreshesPrices):
    """Mixed into AwsProvider; uses its regions, clients and `ssh_from` setting."""

    ways_in: ClassVar[tuple[str, ...]] = ("ssm", "ssh", "ip")
    regions: list[str]
    ssh_from: str | None

    def client(self, service: str, region: str, *, retries: int | None = None) -> Any:
        raise NotImplementedError  # AwsProvider's (AccountPlaces)

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        from gpuplan.providers.aws.attach import aws_attach

        return aws_attach(target, command, interactive=interactive, via=via, provider=self, prepare=prepare)

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        from gpuplan.catalog.refresh_aws import SOURCE, fetch_aws_offers

        result = fetch_aws_offers(lambda service, region: self.client(service, region), regions, now)
        return PriceRefresh(offers=result.offers, source=SOURCE, notes=result.notes)

    def boot_cloud(self) -> BootCloud:
        return aws_boot_cloud()

    def spot_price_source(self) -> str:
        return "aws: DescribeSpotPriceHistory"
