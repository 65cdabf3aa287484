"""Plan a remote bench (`gpuplan bench --on ...`) as a launch, and record its result once it ran.

gpuplan.launching.remote_bench_job builds the job and reads its result; this module gives it a LaunchPlan for the
one launch sequence (gpuplan.launching.sequence: gates -> Run row -> provider; the CLI then follows it) and stores
the result in the bench records (a Benchmark row with `run_id`).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from gpuplan.errors import GpuplanError
from gpuplan.launching.remote_bench_job import (
    DEFAULT_CLOUD_IMAGE,
    NoRemoteResult,
    RemoteTarget,
    build_spec,
    cloud_type,
    default_budget,
    fetch_outputs,
    read_result,
    storage_hint,
)

if TYPE_CHECKING:
    from gpuplan.bench.result import BenchResult
    from gpuplan.providers.base import Provider
    from gpuplan.store.db import Store


@dataclass(frozen=True)
class RemoteOptions:
    """How the bench job is packaged: image, pip spec for gpuplan, caps."""

    image: str | None = None
    install: str | None = None
    max_hours: float = 0.5
    budget_usd: Decimal | None = None


class RemoteBenchFailed(GpuplanError):
    """The bench job did not succeed (exit 1); the message names the run so its log can be read."""


def plan_remote(target: RemoteTarget, argv: list[str], options: RemoteOptions, *, name: str,
                db_url: str | None) -> tuple[Any, Any]:
    """(LaunchPlan, provider) for the bench job; nothing is recorded or started.

    Clouds: exactly the instance type asked for, in its cheapest catalog region, in the image (default a
    PyTorch image), installing gpuplan from --install when the image lacks it. Local and Slurm: the offer
    `gpuplan launch` would take, running the job with the same Python (no image unless one is given). The
    estimate is the worst case (max_hours at the offer's price), so the budget gate sees the most the bench
    can cost.
    """
    from gpuplan.launching.choose import choose_offer, provider_for
    from gpuplan.launching.offer import ChosenOffer, LaunchPlan, RunEstimate

    provider = provider_for(target.provider)
    if provider.priced_by_catalog:
        assert target.detail
        kind = cloud_type(provider.cloud, target.detail, db_url=db_url)
        budget = options.budget_usd or default_budget(kind.price_per_hour, options.max_hours,
                                                      provider.min_billed_seconds)
        spec, text = build_spec(target, argv, name=name, image=options.image or DEFAULT_CLOUD_IMAGE,
                                install=options.install, max_hours=options.max_hours,
                                budget_usd=budget, gpu=kind.gpu, gpus_per_node=kind.gpu_count)
        offer = ChosenOffer(provider=provider.name, cloud=provider.cloud, instance_type=kind.instance_type,
                                    region=kind.region, gpu=kind.gpu, gpus_per_node=kind.gpu_count, nodes=1,
                                    spot=False, price_per_hour=kind.price_per_hour)
    else:
        gpu = target.detail  # Slurm: a GPU (gres) type
        spec, text = build_spec(target, argv, name=name, image=options.image, install=options.install,
                                max_hours=options.max_hours, budget_usd=options.budget_usd, gpu=gpu)
        offer = choose_offer(spec, provider, db_url=db_url)
        budget = options.budget_usd or default_budget(offer.price_per_hour, options.max_hours,
                                                      provider.min_billed_seconds)
        if budget is not None and budget != options.budget_usd:
            spec, text = build_spec(target, argv, name=name, image=options.image, install=options.install,
                                    max_hours=options.max_hours, budget_usd=budget, gpu=gpu)
    price = offer.total_price_per_hour
    estimate = RunEstimate(
        hours=options.max_hours, tokens_per_s=None,
        cost_usd=(price * Decimal(str(options.max_hours))).quantize(Decimal("0.000001")) if price is not None
        else None, source="bench job: at most max_hours",
        detail={"upper_bound": True})  # a cap for the budgets, not a prediction: report --accuracy skips it
    plan = LaunchPlan(spec=spec, spec_text=text, source_dir=None, offer=offer, estimate=estimate)
    return plan, provider



def record_remote_result(store: Store, run_id: str, provider: Provider) -> tuple[int, BenchResult]:
    """Fetch the run's outputs, read its bench result and store it with `run_id`: (bench id, BenchResult).

    A run that did not succeed, or left no readable result, raises with the run id and what to look at.
    """
    from gpuplan.bench.records import save_result
    from gpuplan.store.models import Run, RunState

    with store.session() as session:
        run = session.get(Run, run_id)
        assert run is not None, run_id
        fetch_outputs(provider, run)
        state, reason, run_dir = run.state, run.state_reason, run.run_dir
    if state != RunState.SUCCEEDED:
        raise RemoteBenchFailed(f"bench run {run_id} ended {state}" + (f" ({reason})" if reason else "")
                                + f"; see `gpuplan logs {run_id}`")
    try:
        result = read_result(run_dir or "")
    except NoRemoteResult as exc:
        hint = storage_hint(provider)
        raise NoRemoteResult(f"{exc}" + (f"; {hint}" if hint else "")) from exc
    with store.session() as session:
        bench_id = save_result(session, result, run_id=run_id).id
    return bench_id, result
