"""Compare what the clouds run with what the books say: the "no machine gpuplan does not know about" check.

Two kinds of disagreement:
- **orphan**: a live machine carrying gpuplan's run tag that the database does not consider live (no open
  instance row of a live run). A CLI killed between RunInstances and its database commit, a teardown that
  crashed, a run someone deleted: all leave orphans, and orphans cost money. `--terminate` ends them.
- **missing**: an open instance row (no `terminated_at`) whose machine the provider reports gone. The books
  still accrue cost for it until the watch loop (or a human) closes it.

Provider-agnostic: every provider that can list its tagged machines takes part; one that cannot (not
configured, no credentials) is reported as skipped rather than failing the whole check.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplan.providers.base import Instance, InstanceState, Provider, ProviderError

ORPHAN = "orphan"
MISSING = "missing"


@dataclass(frozen=True)
class Finding:
    """One disagreement between a cloud and the database (the JSON row of `gpuplan reconcile`)."""

    cloud: str
    region: str | None
    instance_id: str
    run_id: str | None
    state: str
    kind: str
    provider: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"cloud": self.cloud, "region": self.region, "instance_id": self.instance_id,
                "run_id": self.run_id, "state": self.state, "kind": self.kind}


@dataclass(frozen=True)
class OpenRow:
    """An instance row with no `terminated_at`; `run_live` says whether its run is still live (not final).

    The database considers a machine live only if both hold: an open row of a finished run means a teardown
    that did not complete, so a machine still running behind it is an orphan.
    """

    provider: str
    instance_id: str
    run_id: str
    region: str | None
    run_live: bool = True


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # provider -> why it could not be checked
    checked: list[str] = field(default_factory=list)

    @property
    def orphans(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == ORPHAN]

    @property
    def missing(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == MISSING]


def compare(provider: Provider, open_rows: Sequence[OpenRow]) -> list[Finding]:
    """Findings for one provider: its tagged live machines vs the database's open rows for it."""
    tagged = [i for i in provider.list_tagged() if i.state not in InstanceState.GONE]
    known = {r.instance_id for r in open_rows if r.run_live}
    findings = [_finding(provider, inst, ORPHAN) for inst in tagged if inst.instance_id not in known]
    tagged_ids = {i.instance_id for i in tagged}
    unseen = [r for r in open_rows if r.instance_id not in tagged_ids]
    if unseen:
        described = {i.instance_id: i for i in provider.describe([r.instance_id for r in unseen])}
        for row in unseen:
            inst = described.get(row.instance_id)
            if inst is None or inst.state in InstanceState.GONE:
                findings.append(Finding(cloud=provider.cloud, region=(inst.region if inst else None) or row.region,
                                        instance_id=row.instance_id, run_id=row.run_id,
                                        state=inst.state if inst else InstanceState.TERMINATED, kind=MISSING,
                                        provider=provider.name))
    return findings


def _finding(provider: Provider, inst: Instance, kind: str) -> Finding:
    return Finding(cloud=inst.cloud or provider.cloud, region=inst.region, instance_id=inst.instance_id,
                   run_id=inst.run_id, state=inst.state, kind=kind, provider=provider.name)


def configure_provider(name: str, regions: Sequence[str]) -> Provider:
    """Build a provider for reconcile, handing it the regions to search if its constructor takes `regions`."""
    from gpuplan.providers.base import load_provider_class

    cls = load_provider_class(name)
    try:
        accepts = "regions" in inspect.signature(cls).parameters
    except (TypeError, ValueError):
        accepts = False
    from gpuplan.config import make_provider

    if accepts and regions:
        return make_provider(name, regions=list(regions))
    return make_provider(name)


def reconcile(
    provider_names: Iterable[str],
    open_rows: Sequence[OpenRow],
    regions_of: Callable[[str], Sequence[str]],
    *,
    build: Callable[[str, Sequence[str]], Provider] = configure_provider,
) -> Report:
    """Check each named provider; a provider that cannot be built or listed is skipped with its reason."""
    report = Report()
    for name in provider_names:
        try:
            provider = build(name, regions_of(name))
            rows = [r for r in open_rows if r.provider == name]
            report.findings.extend(compare(provider, rows))
            report.checked.append(name)
        except (ProviderError, NotImplementedError) as exc:
            report.skipped[name] = str(exc)
    return report


def terminate_orphans(findings: Sequence[Finding], regions_of: Callable[[str], Sequence[str]], *,
                      build: Callable[[str, Sequence[str]], Provider] = configure_provider) -> list[str]:
    """End every orphan (grouped by provider); returns the ids asked to terminate."""
    ended: list[str] = []
    by_provider: dict[str, list[Finding]] = {}
    for f in findings:
        if f.kind == ORPHAN:
            by_provider.setdefault(f.provider or f.cloud, []).append(f)
    for name, items in by_provider.items():
        regions = sorted({*regions_of(name), *(f.region for f in items if f.region)})
        provider = build(name, regions)
        ids = [f.instance_id for f in items]
        provider.terminate(ids)
        ended.extend(ids)
    return ended
