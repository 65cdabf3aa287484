"""Which AMI a machine boots: the Deep Learning Base AMI of the instance type's architecture.

EC2 refuses an AMI whose architecture differs from the instance type's (observed `InvalidParameterValue` "The
architecture 'arm64' of the specified instance type does not match the architecture 'x86_64' of the specified
AMI"; the fields are ProcessorInfo.SupportedArchitectures,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_ProcessorInfo.html, and DescribeImages `Architecture`,
https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_Image.html). The catalog has arm64 offers (g5g), so
gpuplan picks the image per architecture:

- by default, AWS's public SSM parameter of the Deep Learning Base OSS NVIDIA Driver GPU AMI (Ubuntu 22.04) for
  that architecture. The x86_64 and arm64 names are the ones AWS's DLAMI release notes document for querying the
  AMI id ("Deep Learning Base OSS Nvidia Driver GPU AMI (Ubuntu 22.04)" and "Deep Learning ARM64 Base OSS Nvidia
  Driver GPU AMI (Ubuntu 22.04)", https://docs.aws.amazon.com/dlami/latest/devguide/ — the ARM64 notes list
  `supported_ec2_instances: G5g, P6e-GB200`); gpuplan's research could not read the live pages, so the arm64
  name follows the x86_64 one that gpuplan has used, with `arm64` in place of `x86_64` (as AWS's own HPC recipes
  use it): UNVERIFIED against a live account — `aws ssm get-parameter --name ...` checks it;
- a configured image (image_id, or ami_parameter) is the user's choice for every type: its architecture is read
  with DescribeImages and a type it cannot boot is refused with one clear line before RunInstances.

The job's container image must run on that architecture too, which gpuplan cannot know without asking the
registry: so the launch says which architecture and image the machines get (a line the user sees before anything
is started, and `machine` in --json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuplan.providers.aws.instance_types import TypeInfo
from gpuplan.providers.aws.rules import DEFAULT_AMI_PARAMETER, map_client_error
from gpuplan.providers.base import ProviderError

# The DLAMI parameter per architecture (see the module docstring: the arm64 name is unverified).
DLAMI_PARAMETERS = {
    "x86_64": DEFAULT_AMI_PARAMETER,
    "arm64": "/aws/service/deeplearning/ami/arm64/base-oss-nvidia-driver-gpu-ubuntu-22.04/latest/ami-id",
}


@dataclass(frozen=True)
class ImageChoice:
    """The AMI for one instance type, and where it came from (shown to the user)."""

    image_id: str
    architecture: str  # the machine's architecture (the type's)
    source: str  # "parameter NAME" or "image_id"

    def describe(self, instance_type: str) -> str:
        return f"machine image {self.image_id} ({self.architecture}, from {self.source}) for {instance_type}"


def own_parameter(configured: str | None) -> str | None:
    """The user's own AMI parameter (one image for every instance type), or None: each type gets the DLAMI of its
    architecture."""
    return configured if configured and configured != DEFAULT_AMI_PARAMETER else None


def boots(info: TypeInfo, architecture: str | None) -> bool:
    """Can the type boot an image of this architecture? Unknown on either side counts as yes (EC2 says at launch)."""
    return not architecture or not info.architectures or architecture in info.architectures


def parameter_for(architecture: str, configured: str | None) -> str:
    """The SSM parameter to read: the configured one, else the DLAMI of the architecture."""
    own = own_parameter(configured)
    if own:
        return own
    try:
        return DLAMI_PARAMETERS[architecture]
    except KeyError:
        raise ProviderError(f"no default machine image for the {architecture} architecture; set "
                            "GPUPLAN_AWS_IMAGE_ID or GPUPLAN_AWS_AMI_PARAMETER",
                            code="NoImageForArchitecture") from None


def read_parameter(ssm: Any, name: str, region: str) -> str:
    try:
        return str(ssm.get_parameter(Name=name)["Parameter"]["Value"])
    except Exception as exc:
        error = map_client_error(exc, region=region)
        if error.code == "ParameterNotFound":
            raise ProviderError(f"the AMI parameter {name} does not exist in {region}; set GPUPLAN_AWS_IMAGE_ID or "
                                "GPUPLAN_AWS_AMI_PARAMETER", code="ParameterNotFound", region=region) from exc
        raise error from exc


def image_architecture(ec2: Any, image_id: str, region: str) -> str | None:
    """The AMI's architecture from DescribeImages (None when EC2 does not list it: RunInstances will say)."""
    try:
        images = ec2.describe_images(ImageIds=[image_id]).get("Images", [])
    except Exception as exc:
        error = map_client_error(exc, region=region)
        if error.code and error.code.startswith("InvalidAMIID"):
            return None
        raise error from exc
    return str(images[0].get("Architecture") or "") or None if images else None


def choose_image(ec2: Any, ssm: Any, info: TypeInfo, region: str, *, image_id: str | None,
                 ami_parameter: str | None) -> ImageChoice:
    """The AMI for `info`'s type in `region`; ProviderError (code ArchitectureMismatch) for a configured image
    the type cannot boot, before any RunInstances."""
    arch = info.architecture
    if image_id:
        choice = ImageChoice(str(image_id), arch, "image_id")
    else:
        name = parameter_for(arch, ami_parameter)
        choice = ImageChoice(read_parameter(ssm, name, region), arch, f"parameter {name}")
    found = image_architecture(ec2, choice.image_id, region)
    if not boots(info, found):
        raise ProviderError(f"{info.instance_type} runs {'/'.join(info.architectures)} but the machine image "
                            f"{choice.image_id} ({choice.source}) is {found}; choose an image for {arch} or another "
                            "instance type", code="ArchitectureMismatch", region=region)
    return choice

