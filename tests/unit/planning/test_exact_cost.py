"""Issue 33, item 4: plan ranks and tags on the exact cost (price x nodes x billed hours), `estimate`, `prices` and
`plan` quote one price, and sub-cent costs are shown as such."""

from __future__ import annotations

import itertools
from decimal import Decimal

from gpuplan.catalog import Catalog
from gpuplan.estimating.architecture import preset
from gpuplan.estimating.estimate import Workload
from gpuplan.planning.job_cost import billed_hours, billing_minimums, job_cost
from gpuplan.planning.planner import Constraints, plan

from support.clihelp import run_cli


def _small_job(tokens: int) -> Workload:
    arch = preset("gpt2")
    return Workload(params=arch.param_count(), tokens=tokens, architecture=arch, seq_len=1024)


def test_a_short_job_is_ranked_and_tagged_by_its_exact_cost() -> None:
    """A 10M-token job costs cents everywhere: the ranking must still follow the exact cost, never a rounded one."""
    offers = Catalog.load(None).select(gpus={"L4"})
    result = plan(_small_job(10**7), offers, constraints=Constraints(),
                  min_billed_seconds=billing_minimums(o.cloud for o in offers))
    costs = [o.est_cost_usd for o in result.options]
    assert len(costs) > 20 and all(c is not None for c in costs)
    assert all(a <= b for a, b in itertools.pairwise(costs))  # type: ignore[operator]
    assert any(c != c.quantize(Decimal("0.01")) for c in costs)  # type: ignore[union-attr]  # not cents
    cheapest = min(result.options, key=lambda o: (o.est_cost_usd, o.est_hours))
    assert "cheapest" in result.options[0].tags and result.options[0] is cheapest
    first = result.options[0]
    assert first.est_cost_usd == job_cost(first.price_per_hour, 1, first.est_hours or 0.0, min_billed_seconds=60)


def test_each_cloud_bills_its_minimum() -> None:
    """AWS and GCE bill at least 60 s (providers' min_billed_seconds): a 10-second job costs a minute."""
    assert billing_minimums(["aws", "gcp", "no-such-cloud"]) == {"aws": 60, "gcp": 60, "no-such-cloud": 0}
    assert billed_hours(10 / 3600, 60) == Decimal(60) / Decimal(3600)
    assert job_cost(Decimal("0.0913"), 2, 10 / 3600, min_billed_seconds=60) == Decimal("0.003043")
    assert job_cost(Decimal("0.0913"), 1, 2.0) == Decimal("0.182600")


def test_estimate_prices_and_plan_quote_one_price() -> None:
    """g6.xlarge spot is $0.0913/h in eu-south-2 zone eus2-az3 and $0.0951/h in eus2-az2: all three
    commands quote the cheaper one, and estimate shows it to four places with the sub-cent cost as such."""
    data = run_cli("estimate", "--model", "gpt2", "--tokens", "10M", "--gpu", "L4", "--gpus", "1", "--json").json()
    g6 = [c for c in data["cost"] if c["instance_type"] == "g6.xlarge" and c["spot"]]
    assert g6 and float(g6[0]["price_per_hour"]) == 0.0913
    human = run_cli("estimate", "--model", "gpt2", "--tokens", "10M", "--gpu", "L4", "--gpus", "1").stdout
    assert "g6.xlarge (1 GPU) spot in eu-south-2 at $0.0913/h" in human
    prices = run_cli("prices", "--gpu", "L4", "--spot", "--json").json()
    assert min(float(p["price"]) for p in prices if p["instance_type"] == "g6.xlarge") == 0.0913
    rows = run_cli("plan", "--model", "gpt2", "--tokens", "10M", "--gpu", "L4", "--json").json()
    planned = [r for r in rows if r["instance_type"] == "g6.xlarge" and r["spot"]]
    assert planned and float(planned[0]["price_per_hour"]) == 0.0913
