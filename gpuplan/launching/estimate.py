"""The estimate recorded with a run: hours and dollars on the chosen offer."""

from __future__ import annotations

import logging
from decimal import Decimal

from gpuplan.errors import UserError
from gpuplan.estimating.job_hours import job_hours
from gpuplan.jobs.spec import JobSpec
from gpuplan.launching.choose import spot_model_for
from gpuplan.launching.offer import ChosenOffer, RunEstimate
from gpuplan.limits import MONEY_LIMIT, within

log = logging.getLogger(__name__)


def estimate_run(spec: JobSpec, offer: ChosenOffer, *, db_url: str | None = None) -> RunEstimate | None:
    """Estimated wall time and cost, or None when the spec has no workload to estimate from.

    Preference: the workload's own measured `throughput` (tokens/s per GPU, or per node for a CPU job), then
    for a CPU job on this machine a CPU bench of the model here (gpuplan.calibration.localbench), then the estimator
    (gpuplan.estimating.estimate). Wall time = the provider's start-up allowance (gpuplan.calibration.startup: measured
    from its finished runs, else a documented default) + tokens / throughput, + on spot the expected interruptions: the
    breakdown `gpuplan plan` uses too (gpuplan.estimating.job_hours). Cost = hours x the offer's price for all nodes
    (start-up is billed too).
    """
    workload = spec.workload
    if workload is None or workload.total_tokens is None:
        return None
    tokens = workload.total_tokens
    params = spec_params(spec)
    result: RunEstimate | None = None
    if workload.throughput:
        workers = max(offer.gpus_per_node, 1) * offer.nodes
        rate = workload.throughput * workers
        result = RunEstimate(hours=tokens / rate / 3600, tokens_per_s=rate, cost_usd=None,
                             source="workload.throughput", params=params, detail={"mfu_source": "user"})
    else:
        result = _estimate_from_cpu_bench(spec, offer, params, db_url) or \
            _estimate_with_estimator(spec, offer, params, db_url)
    if result is None:
        return None
    from gpuplan.calibration.startup import startup_allowance

    startup = startup_allowance(offer.provider, db_url)
    stretch = spot_model_for(spec, db_url).stretch(offer.cloud, offer.nodes) if offer.spot else None
    breakdown = job_hours(result.hours, startup_s=startup.seconds, stretch=stretch)
    hours = breakdown.total
    if not within("hours", hours):
        raise UserError(f"{spec.name} would take {hours:.3g} h on {offer.nodes} x {offer.gpu or 'CPU'} "
                        f"({result.source}): more than 100 years; check the workload's tokens and model")
    total_price = offer.total_price_per_hour
    cost = None if total_price is None else (total_price * Decimal(str(hours))).quantize(Decimal("0.000001"))
    if cost is not None and cost >= MONEY_LIMIT:  # the Money column could not record it
        raise UserError(f"{spec.name} would cost ${cost:,.0f}, more than the books can hold; check the workload")
    detail = {**dict(result.detail), "run_hours": result.hours, **startup.as_dict(), "hours": breakdown.as_dict()}
    return RunEstimate(hours=hours, tokens_per_s=result.tokens_per_s, cost_usd=cost, source=result.source,
                       params=result.params or params, detail=detail, startup_s=startup.seconds,
                       startup_source=startup.source, startup_detail=startup.detail)


def _estimate_from_cpu_bench(spec: JobSpec, offer: ChosenOffer, params: int | None,
                             db_url: str | None) -> RunEstimate | None:
    """A CPU job on this machine (local provider, no GPU): the throughput of a CPU bench of its model here.

    None when it is not such a job, the workload names no architecture, or no bench matches
    (gpuplan.calibration.localbench says what must match).
    """
    workload = spec.workload
    if not offer.on_this_machine or offer.gpu or workload is None or db_url is None:
        return None
    from gpuplan.calibration.localbench import cpu_throughput
    from gpuplan.estimating.from_job import workload_from_job

    try:
        shaped, _ = workload_from_job(workload)
    except ValueError:
        return None
    if shaped.architecture is None:
        return None
    found = cpu_throughput(db_url, signature=shaped.architecture.signature(), precision=shaped.precision,
                           seq_len=shaped.seq_len, micro_batch=workload.micro_batch)
    if found is None or found.tokens_per_s_per_gpu is None:
        return None
    # Local nodes are processes on this one machine, which the bench measured: the machine's rate is the job's.
    rate = found.tokens_per_s_per_gpu
    return RunEstimate(hours=shaped.tokens / rate / 3600, tokens_per_s=rate, cost_usd=None,
                       source=f"measured: {found.detail}", params=params or shaped.params,
                       detail={"mfu_source": "bench", "mfu_ref": found.ref, "tokens_per_s_source": found.detail})


def spec_params(spec: JobSpec) -> int | None:
    """The model's parameter count the spec gives or names (a preset, a config file); None when it does not."""
    workload = spec.workload
    if workload is None:
        return None
    if workload.params:
        return workload.params
    try:
        from gpuplan.estimating.architecture import load_hf_config, preset

        if workload.model:
            return preset(workload.model).param_count()
        if workload.model_config_path:
            return load_hf_config(workload.model_config_path).param_count()
    except ValueError:
        return None
    return None


def _estimate_with_estimator(spec: JobSpec, offer: ChosenOffer, params: int | None,
                             db_url: str | None = None) -> RunEstimate | None:
    """The estimator's answer (gpuplan.estimating.from_job.estimate_for_job) for the workload on the offer's GPUs.

    Throughput: the workload's own numbers, else a matching `gpuplan bench` record or calibration from the
    store, else the estimator's prior. None when the offer has no GPU (a CPU job on this machine: the estimator
    models GPUs) or the estimator cannot answer (e.g. a precision the GPU lacks): a launch never fails for want
    of an estimate.
    """
    if spec.workload is None or not offer.gpu:
        return None
    from gpuplan.estimating.from_job import estimate_for_job, workload_from_job
    from gpuplan.hardware.networks import inter_node_gbps

    try:
        throughput = None
        if db_url is not None:
            from gpuplan.calibration.throughput import LookupKey, resolve_throughput, store_lookups
            from gpuplan.hardware.gpus import resolve_gpu

            workload, _ = workload_from_job(spec.workload)
            key = LookupKey(gpu=resolve_gpu(offer.gpu).name, params=workload.params, precision=workload.precision,
                            seq_len=workload.seq_len, architecture=workload.architecture)
            throughput = resolve_throughput(tokens_per_s=None, mfu=None, key=key, lookups=store_lookups(db_url))
        est = estimate_for_job(spec.workload, gpu=offer.gpu, gpus_per_node=max(offer.gpus_per_node, 1),
                               nodes=offer.nodes, throughput=throughput,
                               network_gbps=inter_node_gbps(offer.instance_type, offer.nodes))
    except (ValueError, UserError) as exc:
        log.info("no estimate for %s: %s", spec.name, exc)
        return None
    return RunEstimate(hours=float(est.wall_hours), tokens_per_s=est.tokens_per_s_per_gpu * est.gpus,
                       cost_usd=None, source=f"estimate (mfu {est.mfu:.2f}, {est.mfu_source})", params=est.params,
                       detail={"mfu": est.mfu, "mfu_source": est.mfu_source, "mfu_ref": est.mfu_ref,
                               "fits": est.fits, "assumptions": list(est.assumptions),
                               "memory_gb_per_gpu": est.memory_gb_per_gpu.total, "flops": est.flops})
