"""A GPU job on a Slurm partition without (enough) GPU GRES is refused before anything is recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuplan.providers.slurm.gres import gpus_per_node, missing_gpus, most_gpus
from gpuplan.providers.slurm.provider import SlurmProvider

from support.slurmhelp import SlurmCluster


@pytest.mark.parametrize(("line", "gpus"), [
    ("gpu:4", 4), ("gpu:a100:8(S:0-1)", 8), ("gpu:a100:2,gpu:v100:2", 4), ("(null)", 0),
    ("shard:8,gpu:h100:8(S:0,1)", 8), ("mps:100", 0),
])
def test_gres_lines(line: str, gpus: int) -> None:
    assert gpus_per_node(line) == gpus


def test_the_partition_without_gpus_says_so() -> None:
    assert most_gpus("(null)\n(null)\n") == 0
    assert missing_gpus("(null)\n", 1, "cpu") == "Slurm partition cpu has no GPU GRES (sinfo %G: (null))"
    assert missing_gpus("gpu:4\n(null)\n", 8, None) == (
        "the default Slurm partition has at most 4 GPU(s) per node (sinfo %G: (null), gpu:4), not 8")
    assert missing_gpus("gpu:4\n(null)\n", 4, "mixed") is None


def test_provider_asks_sinfo_for_its_partition(tmp_path: Path) -> None:
    sinfo = tmp_path / "sinfo"
    sinfo.write_text('#!/bin/sh\necho "$@" > "$(dirname "$0")/args"\necho "(null)"\n')
    sinfo.chmod(0o755)
    provider = SlurmProvider(partition="cpu", commands={"sinfo": str(sinfo)})
    assert provider.missing_gpus(8) == "Slurm partition cpu has no GPU GRES (sinfo %G: (null))"
    assert (tmp_path / "args").read_text().split() == ["-h", "-o", "%G", "-p", "cpu"]
    assert provider.missing_gpus(0) is None
    gone = SlurmProvider(commands={"sinfo": str(tmp_path / "absent")})
    assert gone.missing_gpus(1) is None  # cannot tell: the submission says what is wrong


def test_real_cluster_gres(slurm: SlurmCluster) -> None:
    provider = SlurmProvider(slurm_conf=slurm.conf)
    assert provider.missing_gpus(slurm.gpus) is None
    why = provider.missing_gpus(slurm.gpus + 4)
    assert why is not None and f"at most {slurm.gpus} GPU(s) per node" in why


def test_image_on_a_cluster_without_a_container_runtime_is_refused(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuplan.errors import UserError
    from gpuplan.providers.base import LaunchRequest

    srun = tmp_path / "srun"  # an srun without pyxis: its help has no --container-image
    srun.write_text('#!/bin/sh\necho "Usage: srun [OPTIONS...] executable [args...]"\n')
    srun.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # no apptainer, no singularity
    provider = SlurmProvider(commands={"srun": str(srun)})
    request = LaunchRequest(run_id="r-0000000000", name="img", command="true", run_dir=str(tmp_path),
                            image="docker.io/library/busybox:1", runtime="auto")
    with pytest.raises(UserError, match=r"image docker.io/library/busybox:1: the cluster has no container runtime "
                                        r"\(apptainer, singularity, pyxis\); .*runtime: process"):
        provider.check_launch(request)
    assert provider.check_launch(LaunchRequest(**{**request.__dict__, "runtime": "process"})).notes == ()
    apptainer = tmp_path / "apptainer"
    apptainer.write_text("#!/bin/sh\nexit 0\n")
    apptainer.chmod(0o755)
    assert provider.check_launch(request).notes == ("container: docker.io/library/busybox:1 with apptainer",)
