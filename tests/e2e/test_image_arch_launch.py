"""Launch offers only machines of an architecture the job's image is published for (issue 31, item 3).

The image's platforms come from a real registry on 127.0.0.1 (support.registry: Debian's docker-registry); the
launch is the CLI in a child process, an AWS dry run (offline: the conftest points the SDK at a closed port). With
a small workload the cheapest machine is a Graviton g5g (arm64, T4G): before the fix an amd64-only image was
planned onto it, and `docker pull` would fail at boot on a machine already billed.
"""

from __future__ import annotations

from pathlib import Path

from support.clihelp import Result, run_subprocess
from support.registry import serve_registry

SPEC = """name: arch-{name}
image: {image}
{arch}command: python train.py
resources:
  clouds: [aws]
workload:
  model: gpt2
  tokens: 1e6
"""
ARM64_TYPES = ("g5g.",)  # the catalog's arm64 GPU family (ProcessorInfo.SupportedArchitectures: arm64)


def dry_run(tmp_path: Path, name: str, image: str, arch: str = "", *, lookup: bool = True) -> Result:
    path = tmp_path / f"{name}.yaml"
    path.write_text(SPEC.format(name=name, image=image, arch=f"arch: {arch}\n" if arch else ""))
    env = {"GPUPLAN_AWS_INSTANCE_PROFILE": "gpuplan-test-profile"}
    if lookup:
        env["GPUPLAN_REGISTRY_ENDPOINT"] = ""  # ask the image's own registry (the conftest closes it otherwise)
    return run_subprocess("launch", str(path), "--dry-run", "--json", env=env)


def test_only_machines_the_image_runs_on(tmp_path: Path) -> None:
    with serve_registry(tmp_path / "registry") as (registry, _):
        registry.push_image("pytorch/pytorch", "2.4.0-cuda12.1-cudnn9-runtime", ["amd64"])
        registry.push_image("team/multi", "1", ["amd64", "arm64"], attestation=True)
        amd64_only = f"{registry.host}/pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
        single = dry_run(tmp_path, "single", amd64_only)
        multi = dry_run(tmp_path, "multi", f"{registry.host}/team/multi:1")
        wrong = dry_run(tmp_path, "wrong", amd64_only, arch="arm64")
    assert single.exit_code == 0, single.stderr
    assert not single.json()["instance_type"].startswith(ARM64_TYPES)  # old code: g5g.xlarge
    assert single.json()["image_architectures"] == ["amd64"]
    assert f"image {amd64_only}: linux/amd64 (from {registry.host}); machines of amd64 only" in single.stderr
    assert multi.exit_code == 0, multi.stderr
    assert multi.json()["image_architectures"] == ["amd64", "arm64"]  # both offered: the planner picks
    assert wrong.exit_code == 2 and "Traceback" not in wrong.stderr
    assert (f"the spec says arch: arm64, but image {amd64_only} is published for linux/amd64 only"
            in wrong.stderr)


def test_an_unreachable_registry_means_amd64_unless_the_spec_says_arm64(tmp_path: Path) -> None:
    image = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
    assumed = dry_run(tmp_path, "assumed", image, lookup=False)
    arm = dry_run(tmp_path, "arm", image, arch="arm64", lookup=False)
    assert assumed.exit_code == 0 and arm.exit_code == 0, assumed.stderr + arm.stderr
    assert not assumed.json()["instance_type"].startswith(ARM64_TYPES)
    assert "platforms unknown" in assumed.stderr and "assuming linux/amd64" in assumed.stderr
    assert arm.json()["instance_type"].startswith(ARM64_TYPES)
    assert "assuming linux/arm64 as the spec says (arch:)" in arm.stderr
