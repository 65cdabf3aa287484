"""The cloud's part of a boot script: shell hooks a provider supplies, so the script itself names no cloud.

jobs.bootstrap renders what every machine does (run the job, ship its outputs, honour the fail-safe, power
off); how a machine talks to *its* cloud — read a secret from the cloud's store, put a file in the cloud's
object storage, report its exit code through the cloud's metadata, notice an interruption — is a `BootCloud`
that the provider builds (`Provider.boot_cloud()`: providers/aws/boot.py, providers/gcp/boot.py). A new cloud
writes its hooks in its own package; nothing here changes.

The hooks the script calls (each a shell function; the defaults below do nothing or fail cleanly):

- `store_secret PARAM`: print the value of secret PARAM (a name in the cloud's store) followed by one guard
  character `x` (so trailing newlines survive `$(...)`); fail when it cannot.
- `cloud_put FILE URL`: copy one local file to the object URL (`s3://...`, `gs://...`); fail when it cannot.
- `cloud_get URL FILE`: copy one object to a local file; fail when it cannot (or there is none).
- `cloud_sync FROM TO`: copy a folder to or from the storage (one side a URL), adding and replacing files.
- `report_status KEY VALUE`: publish the job's status or exit code where the provider reads it back (GCP guest
  attributes); best effort.
- `interruption_notice`: print the cloud's notice and succeed once the machine is about to be interrupted.
- `machine_end REASON`: end this machine once its job is over (REASON: `max_hours` when the fail-safe fired, else
  empty). Default: power off, which ends the machine and its bill where the provider launches it to terminate on
  shutdown (AWS InstanceInitiatedShutdownBehavior=terminate). GCP deletes the VM instead (a stopped VM bills its
  disk): providers/gcp/self_delete.py.
- `fabric_run_args`: extra container run arguments for the machine's inter-node fabric, one a line (AWS EFA:
  its devices and unlimited locked memory); `fabric_note RUNTIME IMAGE`: print a note when the image cannot use
  that fabric. Both print nothing by default.
- `instance_tag KEY`, `launch_index`: this machine's tag KEY and its index in the call that started it (a
  multi-node run whose nodes read their rank from tags: gpuplan.jobs.boot_identity).

Values in `assignments` (endpoints, metadata addresses) enter the script shell-quoted, like every other value.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

_FUNCTION = re.compile(r"^([a-z_]+)\(\) \{$", re.MULTILINE)
_UNCALLED = "# shellcheck disable=SC2317  # a hook, or a helper of one: called where the run needs it"

# The defaults, defined before the cloud's functions so the cloud's own definitions replace them.
DEFAULT_HOOKS = r"""store_secret() {
  log "this machine's cloud keeps no secret store: cannot read $1"
  return 1
}

cloud_put() {
  return 1
}

cloud_get() {
  return 1
}

cloud_sync() {
  return 1
}

report_status() {
  return 0
}

interruption_notice() {
  return 1
}

machine_end() {
  shutdown -h now || poweroff || true
}

instance_tag() {
  return 1
}

launch_index() {
  return 1
}

fabric_run_args() {
  return 0
}

fabric_note() {
  return 0
}
"""


@dataclass(frozen=True)
class BootCloud:
    """A provider's hooks for the boot script (see the module doc). `functions` is fixed shell text (no user
    value may be formatted into it); per-run values go in `assignments` (NAME -> value, quoted when rendered)."""

    functions: str = ""
    assignments: Mapping[str, str] = field(default_factory=dict)
    # The word interruption.json records as the notice's source (`"cloud": "aws"`), when the cloud gives notice.
    notice_source: str | None = None

    def hooks(self) -> str:
        """The shell the script defines: the cloud's own functions, and the defaults of the hooks it leaves out
        (a function defined twice would leave the first unreachable)."""
        own = set(_FUNCTION.findall(self.functions))
        defaults = [f for f in DEFAULT_HOOKS.split("\n\n") if _FUNCTION.findall(f)[0] not in own]
        text = "\n\n".join([*(f.strip("\n") for f in defaults), *([self.functions.strip("\n")] if own else [])])
        # A hook is called only where the run needs it (no multi-node tags, no storage): shellcheck may not see a
        # caller, so each function says so rather than switching the check off for the whole script.
        return _FUNCTION.sub(lambda m: f"{_UNCALLED}\n{m.group(0)}", text) + "\n"
