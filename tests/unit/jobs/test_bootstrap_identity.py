"""A multi-node AWS node learns its rank and the master's address from instance tags at boot (IMDSv2).

The script runs for real with bash; `curl` and `aws` are recording stand-ins on PATH that answer the metadata
service's token and tag paths from a folder (a tag missing there answers 404, as IMDS does for a tag not set).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from gpuplan.jobs.bootstrap import BootPlan, render_boot_script
from gpuplan.jobs.foreign.skypilot import prelude
from gpuplan.providers.aws.boot import aws_boot_cloud

RANK_TAG = "gpuplan:node-rank"
MASTER_TAG = "gpuplan:master-addr"
STORAGE = "s3://bucket/gpuplan/r-tags"

CURL_SHIM = r'''#!PYTHON
import json, os, sys
root = os.environ["SHIM_ROOT"]
args = sys.argv[1:]
with open(os.path.join(root, "curl.calls"), "a") as fh:
    fh.write(json.dumps(args) + "\n")
url = args[-1]
if url.endswith("/latest/api/token"):
    sys.stdout.write("imds-token")
    sys.exit(0)
if "/latest/meta-data/" in url:
    if "X-aws-ec2-metadata-token: imds-token" not in args:
        sys.exit(22)  # IMDSv2 only: no token, no answer
    key = url.split("/latest/meta-data/", 1)[1].replace("/", "__")
    path = os.path.join(root, "imds", key)
    if not os.path.exists(path):
        sys.exit(22)  # curl -f on a 404
    with open(path) as fh:
        sys.stdout.write(fh.read())
'''

AWS_SHIM = r'''#!PYTHON
import json, os, shutil, sys
root = os.environ["SHIM_ROOT"]
args = sys.argv[1:]
if args[:2] == ["s3", "cp"]:
    target = os.path.join(root, "s3", args[-1][len("s3://"):])
    os.makedirs(os.path.dirname(target), exist_ok=True)
    shutil.copyfile(args[-2], target)
'''


@pytest.fixture
def shims(tmp_path: Path) -> Path:
    root = tmp_path / "shim"
    for sub in ("bin", "imds", "s3"):
        (root / sub).mkdir(parents=True)
    for name, body in (("curl", CURL_SHIM), ("aws", AWS_SHIM)):
        path = root / "bin" / name
        path.write_text(body.replace("PYTHON", sys.executable, 1))
        path.chmod(0o755)
    return root


def set_tag(shims: Path, key: str, value: str) -> None:
    (shims / "imds" / f"tags__instance__{key}").write_text(value)


def plan(base: Path, **overrides: object) -> BootPlan:
    values: dict = dict(
        run_id="r-tags", name="multi", base_dir=str(base), poweroff=False, nnodes=3, node_rank=0,
        argv=["/bin/sh", "-c", 'echo "rank=$NODE_RANK grank=$GPUPLAN_NODE_RANK r=$RANK pet=$PET_NODE_RANK '
                               'master=$MASTER_ADDR gm=$GPUPLAN_MASTER_ADDR pm=$PET_MASTER_ADDR" '
                               '> "$GPUPLAN_RUN_DIR/identity.txt"'],
        storage_url=STORAGE, rank_tag=RANK_TAG, master_tag=MASTER_TAG, identity_wait_seconds=2,
        identity_poll_seconds=1, cloud=aws_boot_cloud())
    values.update(overrides)
    return BootPlan(**values)  # type: ignore[arg-type]


def run(script: str, cwd: Path, shims: Path) -> subprocess.CompletedProcess[str]:
    path = cwd / "boot.sh"
    path.write_text(script)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PATH=f"{shims / 'bin'}:{os.environ['PATH']}", SHIM_ROOT=str(shims))
    return subprocess.run(["bash", str(path)], cwd=cwd, capture_output=True, text=True, timeout=60, env=env)


def test_the_tag_wait_is_rendered_quoted_and_shellcheck_clean(tmp_path: Path) -> None:
    script = render_boot_script(plan(tmp_path))
    assert "RANK_TAG=gpuplan:node-rank" in script and "MASTER_TAG=gpuplan:master-addr" in script
    assert 'instance_tag "$RANK_TAG"' in script and 'imds_get "tags/instance/$1"' in script  # IMDSv2, token first
    assert "X-aws-ec2-metadata-token: $token" in script
    assert "export NODE_RANK=" not in script and "export RANK=" not in script  # set once the tags are read
    assert "IDENTITY_WAIT=2" in script
    if shutil.which("shellcheck") is None:
        pytest.skip("shellcheck is not installed (scripts/test-services.sh installs it)")
    proc = subprocess.run(["shellcheck", "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout


def test_a_node_takes_its_rank_and_master_from_the_tags(tmp_path: Path, shims: Path) -> None:
    set_tag(shims, RANK_TAG, "2")
    set_tag(shims, MASTER_TAG, "10.0.1.17")
    base = tmp_path / "base"
    proc = run(render_boot_script(plan(base)), tmp_path, shims)
    assert proc.returncode == 0, (base / "boot.log").read_text()
    assert (base / "run" / "identity.txt").read_text().split() == [
        "rank=2", "grank=2", "r=2", "pet=2", "master=10.0.1.17", "gm=10.0.1.17", "pm=10.0.1.17"]
    # Its outputs go to its own rank's prefix, which gpuplan reads back.
    shipped = shims / "s3" / "bucket/gpuplan/r-tags/node-2"
    assert json.loads((shipped / "exit.json").read_text())["exit_code"] == 0


def test_a_node_whose_tags_never_come_stops_with_a_reason(tmp_path: Path, shims: Path) -> None:
    (shims / "imds" / "ami-launch-index").write_text("1")
    base = tmp_path / "base"
    proc = run(render_boot_script(plan(base)), tmp_path, shims)
    assert proc.returncode == 5
    record = json.loads((base / "run" / "exit.json").read_text())
    assert record["reason"] == "no node identity from instance tags"
    assert not (base / "run" / "identity.txt").exists()  # the job never started
    assert "after 2 s" in (base / "run" / "job.log").read_text()  # bounded wait, said in the log
    # Shipped where gpuplan looks for an untagged node: its launch index.
    assert (shims / "s3" / "bucket/gpuplan/r-tags/node-1" / "exit.json").exists()


@pytest.mark.parametrize(("rank", "master"), [("1; touch PWNED", "10.0.0.1"), ("7", "10.0.0.1"),
                                              ("1", "$(touch PWNED)")])
def test_tag_values_that_are_not_a_rank_and_an_address_are_refused(tmp_path: Path, shims: Path, rank: str,
                                                                   master: str) -> None:
    set_tag(shims, RANK_TAG, rank)
    set_tag(shims, MASTER_TAG, master)
    base = tmp_path / "base"
    proc = run(render_boot_script(plan(base)), tmp_path, shims)
    assert proc.returncode == 5
    assert not list(tmp_path.rglob("PWNED*"))


def test_without_tags_the_script_is_as_before(tmp_path: Path) -> None:
    script = render_boot_script(plan(tmp_path, rank_tag=None, master_tag=None, node_rank=1, master_addr="10.0.0.5"))
    assert "export NODE_RANK=1" in script and "MASTER_ADDR_=10.0.0.5" in script
    assert "RANK_TAG" not in script and "node_identity" not in script  # single-node scripts stay as they were
    with pytest.raises(ValueError, match="together"):
        render_boot_script(plan(tmp_path, master_tag=None))


PRELUDE = prelude(False)  # what `gpuplan launch task.yaml` puts before a SkyPilot task's run
SKY_ARGV = ["/bin/bash", "-c", PRELUDE + '\nprintf "%s\\n" "$SKYPILOT_NODE_IPS" > "$GPUPLAN_RUN_DIR/ips.txt"']


def test_every_node_gets_every_nodes_address_in_rank_order_from_the_tags(tmp_path: Path, shims: Path) -> None:
    """Issue 35: SKYPILOT_NODE_IPS on a cloud run listed only the head node; now every node lists all, rank 0
    first, from the `gpuplan:node-ips` tags (a list past 256 characters continues in `-1`)."""
    set_tag(shims, RANK_TAG, "1")
    set_tag(shims, MASTER_TAG, "10.0.1.17")
    set_tag(shims, "gpuplan:node-ips", "10.0.1.17,10.0.1.18")
    set_tag(shims, "gpuplan:node-ips-1", "10.0.1.19")
    base = tmp_path / "base"
    proc = run(render_boot_script(plan(base, argv=SKY_ARGV, node_ips_tag="gpuplan:node-ips")), tmp_path, shims)
    assert proc.returncode == 0, (base / "run" / "job.log").read_text()
    assert (base / "run" / "ips.txt").read_text().split("\n")[:3] == ["10.0.1.17", "10.0.1.18", "10.0.1.19"]


def test_a_node_ips_tag_that_is_not_addresses_is_never_run(tmp_path: Path, shims: Path) -> None:
    set_tag(shims, RANK_TAG, "1")
    set_tag(shims, MASTER_TAG, "10.0.1.17")
    set_tag(shims, "gpuplan:node-ips", "10.0.1.17,$(touch PWNED)")
    base = tmp_path / "base"
    proc = run(render_boot_script(plan(base, argv=SKY_ARGV, node_ips_tag="gpuplan:node-ips")), tmp_path, shims)
    assert proc.returncode == 0
    assert not list(tmp_path.rglob("PWNED*"))
    assert (base / "run" / "ips.txt").read_text().split() == ["10.0.1.17"]  # the head only, said in the log
    assert "is not a list of IPv4 addresses" in (base / "run" / "job.log").read_text()


def test_known_node_names_are_resolved_at_boot_and_kept_where_they_do_not_resolve(tmp_path: Path,
                                                                                   shims: Path) -> None:
    """GCP gives the nodes' internal DNS names: each is resolved on the node (bounded wait), in rank order."""
    base = tmp_path / "base"
    script = render_boot_script(plan(base, argv=SKY_ARGV, rank_tag=None, master_tag=None, node_rank=1,
                                     master_addr="localhost", node_addrs=["localhost", "no-such-node.invalid"],
                                     resolve_wait_seconds=0, nnodes=2))
    proc = run(script, tmp_path, shims)
    assert proc.returncode == 0, (base / "run" / "job.log").read_text()
    assert (base / "run" / "ips.txt").read_text().split() == ["127.0.0.1", "no-such-node.invalid"]


def test_a_single_node_lists_its_own_address(tmp_path: Path, shims: Path) -> None:
    base = tmp_path / "base"
    script = render_boot_script(plan(base, argv=SKY_ARGV, rank_tag=None, master_tag=None, nnodes=1,
                                     master_addr="10.9.8.7"))
    assert run(script, tmp_path, shims).returncode == 0
    assert (base / "run" / "ips.txt").read_text().split() == ["10.9.8.7"]
