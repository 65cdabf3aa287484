"""Whether the machines' role may do what the run's boot script will do, asked of IAM before anything starts.

Why: gpuplan.providers.aws.iam checks that the instance profile exists and holds a role; a role made for another
bucket or storage prefix passes that, and the machine then bills while its code copy and checkpoint pushes get
AccessDenied. IAM's policy simulator answers the real question without running anything:
iam:SimulatePrincipalPolicy evaluates the role's identity policies for each action and resource, with the
condition keys the request would carry (https://docs.aws.amazon.com/IAM/latest/APIReference/API_SimulatePrincipalPolicy.html;
EvalDecision `allowed`, `explicitDeny` or `implicitDeny`). The launching user may not be allowed to call it (it is
in gpuplan's documented policy, but optional): then the launch says the role's permissions were "not checked" and
goes on, as before.

What is asked, per need (the same actions the role gpuplan creates grants, gpuplan.providers.aws.iam):
- the run's secrets: ssm:GetParameter on `parameter/gpuplan/<run>/<NAME>` in the launch region;
- shipped outputs: s3:PutObject on `BUCKET/gpuplan/<run>/node-0/exit.json`;
- storage s3://B/P: s3:GetObject and s3:PutObject on `B/P/<file>`, s3:ListBucket on `B` with `s3:prefix` = `P/`
  (the condition the role's statement carries; https://docs.aws.amazon.com/AmazonS3/latest/userguide/example-policies-s3.html).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpuplan.providers.aws.rules import map_client_error


@dataclass(frozen=True)
class Need:
    """One permission the machines need: an IAM action on a resource, with the condition keys the call carries."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class RoleVerdict:
    """`checked` False: the simulator could not be asked (`why`); else `denied` lists what the role may not do."""

    checked: bool
    denied: tuple[Need, ...] = ()
    why: str | None = None


def needs(*, region: str, account: str, run_id: str, secrets: Sequence[str], bucket: str | None,
          storage: str | None) -> list[Need]:
    """What the boot script of this run will do with the role's credentials (module docstring)."""
    found = [Need("ssm:GetParameter", f"arn:aws:ssm:{region}:{account}:parameter/gpuplan/{run_id}/{name}")
             for name in sorted(secrets)]
    if bucket:
        found.append(Need("s3:PutObject", f"arn:aws:s3:::{bucket}/gpuplan/{run_id}/node-0/exit.json"))
    if storage and storage.startswith("s3://"):
        store_bucket, _, prefix = storage.removeprefix("s3://").strip("/").partition("/")
        base = f"{prefix}/" if prefix else ""
        found += [Need("s3:PutObject", f"arn:aws:s3:::{store_bucket}/{base}checkpoint"),
                  Need("s3:GetObject", f"arn:aws:s3:::{store_bucket}/{base}checkpoint"),
                  Need("s3:ListBucket", f"arn:aws:s3:::{store_bucket}", (("s3:prefix", base),))]
    return found


def account_of(arn: str) -> str:
    """`arn:aws:iam::123456789012:role/x` -> `123456789012`."""
    parts = arn.split(":")
    return parts[4] if len(parts) > 4 else "*"


def simulate(iam: Any, role_arn: str, wanted: Sequence[Need]) -> RoleVerdict:
    """Ask IAM's simulator about each need (one call per distinct condition context)."""
    if not wanted:
        return RoleVerdict(True)
    denied: list[Need] = []
    by_context: dict[tuple[tuple[str, str], ...], list[Need]] = {}
    for need in wanted:
        by_context.setdefault(need.context, []).append(need)
    try:
        for context, group in by_context.items():
            entries = [{"ContextKeyName": k, "ContextKeyValues": [v], "ContextKeyType": "string"} for k, v in context]
            for need in group:  # one action/resource pair per call: the answer then names exactly one need
                answer = iam.simulate_principal_policy(PolicySourceArn=role_arn, ActionNames=[need.action],
                                                       ResourceArns=[need.resource], ContextEntries=entries)
                results: list[Mapping[str, Any]] = answer.get("EvaluationResults") or []
                if any(r.get("EvalDecision") != "allowed" for r in results) or not results:
                    denied.append(need)
    except Exception as exc:
        error = map_client_error(exc)
        text = str(error).splitlines()[0][:160]  # an endpoint without the API answers an HTML page: keep it short
        return RoleVerdict(False, why=f"{error.code}: {text}" if error.code else text)
    return RoleVerdict(True, tuple(denied))


def describe_denied(role: str, denied: Sequence[Need], fix: str) -> str:
    """One line: what the role may not do, and the command that grants it."""
    what = "; ".join(f"{n.action} on {n.resource}" for n in denied[:3])
    more = f" (and {len(denied) - 3} more)" if len(denied) > 3 else ""
    return (f"the machines' role {role} may not {what}{more} (iam:SimulatePrincipalPolicy), so the job would fail "
            f"on the machine: {fix.replace('create one with', 'grant it with')}")
