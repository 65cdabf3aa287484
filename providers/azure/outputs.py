"""How an Azure run's outputs come back: the node's job.log, metrics and exit record from its run storage in Blob.

The boot script ships each node's files to `<storage>/<run id>/node-<rank>/` with the VM's managed identity
(boot_blob.py); the run's storage URL is a tag on its resource group (`gpuplan:storage`, written at launch), so
any later process (`status`, `watch`, `logs`) finds it with one ARM read. `BlobOutputs.fetch` lists that prefix
with the user's credential and copies what changed (Blob ETags) into the run folder
(gpuplan.providers.outputs). Without a storage the exit code still arrives as a group tag (lifecycle.py).
"""

from __future__ import annotations

from collections.abc import Callable

from gpuplan.providers.azure_blob import BlobClient, BlobLocation
from gpuplan.providers.base import Instance
from gpuplan.providers.outputs import StoredObject, sync_node_outputs

HINT = ("no exit record: the VM left no exit-code tag on its run's resource group; give the run a storage "
        "(`storage: az://ACCOUNT/CONTAINER/PREFIX` in the spec or [defaults] storage, and [providers.azure] "
        "identity with the `gpuplan machine` role on that container) so its machines ship their logs, metrics "
        "and exit code")


class BlobOutputs:
    """Fetching a run's shipped outputs from Blob; `run_storage(run_id)` is the run's storage folder
    (`az://ACCOUNT/CONTAINER/PREFIX/<run id>`) or None."""

    def __init__(self, blob: BlobClient, run_storage: Callable[[str], str | None]) -> None:
        self.blob = blob
        self._run_storage = run_storage
        self._etags: dict[str, str] = {}  # blob name -> ETag of the copy fetched last

    def fetch(self, instance: Instance, run_dir: str) -> None:
        url = self._run_storage(instance.run_id) if instance.run_id else None
        if not url or not url.startswith("az://"):
            return
        where = BlobLocation.parse(url)
        prefix = f"{where.prefix}/node-{int(instance.node_rank)}/".lstrip("/")
        objects = [StoredObject(item.name, item.etag)
                   for item in self.blob.list(where.account, where.container, prefix)]
        sync_node_outputs(objects, prefix, lambda name: self.blob.get(where.account, where.container, name),
                          run_dir, instance.node_rank, self._etags)
