"""Account rules the strict layer keeps beyond EC2's request rules: what a real AWS *account* enforces and moto does
not (issue 32). Each is off until a test turns it on through `StrictAws.account` (so older tests keep their meaning),
and each cites its documentation.

11. IAM propagation (`profile_propagation = N`): an instance profile created (or given its role) through the layer is
    unknown to EC2 for the next N RunInstances naming it, which answer InvalidParameterValue "Value (NAME) for
    parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", HTTP 400. IAM: "Changes that I
    make are not always immediately visible" (https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_general.html
    #troubleshoot_general_eventual-consistency); the message observed: aws/aws-sdk-js-v3#5253,
    hashicorp/terraform-provider-aws#27516. Counted in requests, not seconds, so no test waits for it. moto knows the
    profile at once.
12. SSM parameter tiers (always on: a value over the limit is refused by every account): a Standard-tier value is at
    most 4,096 characters, Advanced (and Intelligent-Tiering, which picks Advanced for a larger value) 8,192
    ("Maximum size of a parameter value: Standard 4 KB, Advanced 8 KB",
    https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-advanced-parameters.html). A request
    without Tier gets the account's default tier, Standard unless changed (`default_tier`;
    https://docs.aws.amazon.com/systems-manager/latest/userguide/ps-default-tier.html). Errors: ValidationException,
    HTTP 400, "Standard tier parameters support a maximum parameter value of 4096 characters. ..." (observed:
    aws/aws-sdk-net#3157) and, above 8 KB, the API's length constraint ("Member must have length less than or equal
    to 8192", the API's validation shape; seed-farmer#499 hit the 8,192 limit). moto stores any size.
13. iam:SimulatePrincipalPolicy (answered by the layer: moto does not implement it): the role's inline and attached
    policies are evaluated for each ActionNames x ResourceArns pair: an explicit Deny wins, else an Allow whose
    Action and Resource match (`*` and `?` wildcards; actions case-insensitively) and whose Condition holds on the
    request's ContextEntries (StringEquals/StringLike; a key the request does not give fails the condition and is
    listed in MissingContextValues), else implicitDeny.
    https://docs.aws.amazon.com/IAM/latest/APIReference/API_SimulatePrincipalPolicy.html ,
    https://docs.aws.amazon.com/IAM/latest/UserGuide/reference_policies_evaluation-logic.html
14. The caller's own permissions (`caller_policy = {...}`): every request whose IAM action the policy does not allow
    is refused the way each service refuses it — EC2 UnauthorizedOperation 403, IAM/STS AccessDenied 403, SSM
    (JSON) AccessDeniedException 400, S3 AccessDenied 403. Some calls need a second action: RunInstances with
    TagSpecifications also ec2:CreateTags, and so do CreateSecurityGroup and CreatePlacementGroup with tags ("To tag
    resources on creation, users must have permissions to use the action that creates the resource ... and
    ec2:CreateTags", https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/supported-iam-actions-tagging.html);
    RunInstances with an IamInstanceProfile also iam:PassRole ("you must have permission to pass the role",
    https://docs.aws.amazon.com/IAM/latest/UserGuide/id_roles_use_switch-role-ec2.html); PutParameter with Tags also
    ssm:AddTagsToResource (https://docs.aws.amazon.com/systems-manager/latest/userguide/sysman-paramstore-su-tag.html).
    Actions only: resources and conditions of the caller's policy are not evaluated here (rule 13 does that for the
    role). `denied` records each refused action.
"""

from __future__ import annotations

import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any
from xml.sax.saxutils import escape

from .wire import QueryRequest, Reply, Signed, ec2_error, json_error, query_xml_error, request_id, rest_xml_error

STANDARD_MAX = 4096
ADVANCED_MAX = 8192
_JSON_PREFIX = {"AmazonSSM": "ssm", "secretsmanager": "secretsmanager", "AWSKMS": "kms"}
_IAM_NS = "https://iam.amazonaws.com/doc/2010-05-08/"


