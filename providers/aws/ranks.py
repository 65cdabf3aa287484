"""Node ranks and the master address of a multi-node run, as instance tags the boot script reads from IMDS.

All nodes start in one RunInstances call (a cluster placement group wants one request), so no node's boot script
can know rank 0's address in advance. EC2 answers RunInstances with every instance's `AmiLaunchIndex` (0..n-1 in
the request) and `PrivateIpAddress`; gpuplan then tags each instance with its rank (= its launch index) and all of
them with rank 0's private address (CreateTags). The launch enables instance tags in the metadata service
(`InstanceMetadataTags: enabled`), and the boot script waits for both tags at
`http://169.254.169.254/latest/meta-data/tags/instance/<key>` with an IMDSv2 token
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/work-with-tags-in-IMDS.html). Tag keys there may hold only
letters, digits and `+ - = . , _ : @` (no `/`, no spaces): `gpuplan:node-rank` and `gpuplan:master-addr` fit.
No IAM is needed on the machine for this.

Every node's private address, rank order, goes the same way (`gpuplan:node-ips`: GPUPLAN_NODE_IPS, SkyPilot's
SKYPILOT_NODE_IPS; gpuplan.jobs.boot_node_ips), comma-separated; a tag value holds at most 256 characters
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions), so a longer list continues in
`gpuplan:node-ips-1`, `-2`, ... All of a machine's tags go in one CreateTags call, so a node that sees its rank tag
also sees the list.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpuplan.providers.aws.rules import TAG_NODE_RANK, map_client_error
from gpuplan.providers.base import Instance, NodeIdentityTags, ProviderError

TAG_MASTER_ADDR = "gpuplan:master-addr"
TAG_NODE_IPS = "gpuplan:node-ips"
TAG_VALUE_MAX = 256
IDENTITY_TAGS = NodeIdentityTags(rank=TAG_NODE_RANK, master_addr=TAG_MASTER_ADDR, node_ips=TAG_NODE_IPS)


def node_ips_tags(addresses: Sequence[str]) -> dict[str, str]:
    """The addresses, comma-separated, in as many tags as 256-character values need: `gpuplan:node-ips`, then
    `gpuplan:node-ips-1`, ..."""
    chunks: list[str] = []
    for addr in addresses:
        if chunks and len(chunks[-1]) + 1 + len(addr) <= TAG_VALUE_MAX:
            chunks[-1] += f",{addr}"
        else:
            chunks.append(addr)
    return {(TAG_NODE_IPS if i == 0 else f"{TAG_NODE_IPS}-{i}"): chunk for i, chunk in enumerate(chunks)}


def tag_ranks(ec2: Any, instances: Sequence[Instance], private_ip: Mapping[str, str], region: str) -> list[Instance]:
    """Tag each node with its rank and all with rank 0's private address; only what is missing (a retried launch
    after a crash between RunInstances and CreateTags finishes the job). Returns the nodes, rank order."""
    ordered = sorted(instances, key=lambda i: i.node_rank)
    if not ordered:
        return []
    master = private_ip.get(ordered[0].instance_id) or ordered[0].tags.get(TAG_MASTER_ADDR)
    if not master:
        raise ProviderError(f"node 0 ({ordered[0].instance_id}) has no private address to give the other nodes",
                            code="NoMasterAddress", region=region)
    addresses = [private_ip.get(i.instance_id) or "" for i in ordered]
    # Every address known (a retried launch in a new process may not have them: then the tags already there stay).
    ips = node_ips_tags(addresses) if all(addresses) else {}
    for inst in ordered:
        wanted = {TAG_NODE_RANK: str(inst.node_rank), TAG_MASTER_ADDR: master, **ips}
        if all(inst.tags.get(k) == v for k, v in wanted.items()):
            continue
        try:
            ec2.create_tags(Resources=[inst.instance_id], Tags=[{"Key": k, "Value": v} for k, v in wanted.items()])
        except Exception as exc:
            raise map_client_error(exc, region=region, zone=inst.zone) from exc
        inst.tags.update(wanted)
    return ordered
