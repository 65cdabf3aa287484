"""Try placements in order until one has capacity: zones of a region, then the next region, then the next offer.

Provider-agnostic: it only calls `Provider.launch` and reads the typed errors of gpuplan.providers.base, so the
AWS, GCP and any third-party provider share it. A placement error (capacity, quota, a zone or region the account
cannot use, a request that zone, region or instance type refuses) moves on to the next placement and blocks the
error's scope (gpuplan.providers.base.Scope): the zone, the region, the instance family's quota in the region and
market, so later placements it covers are skipped without a call — like SkyPilot's FailoverCloudErrorHandlerV2,
which blocks the failing zones (sky/backends/cloud_vm_ray_backend.py), but finer: quotas are per family and region
(https://aws.amazon.com/ec2/faqs/ "each defines the amount of capacity you can use of a given instance family").
An auth error stops at once (no other zone accepts bad credentials); anything else stops too, because retrying an
unknown failure elsewhere can multiply machines. Every attempt is handed to a
callback so orchestration writes it as an Event row, and giving up raises `FailoverExhausted` carrying the
attempts, which the CLI prints as a table of what was tried and why it failed.

Idempotency: before the first attempt on a provider, the run's live machines are looked up by tag
(`list_tagged(run_id)`); if a crashed earlier attempt already started them, they are returned, never doubled. A
look-up one region refuses (a PlacementError: an opt-in region refusing the credentials) blocks that region; the
provider searched every other region.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from gpuplan.providers.base import (
    AuthError,
    CapacityError,
    Instance,
    InstanceState,
    LaunchRequest,
    PlacementError,
    Provider,
    ProviderError,
    QuotaError,
    Scope,
)
from gpuplan.runs.payloads import AttemptData


@dataclass(frozen=True)
class Placement:
    """Where to try: a provider, a region, optionally a zone, and the offer's instance type and price."""

    provider: str
    region: str | None = None
    zone: str | None = None
    instance_type: str | None = None
    price_per_hour: Decimal | None = None
    spot: bool | None = None

    @property
    def where(self) -> str:
        return self.zone or self.region or "(default)"


@dataclass
class Attempt:
    """One launch attempt and its outcome (launched, existing, capacity, quota, blocked, skipped, auth, error);
    `blocked` says which placements the failure ruled out (a Scope described), or which earlier one this skip
    follows."""

    number: int
    placement: Placement
    outcome: str
    code: str | None = None
    message: str = ""
    seconds: float = 0.0
    instance_ids: list[str] = field(default_factory=list)
    blocked: str | None = None

    def as_payload(self, generation: int | None = None) -> AttemptData:
        """The `launch_attempt` event's data (`generation`: a spot relaunch's)."""
        p = self.placement
        return AttemptData(attempt=self.number, provider=p.provider, region=p.region, zone=p.zone,
                           instance_type=p.instance_type, spot=p.spot, outcome=self.outcome, code=self.code,
                           why=self.message, seconds=round(self.seconds, 3), instance_ids=tuple(self.instance_ids),
                           blocked=self.blocked, generation=generation)


@dataclass
class FailoverResult:
    """The machines that started, where, and everything tried on the way."""

    instances: list[Instance]
    placement: Placement
    attempts: list[Attempt]
    request: LaunchRequest


class FailoverExhausted(ProviderError):
    """Every placement was tried and none had capacity (or quota); `attempts` says what happened where."""

    def __init__(self, message: str, attempts: Sequence[Attempt]) -> None:
        last = attempts[-1] if attempts else None
        super().__init__(message, code=last.code if last else None)
        self.attempts = list(attempts)

    @property
    def detail(self) -> str:
        """A plain-text table of the attempts (the CLI prints it under the one-line error)."""
        return format_attempts(self.attempts)


