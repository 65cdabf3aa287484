"""Issue 32 item 3, last sentence: a multi-node estimate uses the network the job will get. Through the CLI (a
separate process): `plan` estimates 5 x p4d.24xlarge (400 Gbit/s EFA) faster per GPU than 5 x a2-highgpu-8g (the
same 8 x A100 40 GB, one 100 Gbit/s NIC), and `estimate --instance-type` answers a p5.48xlarge (3,200 Gbit/s EFA)
faster than an a3-highgpu-8g (800 Gbit/s over GPUDirect-TCPX) and that slower still than a g6e.12xlarge-class
100 Gbit/s network. Before, every A100 node was estimated with p4d's network and every H100 node with p5's."""

from __future__ import annotations

from gpuplan.hardware.networks import instance_network

from support.clihelp import run_subprocess

PLAN = ("plan", "--params", "70B", "--tokens", "20B", "--gpu", "A100", "--no-spot", "--json", "--limit", "0")


def test_plan_estimates_each_type_on_its_own_network() -> None:
    result = run_subprocess(*PLAN)
    assert result.exit_code == 0, result.stderr
    by_type = {}
    for option in result.json():
        by_type.setdefault((option["instance_type"], option["nodes"]), option)
    efa, plain = by_type[("p4d.24xlarge", 5)], by_type[("a2-highgpu-8g", 5)]
    assert instance_network("p4d.24xlarge").fabric == "efa" and instance_network("a2-highgpu-8g").gbps == 100
    assert efa["tokens_per_s_per_gpu"] > 2 * plain["tokens_per_s_per_gpu"]
    assert efa["scaling_efficiency"] > 2 * plain["scaling_efficiency"]


def test_estimate_takes_the_network_of_the_instance_type() -> None:
    def speed(*extra: str) -> float:
        result = run_subprocess("estimate", "--params", "70e9", "--tokens", "1e11", "--gpu", "H100", "--nodes", "4",
                                "--json", *extra)
        assert result.exit_code == 0, result.stderr
        return float(result.json()["tokens_per_s_per_gpu"])

    p5, a3, slow = speed("--instance-type", "p5.48xlarge"), speed("--instance-type", "a3-highgpu-8g"), \
        speed("--instance-type", "g6e.12xlarge")
    assert p5 > a3 > slow
    assert speed("--instance-type", "a3-highgpu-8g", "--network-gbps", "3200") == p5  # the flag wins
    unknown = run_subprocess("estimate", "--params", "7e9", "--tokens", "1e9", "--gpu", "H100", "--nodes", "2",
                             "--instance-type",
                             "x9.huge")
    assert unknown.exit_code == 2 and "x9.huge" in unknown.stderr and "Traceback" not in unknown.stderr


def test_an_a3_edge_estimate_uses_the_per_vm_cap_google_states() -> None:
    """a3-edgegpu-8g: Google's machine table gives 400 Gbit/s per VM outside asia-south1 and
    northamerica-northeast2 (not the 600 once derived from the NICs' 800 line rate): the estimate for the type is
    the estimate on a 400 Gbit/s network."""
    def speed(*extra: str) -> float:
        result = run_subprocess("estimate", "--params", "70e9", "--tokens", "1e11", "--gpu", "H100", "--nodes", "4",
                                "--json", *extra)
        assert result.exit_code == 0, result.stderr
        return float(result.json()["tokens_per_s_per_gpu"])

    assert speed("--instance-type", "a3-edgegpu-8g") == speed("--network-gbps", "400") < speed("--network-gbps", "600")
