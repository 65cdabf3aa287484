"""Reading and creating the shared GCP resources a launch needs (a firewall rule, the GPU data networks and their
subnets, a run's placement policy), where "already there" is the normal case: launches are retried and run side by
side, so a resource another launch made first is success, not an error.

A read answers None for a resource GCP says does not exist (404 NotFound); a create that GCP refuses with 409
Conflict ("The resource ... already exists") finds it made meanwhile. Every other failure goes through the caller's
`refused`, which says what the account lacks for that resource.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gpuplan.providers.base import ProviderError

Found = TypeVar("Found")


def read_existing(get: Callable[[], Found], refused: Callable[[Exception], ProviderError]) -> Found | None:
    """What `get` reads, or None when the resource does not exist."""
    from google.api_core import exceptions as gexc

    try:
        return get()
    except gexc.NotFound:
        return None
    except Exception as exc:
        raise refused(exc) from exc


def create_once(create: Callable[[], object], refused: Callable[[Exception], ProviderError]) -> None:
    """Run `create` (the insert and the wait for its operation); a Conflict means it exists already."""
    from google.api_core import exceptions as gexc

    try:
        create()
    except gexc.Conflict:
        return
    except Exception as exc:
        raise refused(exc) from exc
