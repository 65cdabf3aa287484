"""Planning leaves out offers this account cannot launch: disabled (opt-in) regions and unnamed Local Zones.

The catalog's cheapest offers are exactly there (an opt-in region, an AWS Local Zone's spot price), so without this
filter the first launch on a real account picks a placement EC2 refuses. The account's answers are served on the
provider's client (moto reports some opt-in regions wrongly and lists no Local Zone).
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.choose import choose_offer, planned_offer
from gpuplan.launching.placements import ranked_choices
from gpuplan.launching.usable import UsableOffers, usable_offers
from gpuplan.providers.aws.provider import AwsProvider

from support.awsmoto import serve
from support.clihelp import run_cli


def regions_served(aws: AwsProvider, disabled: set[str]) -> None:
    everywhere = ["us-east-1", "us-west-2", "eu-south-2", "ap-east-1", "eu-west-1", "us-east-2"]
    serve(aws.client("ec2", aws.region, retries=2), "DescribeRegions", {"Regions": [
        {"RegionName": r, "OptInStatus": "not-opted-in" if r in disabled else "opt-in-not-required"}
        for r in everywhere]}, [])


def test_disabled_regions_and_unnamed_local_zones_are_left_out(aws: AwsProvider) -> None:
    regions_served(aws, {"ap-east-1"})
    usable = usable_offers(aws)
    assert not usable.keep("ap-east-1", "ape1-az1") and usable.keep("us-east-1", "use1-az4")
    assert not usable.keep("us-east-1", "use1-atl2-az1")
    named = usable_offers(aws, ["use1-atl2-az1"])
    assert named.keep("us-east-1", "use1-atl2-az1") and not named.keep("us-east-1", "use1-az4")
    by_name = usable_offers(aws, ["us-east-1a"])  # a name: the catalog's ids of its region stay, Local Zones not
    assert by_name.keep("us-east-1", "use1-az4") and not by_name.keep("us-east-1", "use1-atl2-az1")
    assert not by_name.keep("us-west-2", "usw2-az1")


def test_a_local_zones_spot_price_is_not_the_regions_price(aws: AwsProvider) -> None:
    regions_served(aws, set())
    def price(usable: UsableOffers | None) -> Decimal | None:
        [g4dn] = [c for c in ranked_choices("aws", "T4", 1, spot=True, regions=["us-west-2"], usable=usable)
                  if c.instance_type == "g4dn.xlarge"]
        return g4dn.price_per_hour
    # usw2-lax1-az1, a Los Angeles Local Zone, has 0.0631: it ranks only when named, even without a usable filter
    assert price(None) == Decimal("0.238600")
    assert price(usable_offers(aws)) == Decimal("0.238600")
    assert price(usable_offers(aws, ["usw2-lax1-az1"])) == Decimal("0.063100")


def test_the_planner_never_picks_a_local_zone_unless_named(aws: AwsProvider) -> None:
    regions_served(aws, set())
    spec = parse_spec("""\
name: big
command: python train.py
resources: {gpu: "H100:8", regions: [us-east-1], spot: true}
workload: {model: llama-2-7b, tokens: 2B, seq_len: 4096, sharding: zero3}
""")
    from gpuplan.catalog import Catalog

    cheapest = min(Catalog.load(None, ("aws",)).select(gpus={"H100"}, spot=True, regions=["us-east-1"], zones="all",
                                                         min_gpus=8), key=lambda o: o.price(True) or 0)
    assert cheapest.zone == "use1-atl2-az1"  # the cheapest spot H100 in the catalog is a Local Zone's
    unfiltered = planned_offer(spec, "aws", "aws")
    assert unfiltered is not None and unfiltered.zone == "use1-az6"  # the catalog's ranking leaves it out unasked
    offer = choose_offer(spec, aws)
    assert offer.region == "us-east-1" and offer.zone is not None and offer.zone != "use1-atl2-az1"


def test_the_planner_never_picks_a_disabled_region(aws: AwsProvider) -> None:
    spec = parse_spec("""\
name: tiny
runtime: process
command: python tiny_gpt.py
workload: {model: gpt-tiny, tokens: 204800, seq_len: 64, precision: fp32, throughput: 15000}
""")
    unfiltered = planned_offer(spec, "aws", "aws")
    assert unfiltered is not None and unfiltered.region
    regions_served(aws, {unfiltered.region})
    offer = choose_offer(spec, aws)
    assert offer.region != unfiltered.region and offer.region in {"us-east-1", "us-west-2", "eu-west-1", "us-east-2"}


def test_gpuplan_plan_shows_a_local_zone_only_when_the_spec_names_it(tmp_path: Path) -> None:
    """`plan` quotes what `launch` would use: the Atlanta Local Zone's spot H100 (the catalog's cheapest) only when
    `resources.zones` names it."""
    spec = tmp_path / "job.yaml"
    text = """\
name: big
command: python train.py
resources: {{gpu: "H100:8", regions: [us-east-1], spot: true{zones}}}
workload: {{model: llama-2-7b, tokens: 2B, seq_len: 4096, sharding: zero3}}
"""
    spec.write_text(text.format(zones=""))
    plain = run_cli("plan", str(spec), "--cloud", "aws", "--json")
    assert plain.exit_code == 0, plain.stderr
    assert plain.json() and all(o["zone"] != "use1-atl2-az1" for o in plain.json())
    spec.write_text(text.format(zones=", zones: [use1-atl2-az1]"))
    named = run_cli("plan", str(spec), "--cloud", "aws", "--json")
    assert named.exit_code == 0, named.stderr
    assert {o["zone"] for o in named.json()} == {"use1-atl2-az1"}


def test_a_spec_naming_a100_launches_the_part_every_command_means(aws: AwsProvider) -> None:
    """`gpu: A100:8` was "unknown GPU A100" at launch: the one resolver reads it as the 40 GB part there too."""
    regions_served(aws, set())
    spec = parse_spec("name: a100\ncommand: python train.py\nresources: {gpu: \"A100:8\", regions: [us-east-1]}\n")
    offer = choose_offer(spec, aws)
    assert (offer.gpu, offer.instance_type, offer.gpus_per_node) == ("A100-40GB", "p4d.24xlarge", 8)
