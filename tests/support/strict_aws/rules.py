"""The EC2 request rules moto does not enforce, each a function that returns the documented error or None.

Every rule names its documentation; where AWS documents the rule but not the exact message, the message is the one
observed on real EC2 (sources in /work/notes/cloud_rules.md at the time of writing, quoted next to the rule).
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from .wire import QueryRequest, Reply, ec2_error, tag_groups

# ---- ClientToken ------------------------------------------------------------------------------------------------

# "A client token is a unique, case-sensitive string of up to 64 ASCII characters."
# https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html (and RunInstances' ClientToken:
# "Constraints: Maximum 64 ASCII characters", https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_RunInstances.html)
CLIENT_TOKEN_MAX = 64


def check_client_token(req: QueryRequest) -> Reply | None:
    """A token over 64 characters or not ASCII. What EC2 answers is not documented; the errors page documents
    `InvalidClientToken` "The specified client token is not valid."
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html), which the layer uses."""
    token = req.params.get("ClientToken")
    if token is None:
        return None
    if len(token) > CLIENT_TOKEN_MAX or not token.isascii():
        return ec2_error("InvalidClientToken", "The specified client token is not valid: a client token is at most "
                         f"{CLIENT_TOKEN_MAX} ASCII characters (got {len(token)})")
    return None


# Parameters that may differ between two requests with one token: "one or more of the parameters are different,
# other than the Region or Availability Zone" (ec2-api-idempotency.html). The zone is part of the idempotency key
# instead (zonal idempotency), the region is the key's region.
_NOT_COMPARED = {"Action", "Version", "ClientToken", "Placement.AvailabilityZone", "Placement.AvailabilityZoneId"}


def comparable(params: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in params.items() if k not in _NOT_COMPARED}


def idempotent_mismatch() -> Reply:
    """"IdempotentParameterMismatch" — "The request uses the same client token as a previous, but non-identical
    request." (errors-overview.html; ec2-api-idempotency.html)."""
    return ec2_error("IdempotentParameterMismatch", "The client token you have provided is associated with a "
                     "resource that is already deleted or was created with different parameters. Do not reuse a "
                     "client token with different requests, unless the requests are identical.")


def idempotent_terminated() -> Reply:
    """"IdempotentInstanceTerminated" — "The request to launch an instance uses the same client token as a previous
    request for which the instance has been terminated." (errors-overview.html)."""
    return ec2_error("IdempotentInstanceTerminated", "The request to launch an instance uses the same client token "
                     "as a previous request for which the instance has been terminated.")


# ---- user data --------------------------------------------------------------------------------------------------

# "User data is limited to 16 KB, in raw form, before it is base64-encoded."
# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html
USER_DATA_MAX = 16384


def check_user_data(req: QueryRequest) -> Reply | None:
    """Raw (base64-decoded) user data over 16,384 bytes -> InvalidParameterValue "User data is limited to 16384
    bytes" (HTTP 400; message observed on RunInstances, e.g. FINRAOS/herd#393). gzip-compressed user data is bytes
    like any other: cloud-init decompresses it on the instance (https://help.ubuntu.com/community/CloudInit "Gzip
    Compressed Content"), and the limit counts the compressed bytes. Not base64 at all -> InvalidParameterValue
    "Invalid BASE64 encoding of user data." (EC2's wording; the doc: "User data must be base64-encoded")."""
    encoded = req.params.get("UserData")
    if encoded is None:
        return None
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return ec2_error("InvalidParameterValue", "Invalid BASE64 encoding of user data.")
    if len(raw) > USER_DATA_MAX:
        return ec2_error("InvalidParameterValue", f"User data is limited to {USER_DATA_MAX} bytes")
    return None


# ---- tags -------------------------------------------------------------------------------------------------------

# https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions: "Maximum number of tags per
# resource – 50", "Maximum key length – 128 Unicode characters in UTF-8", "Maximum value length – 256 Unicode
# characters in UTF-8", "The aws: prefix is reserved for AWS use ... Tags with the aws: prefix do not count against
# your tags per resource limit."
TAGS_MAX, TAG_KEY_MAX, TAG_VALUE_MAX = 50, 128, 256


def check_tags(req: QueryRequest) -> Reply | None:
    """Each set of tags of the request (TagSpecification.N, CreateTags' Tag.N). Codes from the errors page
    (errors-overview.html): `InvalidTagKey.Malformed` "Tag keys cannot be empty or null, and cannot start with aws:",
    `TagLimitExceeded`; over-long values: InvalidParameterValue "Tag value exceeds the maximum length of 256
    characters" (observed, iriusrisk/GoCD-EC2-Elastic-Agent-Plugin#24); keys: the same form for 128."""
    for kind, tags in tag_groups(req.params):
        if kind == "CreateTags" and req.action != "CreateTags":  # DeleteTags' Tag.N name tags to remove
            continue
        for tag in tags:
            if not tag.key or tag.key.lower().startswith("aws:"):
                return ec2_error("InvalidTagKey.Malformed", f"Tag key '{tag.key}' is invalid: tag keys cannot be "
                                 "empty or null, and cannot start with aws:")
            if len(tag.key) > TAG_KEY_MAX:
                return ec2_error("InvalidParameterValue",
                                 f"Tag key exceeds the maximum length of {TAG_KEY_MAX} characters")
            if len(tag.value) > TAG_VALUE_MAX:
                return ec2_error("InvalidParameterValue",
                                 f"Tag value exceeds the maximum length of {TAG_VALUE_MAX} characters")
        if len(tags) > TAGS_MAX:
            return ec2_error("TagLimitExceeded", "The maximum number of Tags for a resource has been reached.")
    return None