def format_attempts(attempts: Iterable[Attempt]) -> str:
    """Attempts as an aligned text table: #, provider, where, type, outcome, code, blocks (what the failure
    ruled out, or which earlier block a skip follows), why."""
    rows = [("#", "provider", "where", "type", "outcome", "code", "blocks", "why")]
    for a in attempts:
        why = a.message.replace("\n", " ")
        prefix = f"{a.code} in {a.placement.where}: "
        if a.code and why.startswith(prefix):  # the code and the place have their own columns
            why = why[len(prefix):]
        if a.outcome == "skipped":
            why = ""  # the blocks column says it all
        rows.append((str(a.number), a.placement.provider, a.placement.where, a.placement.instance_type or "",
                     a.outcome, a.code or "", a.blocked or "", why[:100]))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "  " + r[-1] for r in rows]
    return "\n".join(line.rstrip() for line in lines)


AttemptCallback = Callable[[Attempt], None]
REFUSED = frozenset({"capacity", "quota", "blocked"})  # outcomes of a placement that refused the launch


def provider_zones(provider: Provider, region: str | None) -> list[str]:
    """The zones a provider offers in a region, if it can list them (AWS and GCP do); [] otherwise."""
    return [] if region is None else list(provider.zones(region))


def request_for(request: LaunchRequest, placement: Placement, attempt: int | None = None) -> LaunchRequest:
    """The request for one placement: its region and zone, the offer's type, price and market, and which
    attempt of the launch it is (`options["attempt"]`)."""
    changes: dict[str, Any] = {"region": placement.region, "zones": (placement.zone,) if placement.zone else ()}
    if attempt is not None:
        changes["options"] = {**request.options, "attempt": attempt}
    if placement.instance_type:
        changes["instance_type"] = placement.instance_type
    if placement.price_per_hour is not None:
        changes["price_per_hour"] = placement.price_per_hour
    if placement.spot is not None:
        changes["spot"] = placement.spot
    return dataclasses.replace(request, **changes)


def _live(instances: Iterable[Instance]) -> list[Instance]:
    return [i for i in instances if i.state not in InstanceState.GONE]


def default_scope(exc: PlacementError, placement: Placement, provider: Provider) -> Scope:
    """The placements an error rules out when the provider did not say (base.py's defaults per error class)."""
    if exc.scope is not None:
        return exc.scope
    region = exc.region or placement.region
    if isinstance(exc, QuotaError):
        return Scope(region=region, family=provider.instance_family(placement.instance_type), spot=placement.spot)
    return Scope(region=region, zone=exc.zone or placement.zone, instance_type=placement.instance_type,
                 spot=placement.spot)


def _outcome(exc: PlacementError) -> str:
    return "quota" if isinstance(exc, QuotaError) else "capacity" if isinstance(exc, CapacityError) else "blocked"


@dataclass
class _Blocks:
    """The scopes ruled out so far, per provider; a placement any of them covers is skipped (and recorded)."""

    scopes: list[tuple[str, Scope]] = field(default_factory=list)

    def add(self, provider: str, scope: Scope) -> None:
        self.scopes.append((provider, scope))

    def covering(self, placement: Placement, provider: Provider, spot: bool) -> Scope | None:
        """The first scope covering `placement` (`spot`: its market, the request's when the placement says none)."""
        family = provider.instance_family(placement.instance_type)
        market = spot if placement.spot is None else placement.spot
        for name, scope in self.scopes:
            if name == placement.provider and scope.covers(region=placement.region, zone=placement.zone,
                                                            instance_type=placement.instance_type, family=family,
                                                            spot=market):
                return scope
        return None


