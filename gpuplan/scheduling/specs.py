"""Validate a spec before it is copied into a schedule: a schedule of an invalid spec would only fail later."""

from __future__ import annotations

from typing import Any


def validate_spec_text(text: str, source: str) -> Any:
    """Parse the spec (errors name file and line, exit 2) and check it can be scheduled; returns the JobSpec."""
    from gpuplan.errors import UserError
    from gpuplan.jobs.spec import parse_spec

    spec = parse_spec(text, source=source)
    clouds = list(spec.resources.clouds)
    if len(clouds) > 1:
        # A fire runs on one provider (gpuplan.scheduling.fire.provider_name_for): with several clouds listed it
        # would quietly run on this machine instead.
        raise UserError(f"{source}: a scheduled job runs on one provider; resources.clouds lists "
                        f"{', '.join(clouds)}: keep one (or none, for this machine)")
    return spec
