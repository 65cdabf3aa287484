"""`gpuplan catalog refresh`: fetch one cloud's live prices, then store them as one complete snapshot.

Everything is fetched before anything is written, and the snapshot is written in one transaction and marked
complete last (gpuplan.catalog.stored.save_snapshot): a refresh that fails halfway, or returns nothing, leaves
the previous prices in force.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from gpuplan.catalog.stored import save_snapshot
from gpuplan.errors import GpuplanError, UserError

if TYPE_CHECKING:
    from gpuplan.catalog.refresh_aws import ClientFactory
    from gpuplan.store.db import Store


class RefreshError(GpuplanError):
    """A refresh could not complete; the message says the previous prices are kept."""


@dataclass
class RefreshReport:
    cloud: str
    snapshot_id: int
    offer_count: int
    regions: list[str]
    gpus: list[str]
    source: str
    fetched_at: dt.datetime
    seconds: float
    notes: list[str] = field(default_factory=list)


def refresh(store: Store, cloud: str, regions: Sequence[str] | None = None, *, project: str | None = None,
            aws_factory: ClientFactory | None = None, now: dt.datetime | None = None, public: bool = False,
            progress: Callable[[str], None] | None = None) -> RefreshReport:
    """Fetch `cloud`'s offers (optionally only `regions`) and store them; raise RefreshError on any failure.

    `public`: from the cloud's price files that need no account (gpuplan.catalog.public_sources)."""
    started = time.monotonic()
    now = now or dt.datetime.now(dt.timezone.utc)
    try:
        if public:
            from gpuplan.catalog.public_sources import fetch_public

            offers, notes, source = fetch_public(store, cloud, regions, now, progress)
        elif cloud == "aws":
            from gpuplan.catalog.refresh_aws import SOURCE, boto3_client_factory, fetch_aws_offers

            result = fetch_aws_offers(aws_factory or boto3_client_factory(), regions, now)
            offers, notes, source = result.offers, result.notes, SOURCE
        elif cloud == "gcp":
            from gpuplan.catalog.gcp_clients import default_project
            from gpuplan.catalog.refresh_gcp import SOURCE, fetch_gcp_offers

            project = project or default_project()
            if not project:
                raise UserError("no GCP project: pass --project or set GOOGLE_CLOUD_PROJECT")
            fetched = fetch_gcp_offers(project, regions, now)
            offers, notes, source = fetched.offers, fetched.notes, SOURCE
        else:
            raise UserError(f"unknown cloud {cloud!r}; known: aws, gcp")
    except GpuplanError:
        raise
    except Exception as exc:
        raise RefreshError(f"{cloud} price refresh failed ({type(exc).__name__}: {_one_line(exc)}); "
                           "the previous prices are kept") from exc
    if not offers:
        where = f" in {', '.join(regions)}" if regions else ""
        raise RefreshError(f"{cloud} price refresh found no GPU offers{where}; the previous prices are kept")
    if regions:
        source = f"{source} regions={','.join(sorted(regions))}"
    stored = save_snapshot(store, cloud, source, offers, now)
    return RefreshReport(
        cloud=cloud, snapshot_id=stored.id, offer_count=stored.offer_count,
        regions=sorted({o.region for o in offers}), gpus=sorted({o.gpu for o in offers}), source=stored.source,
        fetched_at=now, seconds=round(time.monotonic() - started, 3), notes=notes,
    )


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else ""
