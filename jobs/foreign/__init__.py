"""Task files of other tools (SkyPilot task YAML, dstack `type: task`) read as gpuplan job specs.

`load_job` reads any of the three: a file whose keys are SkyPilot's or dstack's is translated into a gpuplan spec
(the same text `gpuplan convert` writes), validated like one, and comes with ONE note naming what has no
equivalent. A file that is neither stays a gpuplan spec, so its errors keep their line numbers.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gpuplan.jobs.foreign.translation import Translation

if TYPE_CHECKING:
    from gpuplan.jobs.spec import JobSpec

__all__ = ["LoadedJob", "Translation", "detect", "load_job", "translate_text"]

GPUPLAN_KEYS = frozenset({"name", "image", "command", "run", "setup", "runtime", "workdir", "env", "secrets",
                          "resources", "workload", "limits", "checkpoint", "storage", "schedule", "project",
                          "labels"})
GPUPLAN_RESOURCE_KEYS = frozenset({"gpu", "gpus_per_node", "nodes", "spot", "clouds", "regions", "zones",
                                   "max_price_per_hour"})


@dataclass(frozen=True)
class LoadedJob:
    """A job spec as launch and plan use it: the validated spec, the text recorded with the run, the note."""

    spec: JobSpec
    text: str
    translation: Translation | None = None


def detect(data: object) -> str | None:
    """"skypilot", "dstack" or None (a gpuplan spec, or something only gpuplan's errors should describe)."""
    if not isinstance(data, dict):
        return None
    from gpuplan.jobs.foreign import dstack, skypilot

    if dstack.looks_like(data):
        return "dstack"
    if skypilot.looks_like(data, GPUPLAN_KEYS, GPUPLAN_RESOURCE_KEYS):
        return "skypilot"
    return None


def translate_text(text: str, *, source: str, default_name: str) -> Translation | None:
    """The gpuplan spec for a SkyPilot or dstack task file's text; None when it is not one."""
    import yaml

    from gpuplan.jobs.spec import SpecError
    from gpuplan.jobs.spec_bounds import SpecBoundsError, load_bounded

    try:
        _node, data = load_bounded(text)
    except (SpecBoundsError, yaml.YAMLError):
        return None  # parse_spec says what is wrong, with the line
    kind = detect(data)
    if kind is None:
        return None
    from gpuplan.jobs.foreign import dstack, skypilot

    module = skypilot if kind == "skypilot" else dstack
    try:
        return module.translate(data, default_name=default_name)
    except ValueError as exc:
        raise SpecError(f"{source}: {kind} task: {exc}") from None


def load_job(path: str | Path) -> LoadedJob:
    """Read a gpuplan spec, a SkyPilot task or a dstack task; errors are SpecError naming the file.

    The file is read once: the LoadedJob's `text` (what launch records as the run's spec) is the text its `spec`
    was validated from, or the translation of it.
    """
    from gpuplan.jobs.spec import SpecError, parse_spec, read_spec_text

    path = Path(path)
    text = read_spec_text(path)
    translation = translate_text(text, source=str(path), default_name=path.stem)
    if translation is None:
        return LoadedJob(parse_spec(text, source=str(path)), text)
    try:
        spec = parse_spec(translation.spec_text, source=f"{path} (as a gpuplan spec)")
    except SpecError as exc:
        raise SpecError(f"{exc} — translated from a {translation.origin} task; `gpuplan convert {path}` shows "
                        "the spec") from None
    return LoadedJob(spec, translation.spec_text, translation)
