"""`gpuplan catalog refresh`: live prices from a cloud's price APIs into the database."""

from __future__ import annotations

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, warn


@click.group()
def catalog() -> None:
    """The GPU price catalog (`gpuplan prices` reads it)."""


@catalog.command()
@click.option("--cloud", required=True, help="Which cloud to refresh: a provider with a price API (aws, gcp, azure).")
@click.option("--regions", "regions_text", metavar="REGION[,REGION]",
              help="Only these regions. The refreshed snapshot then IS that cloud's catalog (other regions drop "
                   "out of `gpuplan prices` until a full refresh).")
@click.option("--project", help="GCP only: the project for the machine/accelerator type lists (default: "
                                "GOOGLE_CLOUD_PROJECT).")
@click.option("--source", "source_choice", type=click.Choice(["auto", "api", "public"]), default="auto",
              show_default=True,
              help="api: the cloud's price APIs (needs credentials); public: what needs no account (AWS: the Price "
                   "List bulk files, on-demand, zones and spot kept from the previous snapshot; GCP: the Billing "
                   "Catalog with GPUPLAN_GCP_API_KEY; Azure: the Retail Prices API, always public); auto: api when "
                   "credentials are found, else public.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def refresh(app: AppContext, cloud: str, regions_text: str | None, project: str | None, source_choice: str,
            as_json: bool) -> None:
    """Fetch current on-demand and spot GPU prices and store them as the newest snapshot for that cloud.

    AWS: the Pricing API, EC2 spot price history and instance types; without credentials, the public Price List
    bulk files (GPUPLAN_AWS_PRICE_LIST_URL moves the endpoint). GCP: the Cloud Billing catalog with Compute
    machine and accelerator types (needs credentials and a project); with only GPUPLAN_GCP_API_KEY, the catalog's
    prices on the previous snapshot's machines. Azure: the public Retail Prices API, on-demand and Spot, no
    account needed (GPUPLAN_AZURE_PRICES_URL moves the endpoint). A refresh that fails keeps the previous prices;
    the snapshot keeps where each part came from (`gpuplan prices` shows it).
    """
    from gpuplan.catalog.gpu_names import compile_region_patterns
    from gpuplan.catalog.public_sources import PublicPrices
    from gpuplan.catalog.refresh import RefreshError
    from gpuplan.catalog.refresh import refresh as run_refresh
    from gpuplan.errors import UserError
    from gpuplan.providers.base import PublishesPrices, RefreshesPrices
    from gpuplan.providers.registry import UnknownProviderError, load_provider_class, make_provider, provider_names

    try:
        cls = load_provider_class(cloud)
    except UnknownProviderError as exc:
        raise UserError(f"--cloud {cloud}: {exc}") from exc
    if not issubclass(cls, RefreshesPrices):
        with_api = [n for n in provider_names() if issubclass(load_provider_class(n), RefreshesPrices)]
        raise UserError(f"--cloud {cloud}: the {cloud} provider has no price API to refresh from "
                        f"(one of: {', '.join(with_api)})")
    if project is not None and "project" not in cls.refresh_settings:
        # Only some clouds' type lists are per project (GCP); ignoring it would let `--cloud aws --project X`
        # look as if a project were in play.
        raise UserError(f"--project is not an option of --cloud {cloud}")
    regions = None
    if regions_text is not None:
        regions = list(compile_region_patterns(regions_text))
        if any(ch in r for r in regions for ch in "*?"):
            raise UserError("--regions takes region names, not patterns (e.g. us-east-1,us-west-2)")
    publisher = cls if issubclass(cls, PublishesPrices) else None
    if source_choice == "public" and publisher is None:
        raise UserError(f"--source public: the {cloud} provider names no price source that needs no account")
    public = publisher is not None and (source_choice == "public" or (source_choice == "auto" and (
        publisher.public_source_complete or not publisher.has_price_credentials())))
    if not as_json:
        if public and publisher is not None:
            why = "no credentials found: " if source_choice == "auto" and not publisher.public_source_complete \
                else ""
            note(f"{cloud}: {why}reading the prices it publishes for anyone; "
                 f"{publisher.account_needed_for} need an account")
        note(f"refreshing {cloud} prices{' in ' + ', '.join(regions) if regions else ''} ...")
    try:
        provider = make_provider(cloud, **({"project": project} if project is not None else {}))
        if public:
            assert isinstance(provider, PublishesPrices)
            report = run_refresh(app.store, PublicPrices(provider, cloud, app.store, None if as_json else note),
                                 regions)
        else:
            assert isinstance(provider, RefreshesPrices)
            report = run_refresh(app.store, provider, regions)
    except RefreshError as exc:
        missing = _missing_credentials(exc.__cause__)
        if missing:
            # No credentials is the user's setup, not a failed refresh: exit 2 and say what to set.
            raise UserError(f"no {cloud} credentials ({missing}): {cls.credential_hint}; the previous prices "
                            "are kept") from exc
        raise
    for line in report.notes:
        warn(line)
    if as_json:
        emit_json({
            "cloud": report.cloud, "snapshot_id": report.snapshot_id, "offer_count": report.offer_count,
            "regions": report.regions, "gpus": report.gpus, "source": report.source,
            "fetched_at": report.fetched_at, "seconds": report.seconds,
        })
        return
    click.echo(f"{cloud}: stored {report.offer_count} offers ({', '.join(report.gpus)}) in "
               f"{len(report.regions)} regions as snapshot #{report.snapshot_id} in {report.seconds:.1f} s")


# What each SDK raises when it finds no credentials at all (by name: the SDKs stay unimported at start-up).
# botocore: https://boto3.amazonaws.com/v1/documentation/api/latest/guide/credentials.html
# google-auth: https://google-auth.readthedocs.io/en/latest/reference/google.auth.html#google.auth.default
NO_CREDENTIAL_ERRORS = ("NoCredentialsError", "PartialCredentialsError", "DefaultCredentialsError")


def _missing_credentials(cause: BaseException | None) -> str | None:
    """The SDK's error name when `cause` (or what caused it) says there are no credentials, else None."""
    seen = 0
    while cause is not None and seen < 10:
        if type(cause).__name__ in NO_CREDENTIAL_ERRORS:
            return type(cause).__name__
        cause, seen = cause.__cause__ or cause.__context__, seen + 1
    return None
