"""What AWS offers beyond starting machines (gpuplan.providers.base capabilities): a way in (Session Manager,
ssh through it, or ssh to a /32-opened public address), live prices (the Pricing API and spot price history),
and the boot script's hooks (SSM secrets, S3 copies, the spot notice). Kept apart from provider.py, which is
the machines' lifecycle."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from typing import Any, ClassVar

from gpuplan.catalog.offer import Offer
from gpuplan.catalog.price_refresh import PriceRefresh
from gpuplan.jobs.boot_cloud import BootCloud
from gpuplan.providers.attach_base import Attach, AttachTarget, SshHost
from gpuplan.providers.aws.boot import aws_boot_cloud
from gpuplan.providers.base import Attachable, PublishesPrices, RefreshesPrices


class AwsCapabilities(Attachable, RefreshesPrices, PublishesPrices):
    """Mixed into AwsProvider; uses its regions, clients and `ssh_from` setting."""

    ways_in: ClassVar[tuple[str, ...]] = ("ssm", "ssh", "ip")

    # Spot interruptions per node-hour (gpuplan.planning.planner.SpotModel). AWS publishes no rate for GPU spot
    # capacity: the Spot Instance Advisor buckets interruption frequency per month, and GPU families (p3/p4d/p5,
    # g5) sit mostly in the ">20%" bucket, i.e. roughly one interruption per 1-3 weeks per instance for steady
    # pools and much more often in scarce ones; "Can't Be Late" (Wu et al., NSDI 2024, AWS GPU spot traces) reports
    # spot GPU lifetimes of a few hours to about a day. We take a mean time between interruptions of 20 h.
    spot_interruptions_per_hour: ClassVar[float | None] = 1 / 20
    # Start-up before any run is measured (gpuplan.calibration.startup): EC2 RunInstances to a booted Linux
    # instance takes ~40 s with a standard AMI (Depot, "Making EC2 boot time 8x faster", 2024,
    # https://depot.dev/blog/faster-ec2-boot-time; Hao et al., "An Empirical Analysis of VM Startup Times in Public
    # IaaS Clouds", arXiv:2107.03467), plus pulling and unpacking the default job image (~3 GB compressed) and the
    # CUDA/torch start: 60 s is an allowance, not a published figure; the first measured run replaces it.
    startup_seconds: ClassVar[float | None] = 100.0
    startup_why: ClassVar[str] = ("EC2 boot ~40 s (depot.dev 2024; arXiv:2107.03467) + 60 s image pull and torch "
                                  "start (allowance)")
    # Cost Explorer groups the bill by the run tag (gpuplan.books.cloud_bill).
    bill_by_run_tag: ClassVar[bool] = True
    regions: list[str]
    ssh_from: str | None

    def client(self, service: str, region: str, *, retries: int | None = None) -> Any:
        raise NotImplementedError  # AwsProvider's (AccountPlaces)

    def attach(self, target: AttachTarget, command: Sequence[str] | None, *, interactive: bool,
               via: str | None = None, prepare: bool = True) -> Attach:
        from gpuplan.providers.aws.attach import aws_attach

        return aws_attach(target, command, interactive=interactive, via=via, provider=self, prepare=prepare)

    def ssh_host(self, target: AttachTarget) -> SshHost:
        from gpuplan.providers.aws.attach import aws_ssh_host

        return aws_ssh_host(target, self)

    def refresh_prices(self, regions: Sequence[str] | None, now: dt.datetime) -> PriceRefresh:
        from gpuplan.catalog.refresh_aws import SOURCE, fetch_aws_offers

        result = fetch_aws_offers(lambda service, region: self.client(service, region), regions, now)
        return PriceRefresh(offers=result.offers, source=SOURCE, notes=result.notes)

    account_needed_for: ClassVar[str] = ("zones and spot prices (EC2 DescribeInstanceTypeOfferings, "
                                         "DescribeSpotPriceHistory)")

    @classmethod
    def has_price_credentials(cls) -> bool:
        import boto3  # botocore's credential chain, as every AWS call uses (env, profile, SSO, instance role)

        return boto3.Session().get_credentials() is not None

    def refresh_public_prices(self, regions: Sequence[str] | None, now: dt.datetime, previous: Sequence[Offer],
                              origin: str, progress: Callable[[str], None] | None = None) -> PriceRefresh:
        """The Price List Bulk API's public files (gpuplan.catalog.refresh_aws_public)."""
        from gpuplan.catalog.refresh_aws_public import SOURCE, fetch_public_offers

        fetched = fetch_public_offers(regions, now, previous, origin, progress=progress)
        return PriceRefresh(offers=fetched.offers, source=f"{SOURCE}; zones and spot from {origin}",
                            notes=fetched.notes)

    def boot_cloud(self) -> BootCloud:
        return aws_boot_cloud()

    def spot_price_source(self) -> str:
        return "aws: DescribeSpotPriceHistory"
