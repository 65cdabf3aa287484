"""Where a launch goes and why, the GPU check before planning, and the estimate against the spec's caps."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from gpuplan.errors import UserError
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.caps import overruns
from gpuplan.launching.gpu_check import check_gpus
from gpuplan.launching.offer import ChosenOffer, LaunchPlan, RunEstimate
from gpuplan.launching.where import candidates
from gpuplan.providers.local import LocalProvider

NOW = dt.datetime(2026, 11, 26, 1, 0, tzinfo=dt.timezone.utc)


def spec(extra: str = ""):  # type: ignore[no-untyped-def]
    return parse_spec(f"name: j\nruntime: process\ncommand: echo\n{extra}", source="test")


def test_candidates_in_order() -> None:
    clouds = spec("resources:\n  clouds: [aws, gcp]\n")
    assert candidates("slurm", clouds).names == ("slurm",) and candidates("slurm", clouds).source == "option"
    assert candidates(None, clouds).names == ("aws", "gcp") and candidates(None, clouds).source == "spec"
    one = candidates(None, spec("resources:\n  clouds: [gcp]\n"))
    assert (one.names, one.why) == (("gcp",), "the spec's resources.clouds names gcp")
    from_config = candidates(None, spec(), config_default="aws", config_where="/c.toml")
    assert (from_config.names, from_config.why) == (("aws",), "[defaults] provider in /c.toml")
    assert candidates(None, spec()).names == ("local",) and candidates(None, spec()).source == "default"
    with pytest.raises(UserError, match=r"\[defaults\] provider must be a provider name"):
        candidates(None, spec(), config_default=3)


class NoGpus(LocalProvider):
    def missing_gpus(self, gpus_per_node: int) -> str | None:
        return "this machine has no NVIDIA GPU (no /dev/nvidia0)" if gpus_per_node else None


def test_gpu_check_refuses_or_turns_the_job_into_a_cpu_job(tmp_path) -> None:  # type: ignore[no-untyped-def]
    gpu_spec = spec("resources:\n  gpu: H100:8\n")
    with pytest.raises(UserError, match=r"asks for 8 x H100 per node on local, but this machine has no NVIDIA GPU"):
        check_gpus(gpu_spec, NoGpus(root=tmp_path), allow_cpu=False)
    cpu = check_gpus(gpu_spec, NoGpus(root=tmp_path), allow_cpu=True)
    assert cpu.cpu_fallback and cpu.spec.resources.gpu is None and cpu.spec.resources.total_gpus == 0
    assert check_gpus(spec(), NoGpus(root=tmp_path), allow_cpu=False).spec == spec()


def plan(hours: float, cost: str | None, limits: str) -> LaunchPlan:
    offer = ChosenOffer(provider="local", cloud="local")
    est = RunEstimate(hours=hours, tokens_per_s=None, cost_usd=Decimal(cost) if cost else None, source="test")
    return LaunchPlan(spec=spec(f"limits:\n{limits}"), spec_text="", source_dir=None, offer=offer, estimate=est)


def test_overruns_say_by_how_much() -> None:
    [over] = overruns(plan(27.7786, None, "  max_hours: 1\n"), NOW)
    assert over.message == ("the estimate 27:46:43 exceeds max_hours 1:00:00 by 26:46:43: the job would be "
                            "stopped at ~4%")
    [money] = overruns(plan(2, "150", "  budget_usd: 100\n"), NOW)
    assert money.cap == "budget_usd" and "by $50.00" in money.message and "~67%" in money.message
    [late] = overruns(plan(3, None, "  deadline: 2026-11-26T02:00:00Z\n"), NOW)
    assert late.cap == "deadline" and "2:00:00 after the deadline 2026-11-26 02:00 UTC" in late.message
    assert overruns(plan(0.5, "1", "  max_hours: 1\n  budget_usd: 2\n  deadline: 1h\n"), NOW) == []


def test_several_clouds_leave_out_the_ones_that_cannot_and_keep_the_reasons(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpuplan.launching.where import decide
    from gpuplan.providers.base import AuthError

    class Priced(LocalProvider):
        def __init__(self, name: str, price: str) -> None:
            super().__init__(root=tmp_path, price_per_hour=price)
            self.label = name

    made = {"cheap": Priced("cheap", "1"), "dear": Priced("dear", "5")}

    def make(name: str):  # type: ignore[no-untyped-def]
        if name == "refused":
            raise AuthError("AuthFailure: the credentials are refused")
        return made[name]

    job = spec("resources:\n  clouds: [dear, refused, cheap]\n")
    found = candidates(None, job)
    decision = decide(job, "", found, make_provider=make, allow_cpu=False)
    assert decision.provider is made["cheap"]
    assert [c["provider"] for c in decision.considered] == ["dear", "refused", "cheap"]
    assert decision.considered[1] == {"provider": "refused", "fits": False,
                                      "reason": "AuthFailure: the credentials are refused"}
    assert decision.why.endswith("dear $5.00, refused does not fit, cheap $1.00")
    nowhere = spec("resources:\n  clouds: [refused, refused2]\n")
    with pytest.raises(UserError, match=r"no cloud of the spec's resources\.clouds fits j: refused: AuthFailure"):
        decide(nowhere, "", candidates(None, nowhere), make_provider=lambda n: make("refused"), allow_cpu=False)