@dataclass
class AccountRules:
    """The account's state for rules 11-14 (module docstring)."""

    profile_propagation: int = 0
    default_tier: str = "Standard"
    caller_policy: dict[str, Any] | None = None
    not_yet_visible: dict[str, int] = field(default_factory=dict)  # instance profile -> refusals left
    denied: list[str] = field(default_factory=list)

    # ---- rule 11 ----------------------------------------------------------------------------------------------------

    def observe_iam(self, req: QueryRequest, status: int) -> None:
        """A profile created, or given its role, through the layer is new to EC2 (rule 11)."""
        if status == 200 and self.profile_propagation and req.action in ("CreateInstanceProfile",
                                                                        "AddRoleToInstanceProfile"):
            self.not_yet_visible[req.params.get("InstanceProfileName", "")] = self.profile_propagation

    def profile_refusal(self, params: dict[str, str]) -> Reply | None:
        name = params.get("IamInstanceProfile.Name") or params.get("IamInstanceProfile.Arn", "").rsplit("/", 1)[-1]
        if not name or self.not_yet_visible.get(name, 0) <= 0:
            return None
        self.not_yet_visible[name] -= 1
        field_name, value = (("name", name) if "IamInstanceProfile.Name" in params
                             else ("arn", params["IamInstanceProfile.Arn"]))
        kind = "name" if field_name == "name" else "ARN"
        return ec2_error("InvalidParameterValue", f"Value ({value}) for parameter iamInstanceProfile.{field_name} is "
                         f"invalid. Invalid IAM Instance Profile {kind}")

    # ---- rule 12 ----------------------------------------------------------------------------------------------------

    def ssm_refusal(self, target: str, body: bytes) -> Reply | None:
        if target != "AmazonSSM.PutParameter":
            return None
        request = json.loads(body or b"{}")
        size = len(str(request.get("Value", "")))
        tier = request.get("Tier") or self.default_tier
        if size > ADVANCED_MAX:
            return json_error("ValidationException", "1 validation error detected: Value at 'value' failed to "
                              f"satisfy constraint: Member must have length less than or equal to {ADVANCED_MAX}", 400)
        if tier == "Standard" and size > STANDARD_MAX:
            return json_error("ValidationException", "Standard tier parameters support a maximum parameter value of "
                              "4096 characters. To create a larger parameter value, upgrade the parameter to use the "
                              "advanced-parameter tier. For more information, see https://docs.aws.amazon.com/"
                              "systems-manager/latest/userguide/parameter-store-advanced-parameters.html", 400)
        return None

    # ---- rule 14 ----------------------------------------------------------------------------------------------------

    def caller_refusal(self, signed: Signed, req: QueryRequest | None, target: str, method: str, path: str,
                       query: str, body: bytes) -> Reply | None:
        if self.caller_policy is None:
            return None
        actions = needed_actions(signed.service, req, target, method, path, query, body)
        allowed = allowed_actions(self.caller_policy)
        for action in actions:
            if not any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in allowed):
                self.denied.append(action)
                return access_denied(signed.service, action, bool(target))
        return None


def needed_actions(service: str, req: QueryRequest | None, target: str, method: str, path: str, query: str,
                   body: bytes) -> list[str]:
    """The IAM actions one request needs (rule 14)."""
    if req is not None:
        actions = [f"{service}:{req.action}"]
        tagged = any(k.startswith("TagSpecification") for k in req.params)
        if service == "ec2" and tagged and req.action != "CreateTags":
            actions.append("ec2:CreateTags")
        if service == "ec2" and req.action == "RunInstances" and any(k.startswith("IamInstanceProfile")
                                                                      for k in req.params):
            actions.append("iam:PassRole")
        return actions
    if target:
        prefix, _, operation = target.partition(".")
        actions = [f"{_JSON_PREFIX.get(prefix, prefix.lower())}:{operation}"]
        if target == "AmazonSSM.PutParameter" and json.loads(body or b"{}").get("Tags"):
            actions.append("ssm:AddTagsToResource")
        return actions
    if service == "s3":
        return [s3_action(method, path, query)]
    return [f"{service}:*"]


def s3_action(method: str, path: str, query: str) -> str:
    """The S3 action of a REST request (https://docs.aws.amazon.com/AmazonS3/latest/userguide/using-with-s3-policy-actions.html):
    a bucket-level GET lists (s3:ListBucket), object GET/HEAD read, PUT/POST (multipart too) write, DELETE deletes."""
    parts = [p for p in path.split("/") if p]
    on_object = len(parts) >= 2
    if method in ("GET", "HEAD"):
        return "s3:GetObject" if on_object else ("s3:ListBucket" if parts else "s3:ListAllMyBuckets")
    if method in ("PUT", "POST"):
        return "s3:PutObject" if on_object else ("s3:DeleteObject" if "delete" in query else "s3:CreateBucket")
    if method == "DELETE":
        return "s3:DeleteObject" if on_object else "s3:DeleteBucket"
    return "s3:*"


def allowed_actions(policy: dict[str, Any]) -> list[str]:
    statements = policy.get("Statement") or []
    statements = [statements] if isinstance(statements, dict) else statements
    found: list[str] = []
    for statement in statements:
        if statement.get("Effect") == "Allow":
            found.extend(_list(statement.get("Action")))
    return found


def access_denied(service: str, action: str, json_protocol: bool) -> Reply:
    """Each service's refusal of a caller without the permission (rule 14)."""
    who = "arn:aws:iam::123456789012:user/gpuplan-test"
    message = f"User: {who} is not authorized to perform: {action} because no identity-based policy allows the " \
              f"{action} action"
    if service == "ec2":
        return ec2_error("UnauthorizedOperation", f"You are not authorized to perform this operation. {message}", 403)
    if json_protocol:
        return json_error("AccessDeniedException", message, 400)
    if service == "s3":
        return rest_xml_error("AccessDenied", "Access Denied", 403)
    return query_xml_error("AccessDenied", message, 403)