# ---- AMI and architecture ---------------------------------------------------------------------------------------


def ami_not_found(image_id: str) -> Reply:
    """`InvalidAMIID.NotFound` — "The specified AMI doesn't exist. Check the AMI ID, and ensure that you specify the
    AWS Region in which the AMI is located" (errors-overview.html). moto launches unknown AMIs unless
    MOTO_ENABLE_AMI_VALIDATION is set."""
    return ec2_error("InvalidAMIID.NotFound", f"The image id '[{image_id}]' does not exist")


def check_architecture(image: dict[str, Any], instance_type: dict[str, Any]) -> Reply | None:
    """The AMI's Architecture (DescribeImages) must be one of the type's ProcessorInfo.SupportedArchitectures
    (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ProcessorInfo.html). EC2 answers a mismatch with
    InvalidParameterValue, HTTP 400, the instance type's architecture first (observed verbatim, skypilot#6315,
    aws/eks-anywhere-build-tooling#2158)."""
    supported = list(instance_type.get("ProcessorInfo", {}).get("SupportedArchitectures", []))
    arch = image.get("Architecture")
    if not supported or not arch or arch in supported:
        return None
    type_arch = next((a for a in supported if a != "i386"), supported[0])
    return ec2_error("InvalidParameterValue", f"The architecture '{type_arch}' of the specified instance type does "
                     f"not match the architecture '{arch}' of the specified AMI. Specify an instance type and an AMI "
                     "that have matching architectures, and try again. You can use 'describe-instance-types' or "
                     "'describe-images' to discover the architecture of the instance type or AMI.")


# ---- errors a test can inject -----------------------------------------------------------------------------------

# Code -> (HTTP status, message template). Meanings from errors-overview.html; InsufficientInstanceCapacity and
# RequestLimitExceeded are listed there as *server* errors ("accompanied by a 500-series HTTP response code") —
# ICE is observed as HTTP 500 (nib-health-funds/hammertime#29), which botocore's retry handler retries; the messages
# are the forms seen on real accounts. {type}, {zone}, {region}, {others} are filled in per request.
INJECTABLE: dict[str, tuple[int, str]] = {
    "InsufficientInstanceCapacity": (500, "We currently do not have sufficient {type} capacity in the Availability "
                                     "Zone you requested ({zone}). Our system will be working on provisioning "
                                     "additional capacity. You can currently get {type} capacity by not specifying "
                                     "an Availability Zone in your request or choosing {others}."),
    "InstanceLimitExceeded": (400, "You have requested more instances than your current instance limit allows for "
                              "the specified instance type. Please visit http://aws.amazon.com/contact-us/ec2-request "
                              "to request an adjustment to this limit."),
    "VcpuLimitExceeded": (400, "You have requested more vCPU capacity than your current vCPU limit of 0 allows for "
                          "the instance bucket that the specified instance type belongs to. Please visit "
                          "http://aws.amazon.com/contact-us/ec2-request to request an adjustment to this limit."),
    "MaxSpotInstanceCountExceeded": (400, "Max spot instance count exceeded"),
    "Unsupported": (400, "Your requested instance type ({type}) is not supported in your requested Availability Zone "
                    "({zone}). Please retry your request by not specifying an Availability Zone or choosing "
                    "{others}."),
    "InvalidParameterValue": (400, "Invalid value for parameter (injected by the test)"),
    "InvalidParameterCombination": (400, "The parameter combination is not supported (injected by the test)"),
    "InvalidAMIID.NotFound": (400, "The image id '[{image}]' does not exist"),
    "OptInRequired": (401, "You are not subscribed to this service. Please go to http://aws.amazon.com to subscribe."),
    "AuthFailure": (401, "AWS was not able to validate the provided access credentials"),
    "UnauthorizedOperation": (403, "You are not authorized to perform this operation."),
    "VPCIdNotSpecified": (400, "No default VPC for this user. GroupName is only supported for EC2-Classic and "
                          "default VPC."),
    "MissingInput": (400, "No subnets found for the default VPC '{vpc}'. Please specify a subnet."),
    "InvalidInput": (400, "No default subnet for availability zone: '{zone}'."),
    "RequestLimitExceeded": (503, "Request limit exceeded."),
    "InsufficientFreeAddressesInSubnet": (400, "There are not enough free addresses in subnet to satisfy the "
                                          "requested number of instances."),
}
