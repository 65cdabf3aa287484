"""The names a job spec may give: labels (which become cloud tags) and environment/secret variable names.

Kept apart from jobs/spec.py so the spec's model stays one screenful per section; the rules are the clouds'.
"""

from __future__ import annotations

import re

ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
RESERVED_ENV_PREFIX = "GPUPLAN_"


# Labels become AWS tags (and, sanitised, GCE labels) on every resource gpuplan creates for the run. EC2's tag
# restrictions (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html#tag-restrictions): "Maximum
# number of tags per resource – 50", "Maximum key length – 128", "Maximum value length – 256", "The aws: prefix is
# reserved for AWS use". gpuplan launches with instance tags in the metadata (InstanceMetadataTags=enabled), where
# keys may only hold letters, digits and + - = . , _ : @ (no spaces or '/') and may not be '.', '..' or '_index'
# (the same page, on instance tags in instance metadata); values keep the characters
# allowed across services: letters, digits, spaces and + - = . _ : / @. Refused here, at spec validation (exit 2),
# rather than by RunInstances in every zone.
MAX_LABELS = 43  # 50 tags - gpuplan's own (run-id, name, project, created-by, Name, node-rank, price-per-hour)
LABEL_KEY_RE = re.compile(r"^[A-Za-z0-9+\-=._:@]{1,128}$")
LABEL_VALUE_RE = re.compile(r"^[\w +\-=._:/@]{0,256}$")
RESERVED_LABEL_PREFIXES = ("aws:", "gpuplan:")
ZONE_RE = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
MAX_ZONES = 32


def check_label(key: str, value: str) -> None:
    if not LABEL_KEY_RE.match(key) or key in (".", "..", "_index"):
        raise ValueError(f"label {key!r}: a key is 1-128 letters, digits and + - = . _ : @ (no spaces or '/'), "
                         "as AWS instance tags allow")
    if key.lower().startswith(RESERVED_LABEL_PREFIXES):
        raise ValueError(f"label {key!r}: the prefixes aws: and gpuplan: are reserved")
    if not LABEL_VALUE_RE.match(value):
        raise ValueError(f"label {key}: a value is at most 256 letters, digits, spaces and + - = . _ : / @")


def check_env_name(key: str, what: str) -> str:
    if not ENV_NAME_RE.match(key):
        raise ValueError(f"{what} name {key!r} is not a valid environment variable name")
    if key.upper().startswith(RESERVED_ENV_PREFIX):
        raise ValueError(f"{what} name {key!r} uses the reserved prefix {RESERVED_ENV_PREFIX} (gpuplan sets those)")
    return key