# ---- rule 13: SimulatePrincipalPolicy ------------------------------------------------------------------------------


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _matches(pattern: str, value: str, *, case: bool) -> bool:
    regex = re.escape(pattern).replace(r"\*", ".*").replace(r"\?", ".")
    return re.fullmatch(regex, value, 0 if case else re.IGNORECASE) is not None


def _condition_holds(condition: dict[str, Any], context: dict[str, list[str]], missing: set[str]) -> bool:
    for operator, pairs in condition.items():
        for key, wanted in pairs.items():
            have = context.get(key)
            if have is None:
                missing.add(key)
                return False
            like = operator.startswith("StringLike")
            if not any(_matches(w, h, case=True) if like else w == h for w in _list(wanted) for h in have):
                return False
    return True


@dataclass(frozen=True)
class Evaluation:
    action: str
    resource: str
    decision: str
    missing: tuple[str, ...] = ()


def evaluate(policies: list[dict[str, Any]], action: str, resource: str,
             context: dict[str, list[str]]) -> Evaluation:
    """IAM's evaluation logic for one identity (reference_policies_evaluation-logic.html): Deny > Allow > implicit."""
    missing: set[str] = set()
    decision = "implicitDeny"
    for policy in policies:
        statements = policy.get("Statement") or []
        for statement in [statements] if isinstance(statements, dict) else statements:
            if not any(_matches(a, action, case=False) for a in _list(statement.get("Action"))):
                continue
            if not any(_matches(r, resource, case=True) for r in _list(statement.get("Resource"))):
                continue
            if not _condition_holds(statement.get("Condition") or {}, context, missing):
                continue
            if statement.get("Effect") == "Deny":
                return Evaluation(action, resource, "explicitDeny")
            decision = "allowed"
    return Evaluation(action, resource, decision, tuple(sorted(missing)) if decision != "allowed" else ())


def role_policies(iam: Any, role_arn: str) -> list[dict[str, Any]] | None:
    """The inline and attached policies of the role `role_arn` names, from moto (None: no such role)."""
    name = role_arn.rsplit("/", 1)[-1]
    try:
        iam.get_role(RoleName=name)
    except Exception:
        return None
    documents = [iam.get_role_policy(RoleName=name, PolicyName=p)["PolicyDocument"]
                 for p in iam.list_role_policies(RoleName=name)["PolicyNames"]]
    for attached in iam.list_attached_role_policies(RoleName=name)["AttachedPolicies"]:
        version = iam.get_policy(PolicyArn=attached["PolicyArn"])["Policy"]["DefaultVersionId"]
        documents.append(iam.get_policy_version(PolicyArn=attached["PolicyArn"],
                                                VersionId=version)["PolicyVersion"]["Document"])
    return [json.loads(d) if isinstance(d, str) else d for d in documents]


def simulate_principal_policy(req: QueryRequest, iam: Any) -> Reply:
    arn = req.params.get("PolicySourceArn", "")
    policies = role_policies(iam, arn)
    if policies is None:
        return query_xml_error("NoSuchEntity", f"The role with name {arn.rsplit('/', 1)[-1]} cannot be found.", 404)
    actions = req.indexed("ActionNames.member")
    resources = req.indexed("ResourceArns.member") or ["*"]
    context: dict[str, list[str]] = {}
    for index in range(1, 50):
        key = req.params.get(f"ContextEntries.member.{index}.ContextKeyName")
        if key is None:
            break
        context[key] = req.indexed(f"ContextEntries.member.{index}.ContextKeyValues.member")
    members = []
    for action in actions:
        for resource in resources:
            result = evaluate(policies, action, resource, context)
            missing = "".join(f"<member>{escape(k)}</member>" for k in result.missing)
            members.append(f"<member><EvalActionName>{escape(action)}</EvalActionName><EvalResourceName>"
                           f"{escape(resource)}</EvalResourceName><EvalDecision>{result.decision}</EvalDecision>"
                           f"<MatchedStatements/><MissingContextValues>{missing}</MissingContextValues></member>")
    body = (f'<SimulatePrincipalPolicyResponse xmlns="{_IAM_NS}"><SimulatePrincipalPolicyResult><IsTruncated>false'
            f"</IsTruncated><EvaluationResults>{''.join(members)}</EvaluationResults></SimulatePrincipalPolicyResult>"
            f"<ResponseMetadata><RequestId>{request_id()}</RequestId></ResponseMetadata>"
            "</SimulatePrincipalPolicyResponse>")
    return Reply(200, body.encode())
