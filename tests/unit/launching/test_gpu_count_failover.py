"""Failover keeps the spec's GPU count: a 1 x A10G job refused capacity is never sent to a 4- or 8-GPU g5.

Capacity refusals are EC2's XML error injected on the provider's launch client (support.awsmoto); the placements
are the real ones gpuplan plans from the shipped catalog.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from gpuplan.launching.failover import FailoverExhausted
from gpuplan.launching.placements import (
    larger_fallbacks,
    planned_placements,
    ranked_choices,
    start_with_failover,
)
from gpuplan.providers.aws.provider import AwsProvider
from gpuplan.providers.base import LaunchRequest

from support.awsmoto import Injector, inject

ONE_GPU_G5 = {"g5.xlarge", "g5.2xlarge", "g5.4xlarge", "g5.8xlarge", "g5.16xlarge"}  # 1 x A10G each


def request(**options: Any) -> LaunchRequest:
    return LaunchRequest(run_id="r-9a1c0un7", name="one-gpu", command="true", run_dir="/tmp/one-gpu",
                         instance_type="g5.xlarge", region="us-east-1", gpu="A10G", gpus_per_node=1,
                         price_per_hour=Decimal("1.006"), options={"regions": ["us-east-1"], **options})


def test_failover_sends_only_machines_with_the_gpus_asked_for(aws: AwsProvider,
                                                               moto_env: dict[str, str]) -> None:
    aws.launch_retry_delay = 0.0
    refused = inject(aws.launch_client("us-east-1"), "RunInstances",
                     Injector("InsufficientInstanceCapacity", "We currently do not have sufficient capacity"),
                     server=False)
    req = request(image_id=moto_env["us-east-1"])
    with pytest.raises(FailoverExhausted):
        start_with_failover(aws, req, placements=planned_placements(aws, req))
    sent = {call["InstanceType"] for call in refused.calls}
    assert sent and sent <= ONE_GPU_G5, sent  # old code: g5.12xlarge (4 x A10G) and g5.48xlarge (8 x A10G) too


def test_larger_machines_only_when_the_spec_opts_in_and_each_is_priced(aws: AwsProvider) -> None:
    plain = planned_placements(aws, request())
    assert {p.instance_type for p in plain} <= ONE_GPU_G5
    opted = planned_placements(aws, request(larger_machines=True))
    choices = ranked_choices("aws", "A10G", 1, spot=False, regions=["us-east-1"], larger=True)
    larger = larger_fallbacks(opted, choices, 1)
    assert {c.instance_type for c in larger} == {p.instance_type for p in opted} - ONE_GPU_G5 != set()
    assert all(c.gpu_count > 1 and c.price_per_hour is not None and c.price_per_hour > Decimal("5") for c in larger)
