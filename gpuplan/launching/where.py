"""Where a launch goes, and why: the provider and its plan, decided before anything is recorded.

Order (the first that says something wins), the same words printed to the user and put in --json:
1. `--provider NAME` on the command line;
2. the spec's `resources.clouds`: one cloud is that provider; several are each planned (offer, estimate) and the
   cheapest total job cost that fits wins (a cloud with no offer that fits, or without the GPUs the job needs,
   is left out and the reason kept);
3. `[defaults] provider` in the config file (gpuplan.config.default_setting);
4. this machine (`local`).

On each candidate the GPU check runs first (gpuplan.launching.gpu_check): a GPU job on a provider without GPUs
is refused, or with --allow-cpu planned as the CPU job it will be.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from gpuplan.errors import UserError
from gpuplan.jobs.spec import JobSpec
from gpuplan.launching.gpu_check import check_gpus
from gpuplan.launching.offer import LaunchPlan
from gpuplan.launching.plan import plan_launch
from gpuplan.providers.base import Provider, ProviderError


@dataclass(frozen=True)
class Candidates:
    """The provider names to consider, where they came from (`source`) and the reason in words (`why`)."""

    names: tuple[str, ...]
    source: str  # option | spec | config | default
    why: str


@dataclass(frozen=True)
class Decision:
    """The provider chosen, its plan, why it was chosen, and what else was considered."""

    provider: Provider
    plan: LaunchPlan
    source: str
    why: str
    cpu_fallback: bool = False
    notes: tuple[str, ...] = ()
    considered: tuple[dict[str, object], ...] = field(default_factory=tuple)

    def as_dict(self) -> dict[str, object]:
        return {"provider": self.provider.name, "provider_source": self.source, "provider_reason": self.why,
                "cpu_fallback": self.cpu_fallback, "providers_considered": list(self.considered)}


def candidates(option: str | None, spec: JobSpec, *, config_default: object | None = None,
               config_where: str = "the config file", clouds_from: str = "the spec's resources.clouds") -> Candidates:
    """Which providers to consider, in the order of the module doc. `config_default`: the `[defaults] provider`
    value (None when unset); `clouds_from`: where the spec's clouds came from (the spec, or `[defaults] clouds`
    filled in by gpuplan.jobs.defaults), so the printed reason names the file the user must edit."""
    if option:
        return Candidates((option,), "option", "--provider")
    clouds = tuple(dict.fromkeys(spec.resources.clouds))
    if len(clouds) == 1:
        return Candidates(clouds, "spec", f"{clouds_from} names {clouds[0]}")
    if clouds:
        return Candidates(clouds, "spec", f"the cheapest fit among {clouds_from} ({', '.join(clouds)})")
    if config_default is not None:
        if not isinstance(config_default, str) or not config_default.strip():
            raise UserError(f"{config_where}: [defaults] provider must be a provider name, not {config_default!r}")
        return Candidates((config_default.strip(),), "config", f"[defaults] provider in {config_where}")
    return Candidates(("local",), "default", "no --provider, no resources.clouds and no [defaults] provider: "
                                             "this machine")


def _cost(plan: LaunchPlan) -> Decimal | None:
    """What a candidate costs for the comparison: the estimated job cost, else (no estimate) its price per hour."""
    if plan.estimate is not None and plan.estimate.cost_usd is not None:
        return Decimal(plan.estimate.cost_usd)
    return plan.offer.total_price_per_hour


def decide(spec: JobSpec, spec_text: str, found: Candidates, *, make_provider: Callable[[str], Provider],
           allow_cpu: bool, source_dir: str | None = None, db_url: str | None = None) -> Decision:
    """Plan on each candidate and pick one (the only one, or the cheapest that fits). A single candidate's
    refusal (no GPUs, nothing fits) is raised as is; among several, refusals leave that cloud out, and only when
    every cloud is left out is the launch refused, with each one's reason."""
    notes: list[str] = []
    if found.source == "option" and spec.resources.clouds and found.names[0] not in spec.resources.clouds:
        notes.append(f"warning: --provider {found.names[0]} overrides the spec's resources.clouds "
                     f"({', '.join(spec.resources.clouds)})")
    if len(found.names) == 1:
        provider = make_provider(found.names[0])
        gpu = check_gpus(spec, provider, allow_cpu=allow_cpu)
        plan = plan_launch(gpu.spec, spec_text, provider=provider, source_dir=source_dir, db_url=db_url)
        if gpu.cpu_fallback:
            plan = replace(plan, cpu_fallback=gpu.note)
        return Decision(provider, plan, found.source, found.why, cpu_fallback=gpu.cpu_fallback,
                        notes=tuple(notes + ([gpu.note] if gpu.note else [])))
    planned: list[tuple[int, Provider, LaunchPlan]] = []
    considered: list[dict[str, object]] = []
    for index, name in enumerate(found.names):
        try:
            provider = make_provider(name)
            gpu = check_gpus(spec, provider, allow_cpu=False)  # among several clouds, one with the GPUs wins
            plan = plan_launch(gpu.spec, spec_text, provider=provider, source_dir=source_dir, db_url=db_url)
        except (UserError, ProviderError) as exc:  # refused credentials on one cloud leave the others
            considered.append({"provider": name, "fits": False, "reason": str(exc)})
            continue
        cost = _cost(plan)
        considered.append({"provider": name, "fits": True, "cost_usd": cost})
        planned.append((index, provider, plan))
    if not planned:
        reasons = "; ".join(f"{c['provider']}: {c['reason']}" for c in considered)
        raise UserError(f"no cloud of the spec's resources.clouds fits {spec.name}: {reasons}")
    _, provider, plan = min(planned, key=lambda ipp: _rank(ipp[2], ipp[0]))
    return Decision(provider, plan, found.source, f"{found.why}: {_compare(considered)}", notes=tuple(notes),
                    considered=tuple(considered))


def _rank(plan: LaunchPlan, index: int) -> tuple[bool, Decimal, int]:
    """Known cost first, cheapest first, then the spec's own order (`index`)."""
    cost = _cost(plan)
    return (cost is None, cost if cost is not None else Decimal(0), index)


def _compare(considered: Sequence[dict[str, object]]) -> str:
    parts = []
    for c in considered:
        if c["fits"]:
            cost = c.get("cost_usd")
            parts.append(f"{c['provider']} ${Decimal(str(cost)):,.2f}" if cost is not None
                         else f"{c['provider']} (no cost known)")
        else:
            parts.append(f"{c['provider']} does not fit")
    return ", ".join(parts)


def decide_launch(spec: JobSpec, spec_text: str, *, option: str | None, allow_cpu: bool,
                  source_dir: str | None = None, db_url: str | None = None,
                  clouds_from_config: bool = False) -> Decision:
    """`decide` with the registered providers (configured from the config file) and its `[defaults] provider`,
    which is read only when neither --provider nor the spec says where. `clouds_from_config`: the spec's clouds
    are the config file's `[defaults] clouds` (the spec named none)."""
    from gpuplan.config import config_path, default_setting
    from gpuplan.launching.choose import provider_for

    fallback = default_setting("provider") if not option and not spec.resources.clouds else None
    found = candidates(option, spec, config_default=fallback, config_where=str(config_path()),
                       clouds_from=f"[defaults] clouds in {config_path()}" if clouds_from_config
                       else "the spec's resources.clouds")
    return decide(spec, spec_text, found, make_provider=provider_for, allow_cpu=allow_cpu, source_dir=source_dir,
                  db_url=db_url)
