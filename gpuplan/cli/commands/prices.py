"""`gpuplan prices`: compare GPU offers across clouds and regions (fast path: stdlib + click + rich only)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal

import click

from gpuplan.catalog.catalog import Catalog, CatalogSource
from gpuplan.catalog.gpu_names import (
    compile_region_patterns,
    not_rented_message,
    rented,
    resolve_clouds,
    resolve_gpus,
)
from gpuplan.catalog.offer import Offer
from gpuplan.catalog.tflops import peak_tflops_table
from gpuplan.catalog.view import SORT_KEYS, PriceRow, cheapest_per_region, sort_rows
from gpuplan.catalog.zones import AVAILABILITY_ZONE, ZONE_CHOICES
from gpuplan.cli import complete
from gpuplan.cli.commands.params import bounded, bounded_int
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, warn


@click.command()
@click.option("--gpu", "gpu_text", metavar="NAME[,NAME]", shell_complete=complete.gpu_names,
              help="GPU name(s), e.g. H100, L4,T4; A100 is the 40 GB part (as the clouds name it), "
                   "A100-80GB the other.")
@click.option("--min-gpus", type=bounded("gpus_per_instance"), help="At least this many GPUs per instance.")
@click.option("--min-gpu-memory", type=bounded("gpu_memory_gb"), metavar="GB",
              help="At least this much memory per GPU, in GB as the vendor states it (L4 24, L40S 48).")
@click.option("--cloud", "cloud_text", metavar="CLOUD[,CLOUD]",
              help="The clouds to compare, e.g. aws,azure (default: every cloud the catalog prices).")
@click.option("--region", "region_text", metavar="PATTERN[,PATTERN]", help="Region glob(s), e.g. 'us-*'.")
@click.option("--spot", is_flag=True, help="Spot prices (offers without a spot price are left out).")
@click.option("--max-price", type=bounded("usd_per_hour"), metavar="USD", help="At most this much per instance-hour.")
@click.option("--sort", "sort_by", type=click.Choice(SORT_KEYS), default="price", show_default=True,
              help="price-per-tflop: $/h per peak dense BF16 TFLOP/s (the table shows $/h per PFLOP/s); "
                   "GPUs without the figure go last.")
@click.option("--zones", "zone_choice", type=click.Choice(ZONE_CHOICES), default="standard", show_default=True,
              help="standard: Availability Zones only (what plan and launch use unasked); local: only AWS Local and "
                   "Wavelength Zones (they need opting in and a subnet); all: both, each row labelled.")
@click.option("--limit", type=bounded_int("rows"), default=20, show_default=True, help="Rows to show (0 = all).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output: a list of rows.")
@pass_app
def prices(app: AppContext, gpu_text: str | None, min_gpus: float | None, min_gpu_memory: float | None,
           cloud_text: str | None, region_text: str | None, spot: bool, max_price: float | None, sort_by: str,
           zone_choice: str, limit: int, as_json: bool) -> None:
    """GPU offers, one row per instance type, region and zone type at its cheapest zone, cheapest first.

    Prices come from the newest source per cloud: a `gpuplan catalog refresh`, else the snapshot shipped
    with gpuplan. USD per instance-hour; GCP prices include the attached GPUs. Spot prices are per zone on AWS
    (the zone column names it: a zone id such as use1-az6, the same in every account) and per region on GCP.
    AWS Local Zones (use1-atl2-az1) are left out unless --zones local or all.
    """
    from gpuplan.providers.registry import catalog_clouds

    known = catalog_clouds()
    gpus = resolve_gpus(gpu_text) if gpu_text is not None else None
    if gpus is not None and not any(rented(g) for g in gpus):
        note(not_rented_message(set(gpus), known))
        if as_json:
            emit_json([])
        return
    if gpus is not None and not all(rented(g) for g in gpus):
        note(not_rented_message({g for g in gpus if not rented(g)}, known))
    clouds = resolve_clouds(cloud_text, known) if cloud_text is not None else known
    regions = compile_region_patterns(region_text) if region_text is not None else None

    catalog = Catalog.load(app.db_url, clouds)
    catalog.check_regions(regions)
    wanted = frozenset(g for g in gpus if rented(g)) if gpus is not None else None

    def select(zones: str) -> list[Offer]:
        return catalog.select(gpus=wanted, spot=spot, min_gpus=min_gpus, min_gpu_memory_gb=min_gpu_memory,
                              regions=regions, max_price=max_price, zones=zones)

    offers = select(zone_choice)
    rows = sort_rows(cheapest_per_region(offers, spot=spot, peak_tflops=peak_tflops_table()), sort_by)
    if zone_choice == "standard" and not as_json:
        _note_left_out(select("local"), spot)
    shown = rows[:limit] if limit else rows

    now = dt.datetime.now(dt.timezone.utc)
    if not as_json:  # where the prices come from: one line for every cloud
        note("prices: " + "; ".join(_describe(source, now) for source in catalog.sources.values()))
    stale = [source for source in catalog.sources.values() if source.is_stale(now)]
    if stale:  # one warning per command, whatever the number of clouds
        oldest = max(stale, key=lambda source: source.age(now))
        warn(f"{', '.join(s.cloud for s in stale)} prices are up to {_age(oldest, now)} old (more than 7 days); "
             f"refresh: {' / '.join(f'gpuplan catalog refresh --cloud {s.cloud}' for s in stale)}"
             + _public_hint([s.cloud for s in stale]))
    if as_json:
        emit_json([row.as_json() for row in shown])
        return
    if not rows:
        note("no offers match these filters")
        return
    _print(shown, spot)
    if len(shown) < len(rows):
        note(f"{len(shown)} of {len(rows)} rows shown; --limit 0 shows all")


def _public_hint(clouds: list[str]) -> str:
    """How to refresh without an account, for the clouds whose provider publishes prices
    (gpuplan.providers.base.PublishesPrices), with what each public source still needs (GCP: an API key):
    ` (aws without an account: --source public; gcp: --source public with an API key in GPUPLAN_GCP_API_KEY)`."""
    from gpuplan.providers.base import PublishesPrices
    from gpuplan.providers.registry import UnknownProviderError, load_provider_class

    free: list[str] = []
    needing: list[str] = []
    for cloud in clouds:
        try:
            cls = load_provider_class(cloud)
        except UnknownProviderError:
            continue
        if not issubclass(cls, PublishesPrices) or cls.public_source_complete:
            continue  # no public source, or it is the whole refresh (Azure): no flag to name
        if cls.public_source_needs:
            needing.append(f"{cloud}: --source public with {cls.public_source_needs}")
        else:
            free.append(cloud)
    parts = ([f"{', '.join(free)} without an account: --source public"] if free else []) + needing
    return f" ({'; '.join(parts)})" if parts else ""


def _age(source: CatalogSource, now: dt.datetime) -> str:
    seconds = max(source.age(now).total_seconds(), 0)
    if seconds >= 2 * 86400:
        return f"{int(seconds // 86400)} days"
    if seconds >= 2 * 3600:
        return f"{int(seconds // 3600)} hours"
    return f"{int(seconds // 60)} minutes"


def _describe(source: CatalogSource, now: dt.datetime) -> str:
    when = source.fetched_at.strftime("%Y-%m-%d %H:%M UTC")
    if source.shipped:
        return f"{source.cloud} shipped snapshot of about {when[:10]} ({_age(source, now)} old)"
    return (f"{source.cloud} refreshed {when} ({_age(source, now)} old, snapshot #{source.snapshot_id}: "
            f"{source.source})")


def _money(value: Decimal | None, places: int = 2) -> str:
    return "" if value is None else f"{value:,.{places}f}"


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _zone_label(row: PriceRow) -> str:
    """The zone in full (`use1-az6`, `us-central1-a`), and its type when it is not an Availability Zone."""
    zone = row.offer.zone or ""
    kind = row.offer.zone_type
    return zone if kind == AVAILABILITY_ZONE else f"{zone} ({kind})"


def _note_left_out(local: list[Offer], spot: bool) -> None:
    """Say that Local/Wavelength Zone offers exist and were left out, with the cheapest one, labelled."""
    priced = [o for o in local if o.price(spot) is not None]
    if not priced:
        return
    best = min(priced, key=lambda o: (o.price(spot), o.zone or ""))
    note(f"{len(priced)} offer(s) in AWS Local/Wavelength Zones left out (need opting in and a subnet), cheapest "
         f"{best.instance_type} in {best.zone} ({best.zone_type} of {best.region}) at ${best.price(spot):,.3f}/h; "
         "--zones all shows them")


def _print(rows: list[PriceRow], spot: bool) -> None:
    price_label = "spot $/h" if spot else "$/h"
    columns = ["cloud", "region", "zone", "instance type", "gpus", "GB/gpu", "vCPUs", price_label, "$/gpu-h",
               "$/PFLOP-h"]
    body = [
        (r.offer.cloud, r.offer.region, _zone_label(r), r.offer.instance_type,
         f"{r.offer.gpu_count:.3g}x {r.offer.gpu}", _num(r.offer.gpu_memory_gb), _num(r.offer.vcpus),
         _money(r.price, 3), _money(r.price_per_gpu, 3),
         _money(None if r.price_per_tflop is None else r.price_per_tflop * 1000, 2))
        for r in rows
    ]
    _plain_table(columns, body, right_from=5)


def _plain_table(columns: list[str], rows: Sequence[tuple[str | None, ...]], right_from: int) -> None:
    """An aligned plain-text table. Not rich: rendering 20 rows with rich costs ~40 ms of CPU (plus its
    import), a sixth of the 300 ms this command may take; plain columns also paste cleanly into issues."""
    cells = [[("" if c is None else str(c)) for c in row] for row in rows]
    widths = [max(len(col), *(len(r[i]) for r in cells)) for i, col in enumerate(columns)]

    def line(values: list[str]) -> str:
        return "  ".join(v.rjust(w) if i >= right_from else v.ljust(w)
                         for i, (v, w) in enumerate(zip(values, widths, strict=True))).rstrip()

    out = [line(list(columns)), "  ".join("-" * w for w in widths)]
    out.extend(line(r) for r in cells)
    click.echo("\n".join(out))
