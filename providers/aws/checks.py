"""The AWS provider's check of a launch before anything is recorded (`Provider.check_launch`).

Refused with one line (UserError, exit 2), because each would fail only once machines bill:
- a secret over SSM's 8 KB (Advanced tier; gpuplan.providers.aws.secrets: one over 4 KB gets that tier, noted);
- the boot script over EC2's 16,384 bytes of user data even gzip-compressed (gpuplan.providers.aws.userdata);
- machines that need credentials (the run's secrets in SSM, outputs to S3) without a usable instance profile:
  none configured, one that does not exist, one without a role (gpuplan.providers.aws.iam), one whose role IAM's
  policy simulator says may not do what the machines will (gpuplan.providers.aws.role_check; "not checked" when
  the caller may not ask it);
- a configured machine image of another architecture than the instance type's (gpuplan.providers.aws.image).

What needs AWS (iam:GetInstanceProfile, the image look-up) refuses only on a definite answer (the profile does
not exist or has no role; the image's architecture is not the type's; the image parameter does not exist). Any
other error (AWS unreachable, no credentials, AccessDenied on the look-up, a type EC2 does not know here) becomes
a note and the launch goes on, its own calls failing with the real error or failover moving on; so
`gpuplan launch --dry-run` works offline. The notes say which
instance profile and which machine image (architecture) the launch uses; `details` hold the same for --json.
"""

from __future__ import annotations

from typing import Any, Protocol

from gpuplan.errors import UserError
from gpuplan.providers.aws import iam as aws_iam
from gpuplan.providers.aws import role_check, userdata
from gpuplan.providers.aws import secrets as aws_secrets
from gpuplan.providers.aws.image import ImageChoice
from gpuplan.providers.base import LaunchCheck, LaunchRequest, ProviderError


class Checked(Protocol):
    """What the check needs of the AWS provider (gpuplan.providers.aws.provider.AwsProvider)."""

    region: str
    bucket: str | None
    instance_profile: str | None

    def client(self, service: str, region: str, *, retries: int | None = None) -> Any: ...

    def image_for(self, request: LaunchRequest, region: str) -> ImageChoice: ...

def _role_permissions(provider: Checked, request: LaunchRequest, region: str, checked: aws_iam.ProfileCheck,
                      storage: str | None) -> str:
    """Refuse a role that may not do what the boot script will (gpuplan.providers.aws.role_check); a note when it
    can do it all, or when the simulator could not be asked ("not checked")."""
    if not checked.role_arn:
        return f"role {checked.role}: permissions not checked (its ARN is unknown)"
    wanted = role_check.needs(region=region, account=role_check.account_of(checked.role_arn), run_id=request.run_id,
                              secrets=list(request.secrets), bucket=provider.bucket, storage=storage)
    # Two tries at most: the answer only refines the check, and an endpoint without the API must not cost seconds.
    verdict = role_check.simulate(provider.client("iam", region, retries=1), checked.role_arn, wanted)
    if not verdict.checked:
        return f"role {checked.role}: permissions not checked (iam:SimulatePrincipalPolicy: {verdict.why})"
    if verdict.denied:
        raise UserError(role_check.describe_denied(str(checked.role), verdict.denied,
                                                   aws_iam.setup_fix(provider.bucket, storage)))
    return f"role {checked.role}: may do all {len(wanted)} thing(s) the machines need (iam:SimulatePrincipalPolicy)"


REFUSED_IMAGE = frozenset({"ArchitectureMismatch", "NoImageForArchitecture", "ParameterNotFound"})


def check_launch(provider: Checked, request: LaunchRequest) -> LaunchCheck:
    problem = userdata.too_big(userdata.compress(request.boot_script or ""))
    if problem:
        raise UserError(problem)
    for name, value in sorted(request.secrets.items()):
        problem = aws_secrets.too_big(name, value)
        if problem:
            raise UserError(problem)
    advanced = sorted(n for n, v in request.secrets.items() if aws_secrets.parameter_tier(v) == "Advanced")
    region = request.region or provider.region
    notes: list[str] = []
    details: dict[str, Any] = {}
    storage = request.options.get("run_storage_url")
    needed = aws_iam.needed_for(secrets=bool(request.secrets), bucket=provider.bucket, storage=storage)
    profile = request.options.get("instance_profile") or provider.instance_profile
    try:
        checked = aws_iam.check_profile(provider.client("iam", region), profile, needed,
                                        fix=aws_iam.setup_fix(provider.bucket, storage))
    except ProviderError as exc:
        notes.append(f"could not check the instance profile {profile}: {exc}")
    else:
        if checked.problem:
            raise UserError(checked.problem)
        if checked.name and checked.needed_for:
            notes.append(f"instance profile {checked.name} (role {checked.role}) for {' and '.join(needed)}")
            notes.append(_role_permissions(provider, request, region, checked, storage))
    if profile and needed:
        details["instance_profile"] = profile
    if advanced:
        notes.append(f"secret(s) {', '.join(advanced)} over 4 KB: stored as Advanced-tier SSM parameters "
                     f"({aws_secrets.ADVANCED_COST})")
    if request.instance_type:
        try:
            choice = provider.image_for(request, region)
        except ProviderError as exc:
            if exc.code in REFUSED_IMAGE:
                raise UserError(str(exc)) from exc
            notes.append(f"could not look up the machine image for {request.instance_type}: {exc}")
        else:
            notes.append(choice.describe(request.instance_type))
            details["machine"] = {"instance_type": request.instance_type, "architecture": choice.architecture,
                                  "image_id": choice.image_id, "image_source": choice.source}
    return LaunchCheck(notes=tuple(notes), details=details)