def launch_with_failover(
    request: LaunchRequest,
    placements: Sequence[Placement],
    providers: Mapping[str, Provider] | Callable[[str], Provider],
    *,
    on_attempt: AttemptCallback | None = None,
    max_attempts: int | None = None,
    check_existing: bool = True,
    prepare: Callable[[LaunchRequest], LaunchRequest] | None = None,
    zones_of: Callable[[Provider, Placement], Sequence[str]] | None = None,
) -> FailoverResult:
    """Launch `request` at the first placement with capacity; raise FailoverExhausted when none has.

    `providers` maps a provider name to a configured provider (or builds one). A PlacementError (capacity,
    quota, a zone or region this account cannot use, a request this region or type refuses) blocks its scope
    and moves on; AuthError and any other ProviderError are re-raised after being recorded as an attempt.
    A placement with a region but no zone is expanded into the provider's zones when it is reached
    (`zones_of(provider, placement)`, default `provider.zones(region)`), inside the same error handling: a
    region that refuses to list its zones is blocked like one that refuses a launch.
    `prepare`: applied to each placement's request before its launch (gpuplan.launching.placements sets the
    machines' fail-safe for the placement's price and renders their boot scripts with it).
    Each launch call gets its attempt number in `options["attempt"]` (AWS puts it in its ClientToken).
    """
    if not placements:
        raise ProviderError("no placement to try: the job's constraints leave no region or offer", code="NoPlacement")

    def get(name: str) -> Provider:
        return providers[name] if isinstance(providers, Mapping) else providers(name)

    attempts: list[Attempt] = []

    def record(attempt: Attempt) -> None:
        attempts.append(attempt)
        if on_attempt is not None:
            on_attempt(attempt)

    def list_zones(provider: Provider, placement: Placement) -> Sequence[str]:
        if zones_of is not None:
            return zones_of(provider, placement)
        return provider_zones(provider, placement.region)

    hint_regions_by_provider: dict[str, set[str]] = {}
    for p in placements:
        if p.region:
            hint_regions_by_provider.setdefault(p.provider, set()).add(p.region)
    checked: set[str] = set()
    blocks = _Blocks()
    queue = list(placements)
    seen: set[Placement] = set()
    while queue:
        placement = queue.pop(0)
        if placement in seen:
            continue
        seen.add(placement)
        number = len(attempts) + 1
        provider = get(placement.provider)
        blocked = blocks.covering(placement, provider, request.spot)
        if blocked is not None:
            record(Attempt(number, placement, "skipped", message=f"blocked earlier: {blocked.describe()}",
                           blocked=blocked.describe()))
            continue
        if max_attempts is not None and sum(a.outcome != "skipped" for a in attempts) >= max_attempts:
            break
        started = time.monotonic()
        checking = False
        try:
            if check_existing and placement.provider not in checked:
                checking = True
                provider.include_regions(sorted(hint_regions_by_provider.get(placement.provider, ())))
                existing = _live(provider.list_tagged(request.run_id))
                checked.add(placement.provider)
                if existing:
                    where = dataclasses.replace(placement, region=existing[0].region, zone=existing[0].zone,
                                                instance_type=existing[0].instance_type or placement.instance_type)
                    record(Attempt(number, where, "existing", message="the run's machines were already running",
                                   instance_ids=[i.instance_id for i in existing]))
                    return FailoverResult(existing, where, attempts, request_for(request, where))
            if placement.zone is None and placement.region:
                zones = list(list_zones(provider, placement))
                if zones:  # this placement becomes one per zone (`seen` keeps it from coming back)
                    queue[0:0] = [dataclasses.replace(placement, zone=z) for z in zones]
                    continue
            attempt_request = request_for(request, placement, attempt=number)
            if prepare is not None:
                attempt_request = prepare(attempt_request)
            instances = provider.launch(attempt_request)
        except PlacementError as exc:
            scope = default_scope(exc, placement, provider)
            blocks.add(placement.provider, scope)
            if checking:  # the look-up searched everywhere but the refusing scope, now blocked: not asked again
                checked.add(placement.provider)
            record(Attempt(number, placement, _outcome(exc), exc.code, str(exc), time.monotonic() - started,
                           blocked=scope.describe()))
            continue
        except AuthError as exc:
            record(Attempt(number, placement, "auth", exc.code, str(exc), time.monotonic() - started))
            raise
        except ProviderError as exc:
            record(Attempt(number, placement, "error", exc.code, str(exc), time.monotonic() - started))
            raise
        launched = Attempt(number, placement, "launched", seconds=time.monotonic() - started,
                           message=f"{len(instances)} machine(s) started",
                           instance_ids=[i.instance_id for i in instances])
        record(launched)
        return FailoverResult(instances, placement, attempts, attempt_request)
    tried = sum(a.outcome in REFUSED for a in attempts)
    raise FailoverExhausted(f"no capacity for run {request.run_id}: {tried} placement(s) tried, all refused "
                            "(attempts listed above)", attempts)
