"""The config file's `[defaults]` applied to a job spec: what the spec leaves unsaid, the user's defaults say.

A spec's own value always wins; only an absent `project`, `limits.budget_usd`, `resources.clouds` or
`resources.regions` is filled (gpuplan.config.default_setting reads and checks the file). `provider` and
`storage` are read where they are used (the launch's provider choice, the run storage).
"""

from __future__ import annotations

from decimal import Decimal
from typing import TYPE_CHECKING

from gpuplan.config import default_setting

if TYPE_CHECKING:
    from gpuplan.jobs.spec import JobSpec


def with_defaults(spec: JobSpec) -> JobSpec:
    """`spec` with the `[defaults]` it does not override filled in (a copy; the spec text is not changed)."""
    project = default_setting("project")
    budget = default_setting("budget")
    clouds = default_setting("clouds")
    regions = default_setting("regions")
    update: dict[str, object] = {}
    if spec.project is None and isinstance(project, str):
        update["project"] = project
    if spec.limits.budget_usd is None and isinstance(budget, (int, float)):
        update["limits"] = spec.limits.model_copy(update={"budget_usd": Decimal(str(budget))})
    resources: dict[str, object] = {}
    if not spec.resources.clouds and isinstance(clouds, list):
        resources["clouds"] = list(clouds)
    if not spec.resources.regions and isinstance(regions, list):
        resources["regions"] = list(regions)
    if resources:
        update["resources"] = spec.resources.model_copy(update=resources)
    return spec.model_copy(update=update) if update else spec
