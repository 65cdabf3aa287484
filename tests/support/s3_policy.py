"""The S3 permissions moto never checks: which IAM action each request needs, and whether a policy allows it.

moto serves every S3 request whatever the caller's role says, so a boot script that needs more than the role
gpuplan creates (gpuplan.providers.aws.iam) would pass every test and fail on EC2 with AccessDenied. This maps
the requests a machine made (path-style, as moto's access log shows them) to the action AWS checks — GetObject
also for HEAD, ListBucket for ListObjectsV2 with the `s3:prefix` condition key, PutObject also for multipart
uploads (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-with-s3-policy-actions.html,
https://docs.aws.amazon.com/AmazonS3/latest/userguide/amazon-s3-policy-keys.html) — and evaluates the Allow
statements (`*` in actions and resources, `StringLike` conditions; no statement: denied).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote

ACCESS_LOG = re.compile(r'"(GET|HEAD|PUT|POST|DELETE) (/[^ ]*) HTTP/[0-9.]+"')


@dataclass(frozen=True)
class S3Request:
    method: str
    target: str
    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


def s3_request(method: str, target: str) -> S3Request:
    """The IAM action and resource a path-style S3 request needs."""
    path, _, query = target.partition("?")
    bucket, _, key = path.lstrip("/").partition("/")
    bucket, key = unquote(bucket), unquote(key)
    params = parse_qs(query, keep_blank_values=True)
    if not key:
        if method == "GET" and ("list-type" in params or not params):
            prefix = params.get("prefix", [""])[0]
            return S3Request(method, target, "s3:ListBucket", f"arn:aws:s3:::{bucket}", (("s3:prefix", prefix),))
        return S3Request(method, target, f"s3:(bucket {method} {query})", f"arn:aws:s3:::{bucket}")
    action = {"GET": "s3:GetObject", "HEAD": "s3:GetObject", "PUT": "s3:PutObject", "POST": "s3:PutObject",
              "DELETE": "s3:DeleteObject"}[method]
    return S3Request(method, target, action, f"arn:aws:s3:::{bucket}/{key}")


def _matches(pattern: str, value: str) -> bool:
    return fnmatch.fnmatchcase(value, pattern.replace("[", "[[]"))


def allowed(policy: dict[str, Any], request: S3Request) -> bool:
    context = dict(request.context)
    for statement in policy["Statement"]:
        if statement.get("Effect") != "Allow":
            continue
        actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
        resources = statement["Resource"] if isinstance(statement["Resource"], list) else [statement["Resource"]]
        if not any(_matches(a, request.action) for a in actions):
            continue
        if not any(_matches(r, request.resource) for r in resources):
            continue
        conditions = statement.get("Condition", {}).get("StringLike", {})
        if all(key in context and any(_matches(p, context[key]) for p in (pats if isinstance(pats, list) else [pats]))
               for key, pats in conditions.items()):
            return True
    return False


def requests_in_log(lines: list[str], buckets: set[str]) -> list[S3Request]:
    """The S3 requests to `buckets` in moto's access log lines."""
    found = []
    for line in lines:
        match = ACCESS_LOG.search(line)
        if match and match.group(2).lstrip("/").split("/", 1)[0].split("?", 1)[0] in buckets:
            found.append(s3_request(match.group(1), match.group(2)))
    return found
