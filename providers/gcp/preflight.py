"""What GCE would refuse in every zone alike, checked before a launch records or starts anything.

Split from providers/gcp/provider.py (the launch/describe/terminate flow). Each check stands for a documented rule
(providers/gcp/rules.py cites them): a spec label GCE's label rules refuse, and a boot image family missing from its
image project (images.getFromFamily answers 404). Both are the user's configuration, not capacity: failover must
not walk every zone to learn the same 404, and the user must learn it before anything bills.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from gpuplan.errors import UserError
from gpuplan.providers.base import ProviderError
from gpuplan.providers.gcp.rules import image_family, map_api_error, missing_family_message, spec_label_problem

IMAGE_FAMILY_NOT_FOUND = "IMAGE_FAMILY_NOT_FOUND"


def check_labels(labels: Mapping[str, Any] | None) -> None:
    """UserError (exit 2, one line naming the label and the rule) for spec labels GCE would refuse."""
    problem = spec_label_problem({str(k): str(v) for k, v in (labels or {}).items()})
    if problem is not None:
        raise UserError(problem)


class ImageFamilies:
    """Boot image families known to exist, asked with images.getFromFamily once per (project, family)."""

    def __init__(self) -> None:
        self.found: dict[tuple[str, str], str] = {}  # (image project, family) -> the image's selfLink

    def check(self, source_image: str, images_client: Callable[[], Any], retry: Any) -> None:
        """ProviderError (code IMAGE_FAMILY_NOT_FOUND) when `source_image` names a family its project lacks.

        An explicit image (not a family) is left to GCE. `images_client` builds the ImagesClient only when a
        family must be asked about."""
        from google.api_core import exceptions as gexc

        family = image_family(source_image)
        if family is None or family in self.found:
            return
        project, name = family
        try:
            resolved = images_client().get_from_family(project=project, family=name, retry=retry)
        except gexc.NotFound as exc:
            raise ProviderError(missing_family_message(project, name), code=IMAGE_FAMILY_NOT_FOUND) from exc
        except Exception as exc:
            raise map_api_error(exc) from exc
        self.found[family] = resolved.self_link or resolved.name

    def check_for_user(self, source_image: str, images_client: Callable[[], Any], retry: Any) -> None:
        """`check`, with a missing family as the UserError it is (exit 2) rather than a provider failure."""
        try:
            self.check(source_image, images_client, retry)
        except ProviderError as exc:
            if exc.code == IMAGE_FAMILY_NOT_FOUND:
                raise UserError(str(exc)) from exc
            raise
