"""How a machine ends itself when its job is over (part of the boot script, gpuplan.jobs.bootstrap).

The default is to power off: AWS instances are launched with InstanceInitiatedShutdownBehavior=terminate, so a
shutdown from inside ends the instance and its bill. Where a shutdown only *stops* the machine (GCE: a stopped VM
keeps its boot disk billed, and stopping it clears its maxRunDuration fail-safe), the provider supplies its own
`machine_end REASON` (a shell function; providers/gcp/self_delete.py) and the values it needs, quoted like every
other value of the script. REASON is `max_hours` when the fail-safe fired, empty when the job ended.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_MACHINE_END = r"""machine_end() {
  shutdown -h now || poweroff || true
}
"""


@dataclass(frozen=True)
class BootEnd:
    """A provider's `machine_end` (fixed shell text: no user value in it) and its per-run values."""

    functions: str = DEFAULT_MACHINE_END
    assignments: Mapping[str, str] = field(default_factory=dict)

    def rendered_assignments(self) -> list[str]:
        return [f"{name}={shlex.quote(value)}" for name, value in self.assignments.items()]
