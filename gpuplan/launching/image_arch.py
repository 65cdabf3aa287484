"""Which machine architectures a launch may use: those the job's image is published for (read from its registry,
gpuplan.jobs.image_registry), narrowed by the spec's `arch:`; an amd64-only image is never put on an arm64 machine.

When the registry cannot be asked (offline, a private registry without credentials here, a lookup turned off),
gpuplan assumes amd64 — what nearly every CUDA image is built for — unless the spec says `arch: arm64`, and says
so before the launch. When the registry answers, its answer wins: a spec's `arch:` the image does not have is
refused (exit 2) instead of failing at `docker pull` on a machine already billed.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuplan.errors import UserError
from gpuplan.jobs.spec import JobSpec

# OCI platform names -> the catalog's (EC2's ProcessorInfo.SupportedArchitectures names).
CATALOG_ARCH = {"amd64": "x86_64", "arm64": "arm64"}
ASSUMED = "amd64"


@dataclass(frozen=True)
class ImageArchitectures:
    """The OCI architectures a launch may use, and how gpuplan knows (said before the launch)."""

    archs: frozenset[str]
    note: str

    @property
    def catalog_archs(self) -> frozenset[str]:
        return frozenset(CATALOG_ARCH.get(a, a) for a in self.archs)


def image_architectures(spec: JobSpec) -> ImageArchitectures | None:
    """None for a job without an image (a process job runs wherever the machine is)."""
    if not spec.image:
        return None
    from gpuplan.jobs.image_registry import RegistryError, image_platforms

    try:
        found = image_platforms(spec.image)
    except RegistryError as exc:
        arch = spec.arch or ASSUMED
        how = "as the spec says (arch:)" if spec.arch else "(set arch: arm64 in the spec for an arm64 image)"
        return ImageArchitectures(frozenset({arch}), f"image {spec.image}: platforms unknown ({exc}); "
                                                     f"assuming linux/{arch} {how}")
    archs = found.architectures
    if not archs:
        raise UserError(f"image {spec.image} has no linux platform in {found.reference.registry}")
    if spec.arch and spec.arch not in archs:
        raise UserError(f"the spec says arch: {spec.arch}, but image {spec.image} is published for "
                        f"{', '.join(f'linux/{a}' for a in sorted(archs))} only")
    chosen = frozenset({spec.arch}) if spec.arch else archs
    return ImageArchitectures(chosen, f"image {spec.image}: {', '.join(f'linux/{a}' for a in sorted(archs))} "
                                      f"(from {found.reference.registry}); machines of "
                                      f"{', '.join(sorted(chosen))} only")
