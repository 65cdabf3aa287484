"""A strict AWS conformance layer: an HTTP server on 127.0.0.1 in front of a moto server that refuses, with EC2's
real error code, XML body and HTTP status, the requests real AWS refuses and moto accepts.

Why: moto is lenient (no ClientToken idempotency, no user-data limit, no AMI/instance-type architecture check, no
placement groups, no region opt-in, ...), so a test that passes on plain moto is no evidence the code works on a real
account. The contract is the documented AWS behaviour; each rule below cites it next to the code that enforces it.
A request that breaks no rule is forwarded to moto unchanged and moto's answer is returned as it is, except where
moto's answer is itself not EC2's: Placement.AvailabilityZoneId (moto ignores it) is forwarded as the zone's name;
RegisterImage's Architecture (moto drops it) is remembered and added to DescribeImages; Placement.GroupName (moto
drops it) is shown on the group's instances; an unknown IamInstanceProfile (moto: IAM's NoSuchEntity, 404) becomes
EC2's InvalidParameterValue, 400; DescribeRegions and DescribeAvailabilityZones are answered by the layer
(real opt-in states, Local Zones).

Rules (module that enforces each; all error codes from https://docs.aws.amazon.com/AWSEC2/latest/APIReference/
errors-overview.html unless noted):
1. Zones (zones.py, layer.resolve_zone): Placement.AvailabilityZone must be one of the account's zone NAMES; a zone
   ID (use1-az4) or unknown name -> InvalidParameterValue "Invalid availability zone: [use1-az4]", 400.
   Placement.AvailabilityZoneId takes an ID (not both: InvalidParameterCombination). Local/Wavelength Zones
   (ZoneType != availability-zone, modelled by the layer: us-east-1-atl-2a / use1-atl2-az1 and a Wavelength Zone)
   are listed only with AllAvailabilityZones until opted in (ModifyAvailabilityZoneGroup) and refuse RunInstances
   while not opted in. DescribeSubnets' `availability-zone` filter with a zone ID matches nothing (no error), as
   moto does. https://docs.aws.amazon.com/global-infrastructure/latest/regions/az-ids.html ,
   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Placement.html ,
   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_AvailabilityZone.html ,
   https://docs.aws.amazon.com/local-zones/latest/ug/how-local-zones-work.html
2. Opt-in regions (zones.py, layer.disabled_region): any call signed for an opt-in region the account has not
   enabled (`layer.enable_region(...)`) -> EC2 AuthFailure, HTTP 401 (STS InvalidClientTokenId 403; SSM/JSON
   UnrecognizedClientException 400; S3 InvalidAccessKeyId 403). DescribeRegions answers from an enabled region with
   the real OptInStatus. https://docs.aws.amazon.com/accounts/latest/reference/manage-acct-regions.html ,
   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeRegions.html
3. ClientToken (rules.py, layer.run_instances): at most 64 ASCII characters (InvalidClientToken); same token + same
   parameters -> the first answer again, no new instance; different parameters -> IdempotentParameterMismatch;
   instances of the token terminated -> IdempotentInstanceTerminated; zonal idempotency when a zone or subnet is
   given (the same token launches again in another zone), regional otherwise.
   https://docs.aws.amazon.com/ec2/latest/devguide/ec2-api-idempotency.html
4. UserData (rules.py): raw (base64-decoded) over 16,384 bytes -> InvalidParameterValue "User data is limited to
   16384 bytes"; gzip is fine (the limit counts the compressed bytes).
   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-add-user-data.html
5. AMI (rules.py): unknown AMI -> InvalidAMIID.NotFound; the AMI's Architecture must be in the type's
   ProcessorInfo.SupportedArchitectures -> InvalidParameterValue "The architecture 'arm64' of the specified instance
   type does not match the architecture 'x86_64' of the specified AMI. ...".
   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ProcessorInfo.html
6. Tags (rules.py), on every EC2 action: <= 50 per resource (TagLimitExceeded), key <= 128 / value <= 256 characters
   (InvalidParameterValue), no empty key or `aws:` prefix (InvalidTagKey.Malformed).
   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions
7. Placement groups (placement.py): Create/Describe/DeletePlacementGroup answered by the layer (moto_server: HTTP
   500), InvalidPlacementGroup.Duplicate / .Unknown / .InUse; RunInstances' Placement.GroupName must exist; a cluster
   group keeps all its instances in one zone. https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-groups.html
8. Injected errors (rules.INJECTABLE, layer.inject): queue InsufficientInstanceCapacity (500, a server error: botocore
   retries it), InstanceLimitExceeded, VcpuLimitExceeded, MaxSpotInstanceCountExceeded, Unsupported,
   InvalidParameterValue, InvalidParameterCombination, InvalidAMIID.NotFound, OptInRequired, AuthFailure (401),
   VPCIdNotSpecified, MissingInput/InvalidInput (no default subnet), RequestLimitExceeded (503), ... per region, zone
   (name or ID), instance type, market ("spot"/"on-demand"), `times`; status and message overridable.
9. Checks on launched instances (checks.py; EC2 accepts these launches, the job fails on the machine):
   reachable(a, b) evaluates security groups like EC2 (new group: no inbound, all outbound; a self-referencing rule
   or the source's address is needed), efa_ready(i) (all traffic in and out to the group itself),
   credentials_on_instance(i) (an instance profile), boot_has_credentials_it_needs(i) (user data that reads SSM or
   ships to s3:// needs one). https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/security-group-rules-reference.html ,
   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html ,
   https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/iam-roles-for-amazon-ec2.html
10. Spot price history (spot_prices.py): DescribeSpotPriceHistory is answered from what the test seeded
   (`layer.seed_spot_history`), with the last change before StartTime, newest first, MaxResults 5..1000 paged by
   NextToken, StartTime older than 90 days refused; unseeded types/zones have no history (moto invents ~$0.00001/h).
   https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeSpotPriceHistory.html

11-14. Account rules (account.py; off until a test sets them on `layer.account`, except the SSM tiers): a new
   instance profile unknown to EC2 for a few RunInstances (IAM propagation), SSM parameter tiers (4 KB Standard,
   8 KB Advanced), iam:SimulatePrincipalPolicy answered from the role's policies (moto lacks it), and the caller's
   own IAM policy (every call outside it refused as each service refuses it). Docs cited there.
15. Network interfaces (efa.py): EFA-only never primary, cards and interface types the type has, at most its EFA
   devices, one interface per (card, device), a public address only with one IP interface.

Use from a test (the `strict_aws` fixture, tests/support/strict_aws/fixture.py; tests/conftest.py registers it):

    def test_launch(strict_aws):
        ec2 = strict_aws.client("ec2", "us-east-1")           # in-process, through the layer, no retries
        strict_aws.layer.inject("InsufficientInstanceCapacity", zone="use1-az6", times=1)
        strict_aws.layer.enable_region("ap-east-1")           # opt the account in to a region
        ...
        subprocess.run(["gpuplan", ...], env={**os.environ, **strict_aws.env()})   # the CLI through the layer
        assert strict_aws.reachable(rank1_id, rank0_id, port=29500)

The fixture already points this test's environment (AWS_ENDPOINT_URL, fake keys, GPUPLAN_AWS_IMAGE_ID: a GPU-like
x86_64 AMI registered in us-east-1 and us-west-2, `strict_aws.amis`) at the layer; `strict_aws.moto_client(...)`
bypasses the layer (plain moto). `strict_aws.layer.requests` records every request the layer saw.
Injected errors match only requests that name a zone (Placement or SubnetId) when `zone=` is given. moto's backends
are per process: a test module should not use `strict_aws` and `moto_server` together (each reset empties both).
"""

from .layer import StrictAws
from .model import OPT_IN_REGIONS, Injection, LocalZone

__all__ = ["OPT_IN_REGIONS", "Injection", "LocalZone", "StrictAws"]
