"""Placements from catalog offers: the chosen offer, the same type elsewhere, then the next type; zones expanded."""

from __future__ import annotations

import dataclasses
from decimal import Decimal
from typing import Any

from gpuplan.launching.placements import CloudChoice, placements_for, ranked_choices, with_boot_scripts
from gpuplan.providers.base import Instance, LaunchRequest, NodeIdentityTags, Provider


class Zoned(Provider):
    """A provider that only knows its zones (placements_for needs nothing else)."""

    name = "zoned"
    cloud = "aws"

    def zones(self, region: str) -> list[str]:
        return [f"{region}a", f"{region}b"]

    def launch(self, request: LaunchRequest) -> list[Instance]:
        raise NotImplementedError

    def describe(self, instance_ids: Any) -> list[Instance]:
        return []

    def terminate(self, instance_ids: Any) -> None:
        return None

    def list_tagged(self, run_id: str | None = None) -> list[Instance]:
        return []


def test_chosen_offer_then_same_type_elsewhere_then_next_type() -> None:
    request = LaunchRequest(run_id="r-1", name="n", command="true", run_dir="/tmp", region="r1",
                            instance_type="big", price_per_hour=Decimal(3))
    choices = [CloudChoice("r1", "big", "H100", 8, Decimal(3)), CloudChoice("r2", "small", "H100", 8, Decimal(2)),
               CloudChoice("r3", "big", "H100", 8, Decimal(4)), CloudChoice("r2", "big", "H100", 8, Decimal(5))]
    placements = placements_for(Zoned(), request, choices)
    # Zones are not listed here: failover expands each region when it reaches it (inside its error handling).
    assert [(p.region, p.zone, p.instance_type) for p in placements] == [
        ("r1", None, "big"), ("r3", None, "big"), ("r2", None, "big"), ("r2", None, "small")]
    assert placements[1].price_per_hour == Decimal(4)
    pinned = placements_for(Zoned(), LaunchRequest(**{**request.__dict__, "zones": ("r1b",)}), choices)
    assert [(p.region, p.zone) for p in pinned[:2]] == [("r1", "r1b"), ("r1", None)]  # catalog zone first


def test_ranked_choices_from_the_shipped_catalog_prefer_the_exact_gpu_count() -> None:
    choices = ranked_choices("aws", "A10G", 1, spot=False, regions=["us-east-1"])
    assert choices[0].instance_type == "g5.xlarge" and choices[0].region == "us-east-1"
    assert all(c.region == "us-east-1" for c in choices)
    exact = [c for c in choices if c.gpu_count == 1]
    assert choices[:len(exact)] == exact
    assert [c.price_per_hour for c in exact] == sorted(c.price_per_hour for c in exact)
    capped = ranked_choices("aws", "A10G", 1, spot=False, regions=["us-east-1"], max_price=Decimal("1.1"))
    assert capped and all(c.price_per_hour <= Decimal("1.1") for c in capped)


def test_boot_scripts_are_rendered_per_node_with_the_masters_address() -> None:
    request = with_boot_scripts(LaunchRequest(
        run_id="r-boot", name="it's $(risky)", command="python train.py", run_dir="/tmp", nodes=2,
        gpus_per_node=8, max_hours=1.5, secrets={"TOKEN": "s3cr3t"}, options={"argv": ["python", "train.py"]}))
    assert request.boot_script is not None and "RUN_ID=r-boot" in request.boot_script
    worker = request.options["boot_script_for"](1, "10.0.0.5")
    assert "NODE_RANK_=1" in worker and "MASTER_ADDR_=10.0.0.5" in worker and "MAX_SECONDS=5400" in worker
    assert "JOB_NAME='it'\"'\"'s $(risky)'" in worker  # quoted: inert
    assert "s3cr3t" not in repr(request)


class Tagged(Zoned):
    """A provider whose multi-node machines learn rank and master from instance tags (like AWS)."""

    boots_from_script = True
    node_identity_tags = NodeIdentityTags(rank="gpuplan:node-rank", master_addr="gpuplan:master-addr")

    def outputs_url(self, run_id: str) -> str | None:
        return f"s3://bucket/gpuplan/{run_id}"


def test_with_identity_tags_every_node_gets_one_script_that_reads_them() -> None:
    base = LaunchRequest(run_id="r-tags", name="multi", command="torchrun train.py", run_dir="/tmp", nodes=2,
                         gpus_per_node=8, options={"argv": ["torchrun", "train.py"]})
    request = with_boot_scripts(base, Tagged())
    script = request.boot_script or ""
    assert "RANK_TAG=gpuplan:node-rank" in script and "MASTER_TAG=gpuplan:master-addr" in script
    # The script adds /node-<rank> itself once it knows its rank.
    assert "STORAGE_URL=s3://bucket/gpuplan/r-tags\n" in script
    assert request.options["boot_script_for"](1, None) == script  # the same for every node
    single = with_boot_scripts(dataclasses.replace(base, nodes=1), Tagged()).boot_script or ""
    assert "RANK_TAG" not in single and "STORAGE_URL=s3://bucket/gpuplan/r-tags/node-0" in single  # as before
