"""What EC2 holds for a run, as the AWS page's example shows it: each instance found by the run's tag, with its
type, zone, market, metadata options and tags, its volumes' tags and its shutdown behaviour.

It is boto3's own view (describe_instances / describe_volumes / describe_instance_attribute), not gpuplan's, so the
page shows what gpuplan asked EC2 for. Endpoint and credentials come from the environment (AWS_ENDPOINT_URL: the
docs' moto server).

    python3 scripts/docsite/show_ec2_run.py RUN_ID [--region us-east-1]
"""

from __future__ import annotations

import argparse

import boto3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_id")
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args()
    ec2 = boto3.client("ec2", region_name=args.region)
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "tag:gpuplan:run-id", "Values": [args.run_id]}])
    for page in pages:
        for reservation in page["Reservations"]:
            for inst in reservation["Instances"]:
                _show(ec2, inst)
    return 0


def _show(ec2: boto3.client, inst: dict) -> None:  # type: ignore[valid-type]
    market = inst.get("InstanceLifecycle", "on-demand")
    tokens = inst.get("MetadataOptions", {}).get("HttpTokens")
    print(f"{inst['InstanceId']} {inst['InstanceType']} {inst['Placement']['AvailabilityZone']} {market} "
          f"HttpTokens={tokens}")
    for tag in sorted(inst.get("Tags", []), key=lambda t: t["Key"]):
        print(f"   {tag['Key']} = {tag['Value']}")
    volume_ids = [m["Ebs"]["VolumeId"] for m in inst.get("BlockDeviceMappings", []) if "Ebs" in m]
    if volume_ids:
        for vol in ec2.describe_volumes(VolumeIds=volume_ids)["Volumes"]:
            keys = ", ".join(sorted(t["Key"] for t in vol.get("Tags", [])))
            print(f"{vol['VolumeId']} tags: {keys}")
    attr = ec2.describe_instance_attribute(InstanceId=inst["InstanceId"],
                                           Attribute="instanceInitiatedShutdownBehavior")
    print(f"shutdown behaviour: {attr['InstanceInitiatedShutdownBehavior']['Value']}")


if __name__ == "__main__":
    raise SystemExit(main())
