"""Validate a spec before it is copied into a schedule: a schedule of an invalid spec would only fail later."""

from __future__ import annotations


def validate_spec_text(text: str, source: str) -> str:
    """Parse the spec (errors name file and line, exit 2); returns its name."""
    from gpuplan.jobs.spec import parse_spec

    return parse_spec(text, source=source).name
