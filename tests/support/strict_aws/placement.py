"""Placement groups, which moto does not implement (moto_server answers CreatePlacementGroup with HTTP 500
NotImplementedError and ignores Placement.GroupName in RunInstances).

Docs: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-groups.html — "A cluster placement group is a
logical grouping of instances within a single Availability Zone." / "A cluster placement group can't span multiple
Availability Zones." ; DeletePlacementGroup: "You must terminate all instances in the placement group before you can
delete the placement group." (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DeletePlacementGroup.html).
Error codes from https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html:
`InvalidPlacementGroup.Duplicate` ("already exists in that AWS Region"), `InvalidPlacementGroup.Unknown` ("cannot be
found"), `InvalidPlacementGroup.InUse` ("If you are trying to delete a placement group, ensure that its instances
have been terminated.").
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from .model import PlacementGroup
from .wire import QueryRequest, Reply, Tag, XmlNode, ec2_error, ec2_response, tag_groups, tag_set
from .zones import filters

STRATEGIES = {"cluster", "spread", "partition"}


def unknown_group(name: str) -> Reply:
    return ec2_error("InvalidPlacementGroup.Unknown", f"The Placement Group '{name}' is unknown.")


def _xml(group: PlacementGroup) -> XmlNode:
    return XmlNode({"groupName": group.name, "state": "available", "strategy": group.strategy,
                    "partitionCount": group.partition_count, "groupId": group.group_id,
                    "spreadLevel": group.spread_level,
                    "groupArn": f"arn:aws:ec2:{group.region}:123456789012:placement-group/{group.name}",
                    "tagSet": tag_set(Tag(k, v) for k, v in group.tags)})


def create(req: QueryRequest, groups: dict[str, PlacementGroup]) -> Reply:
    name = req.params.get("GroupName", "")
    strategy = req.params.get("Strategy", "")
    if not name:
        return ec2_error("MissingParameter", "The request must contain the parameter groupName")
    if strategy and strategy not in STRATEGIES:
        return ec2_error("InvalidParameterValue", f"Value ({strategy}) for parameter strategy is invalid.")
    if name in groups:
        return ec2_error("InvalidPlacementGroup.Duplicate", f"The Placement Group '{name}' already exists.")
    tags = [(t.key, t.value) for kind, found in tag_groups(req.params) if kind == "placement-group" for t in found]
    count = req.params.get("PartitionCount")
    group = PlacementGroup(name=name, group_id="pg-" + secrets.token_hex(8)[:17], strategy=strategy or "cluster",
                           region=req.region, tags=tags, partition_count=int(count) if count else None,
                           spread_level=req.params.get("SpreadLevel"))
    groups[name] = group
    return ec2_response("CreatePlacementGroup", **{"return": True}, placementGroup=_xml(group))


def describe(req: QueryRequest, groups: dict[str, PlacementGroup]) -> Reply:
    names, ids = req.indexed("GroupName"), req.indexed("GroupId")
    for name in names:
        if name not in groups:
            return unknown_group(name)
    chosen = [g for g in groups.values()
              if (not names or g.name in names) and (not ids or g.group_id in ids)]
    for fname, values in filters(req).items():
        if fname.startswith("tag:"):
            key = fname[4:]
            chosen = [g for g in chosen if any(k == key and v in values for k, v in g.tags)]
        elif fname == "tag-key":
            chosen = [g for g in chosen if any(k in values for k, _ in g.tags)]
        else:
            field = {"group-name": "name", "strategy": "strategy", "group-arn": "group_id"}.get(fname)
            if fname == "state":
                chosen = [g for g in chosen if "available" in values]
            elif field:
                chosen = [g for g in chosen if getattr(g, field) in values]
    return ec2_response("DescribePlacementGroups", placementGroupSet=[_xml(g) for g in chosen])


def delete(req: QueryRequest, groups: dict[str, PlacementGroup],
           instances: Callable[[list[str]], list[dict[str, Any]]]) -> Reply:
    """Refuse while an instance launched into the group is in any state but terminated (shutting-down still blocks:
    the doc asks for terminated instances)."""
    name = req.params.get("GroupName", "")
    group = groups.get(name)
    if group is None:
        return unknown_group(name)
    live = [i for i in instances(group.instance_ids) if i["State"]["Name"] != "terminated"]
    if live:
        return ec2_error("InvalidPlacementGroup.InUse", f"The placement group '{name}' is in use and may not be "
                         "deleted.")
    del groups[name]
    return ec2_response("DeletePlacementGroup", **{"return": True})


def wrong_zone(group: PlacementGroup, zone: str) -> Reply:
    """A cluster group's instances are all in one zone ("can't span multiple Availability Zones", doc above). EC2's
    message for the attempt is not documented; the code is the generic invalid-value one."""
    return ec2_error("InvalidParameterValue", f"The placement group '{group.name}' is in Availability Zone "
                     f"'{group.zone}' and cannot launch instances in '{zone}': a cluster placement group can't span "
                     "multiple Availability Zones.")
