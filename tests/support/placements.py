"""Placements spread over their region's zones, as the failover tests write their expectations."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Sequence

from gpuplan.launching.failover import Placement


def expand_zones(placements: Iterable[Placement], zones_of: Callable[[Placement], Sequence[str]]) -> list[Placement]:
    """Placements without a zone become one placement per zone of their region ([] from `zones_of`: the region as
    a whole); order is kept and duplicates dropped."""
    out: list[Placement] = []
    seen: set[Placement] = set()
    for p in placements:
        for zone in [p.zone] if p.zone else list(zones_of(p)) or [None]:
            candidate = dataclasses.replace(p, zone=zone)
            if candidate not in seen:
                seen.add(candidate)
                out.append(candidate)
    return out
