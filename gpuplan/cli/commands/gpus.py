"""`gpuplan gpus [NAME]`: what gpuplan knows about each GPU, and where it is rented and for how much.

The spec sheet comes from the GPU table (gpuplan.hardware, every row citing its datasheet); the clouds and the
cheapest $/GPU-hour from the price catalog (the newest refresh, else the shipped snapshot), so a user can pick a
`--gpu` without reading an error message's list of names.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import click

from gpuplan.cli import complete
from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, print_table
from gpuplan.errors import UserError


@dataclass(frozen=True)
class Cheapest:
    """The lowest price per GPU-hour of one GPU in one market, and the offer that has it."""

    usd_per_gpu_hour: Decimal
    cloud: str
    region: str
    instance_type: str
    gpus_per_instance: float


@dataclass(frozen=True)
class GpuRow:
    """One GPU: its spec sheet plus the catalog's view of it (clouds empty when no cloud rents it)."""

    name: str
    vendor: str
    generation: str
    form_factor: str
    memory_gb: float
    memory_bandwidth_gbps: float | None
    tflops: dict[str, float | None]
    int8_tops: float | None
    nvlink_gbps: float | None
    tdp_watts: float | None
    aliases: tuple[str, ...]
    clouds: tuple[str, ...]
    cheapest_on_demand: Cheapest | None
    cheapest_spot: Cheapest | None
    source: str


def gpu_rows(db_url: str | None, only: str | None = None) -> list[GpuRow]:
    """Every GPU of the table (or just `only`, any of its names) with its clouds and cheapest prices."""
    from gpuplan.catalog import Catalog
    from gpuplan.hardware.gpus import PRECISIONS, all_gpus, resolve_gpu

    if only is not None:
        try:
            specs = [resolve_gpu(only)]
        except ValueError as exc:
            raise UserError(str(exc)) from exc
    else:
        specs = all_gpus()
    from gpuplan.providers.registry import catalog_clouds

    catalog = Catalog.load(db_url, catalog_clouds())
    by_gpu: dict[str, list[Any]] = {}
    for offer in catalog.select():  # standard zones: what a launch uses without naming a Local Zone
        by_gpu.setdefault(offer.gpu, []).append(offer)
    rows = []
    for spec in specs:
        offers = by_gpu.get(spec.name, [])
        rows.append(GpuRow(
            name=spec.name, vendor=spec.vendor, generation=spec.generation, form_factor=spec.form_factor,
            memory_gb=spec.memory_gb, memory_bandwidth_gbps=spec.memory_bandwidth_gbps,
            tflops={p: spec.peak_tflops(p) for p in PRECISIONS}, int8_tops=spec.int8_tops,
            nvlink_gbps=spec.nvlink_gbps, tdp_watts=spec.tdp_watts, aliases=spec.aliases,
            clouds=tuple(sorted({o.cloud for o in offers})),
            cheapest_on_demand=_cheapest(offers, spot=False), cheapest_spot=_cheapest(offers, spot=True),
            source=spec.source,
        ))
    return rows


def _cheapest(offers: list[Any], *, spot: bool) -> Cheapest | None:
    priced = [(o.price_per_gpu(spot), o) for o in offers if o.price_per_gpu(spot) is not None]
    if not priced:
        return None
    price, offer = min(priced, key=lambda pair: (pair[0], pair[1].cloud, pair[1].region, pair[1].instance_type))
    return Cheapest(price.quantize(Decimal("0.0001")), offer.cloud, offer.region, offer.instance_type,
                    offer.gpu_count)


@click.command("gpus")
@click.argument("name", required=False, shell_complete=complete.gpu_names)
@click.option("--rented", is_flag=True, help="Only GPUs some cloud in the price catalog rents.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable: a list of GPUs with every figure.")
@pass_app
def gpus(app: AppContext, name: str | None, rented: bool, as_json: bool) -> None:
    """List the GPUs gpuplan knows: memory, bandwidth, dense TFLOP/s per precision, and the clouds that rent
    them with the cheapest $/GPU-hour (on-demand and spot) in the price catalog.

    With NAME (any spelling: H100, h100-sxm, A100 = the 40 GB part), that GPU's whole sheet.
    """
    rows = gpu_rows(app.db_url, name)
    if rented:
        rows = [r for r in rows if r.clouds]
    if as_json:
        emit_json(rows[0] if name is not None else rows)
        return
    if name is not None:
        _print_one(rows[0])
        return
    print_table(
        ["GPU", "memory", "GB/s", "FP32", "TF32", "BF16", "FP16", "FP8", "clouds", "$/GPU-h", "spot $/GPU-h"],
        [[r.name, f"{r.memory_gb:g} GB", _num(r.memory_bandwidth_gbps), *(_num(r.tflops[p]) for p in r.tflops),
          ",".join(r.clouds) or "-", _price(r.cheapest_on_demand), _price(r.cheapest_spot)] for r in rows],
        justify_right=["memory", "GB/s", "FP32", "TF32", "BF16", "FP16", "FP8", "$/GPU-h", "spot $/GPU-h"],
    )
    note("TFLOP/s are dense peaks (no sparsity); prices are the catalog's cheapest per GPU-hour "
         "(`gpuplan gpus NAME` says where, `gpuplan prices --gpu NAME` lists every offer)")


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.6g}"


def _price(cheapest: Cheapest | None) -> str:
    return "-" if cheapest is None else f"{cheapest.usd_per_gpu_hour:,.2f}"


def _print_one(r: GpuRow) -> None:
    echo = click.echo
    echo(f"{r.name}  ({r.vendor} {r.generation}, {r.form_factor})")
    if r.aliases:
        echo(f"  also called  {', '.join(r.aliases)}")
    bandwidth = f", {r.memory_bandwidth_gbps:,.0f} GB/s" if r.memory_bandwidth_gbps else ""
    echo(f"  memory       {r.memory_gb:g} GB{bandwidth}")
    echo("  TFLOP/s      " + ", ".join(f"{p} {_num(v)}" for p, v in r.tflops.items()) + " (dense)")
    extras = [f"int8 {_num(r.int8_tops)} TOPS" if r.int8_tops else "",
              f"NVLink {r.nvlink_gbps:g} GB/s" if r.nvlink_gbps else "PCIe only",
              f"{r.tdp_watts:g} W" if r.tdp_watts else ""]
    echo(f"  also         {', '.join(e for e in extras if e)}")
    if not r.clouds:
        echo("  rented by    none of the clouds in the price catalog")
    else:
        echo(f"  rented by    {', '.join(r.clouds)}")
        for label, c in (("on-demand", r.cheapest_on_demand), ("spot", r.cheapest_spot)):
            if c is not None:
                echo(f"  {label:<12} from ${c.usd_per_gpu_hour:,.2f}/GPU-h: {c.cloud} {c.instance_type} "
                     f"({c.gpus_per_instance:g} GPU) in {c.region}")
    if r.source:
        echo(f"  source       {r.source}")
