"""The wire formats the strict layer reads and writes: EC2 Query requests in, EC2 XML (and other services' error
shapes) out.

EC2 error shape (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/errors-overview.html): client errors come with a
400-series status and server errors with a 500-series status, in the body
`<Response><Errors><Error><Code/><Message/></Error></Errors><RequestID/></Response>`; botocore's EC2 parser reads
exactly that into `ClientError.response["Error"]`.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qsl
from xml.sax.saxutils import escape

EC2_XMLNS = "http://ec2.amazonaws.com/doc/2016-11-15/"
# `Credential=AKID/20261125/us-east-1/ec2/aws4_request` in a SigV4 Authorization header: the scope names the region
# and the service the request was signed for (https://docs.aws.amazon.com/IAM/latest/UserGuide/create-signed-request.html).
_SCOPE = re.compile(r"Credential=([^/,\s]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request")


@dataclass(frozen=True)
class Signed:
    """Who signed a request for which region and service (from the SigV4 credential scope)."""

    access_key: str
    region: str
    service: str


def signed_scope(authorization: str) -> Signed | None:
    match = _SCOPE.search(authorization or "")
    if not match:
        return None
    return Signed(access_key=match.group(1), region=match.group(3), service=match.group(4))


@dataclass
class QueryRequest:
    """A parsed EC2 Query API request: the form parameters (order kept) and who signed it for which region."""

    action: str
    params: dict[str, str]
    signed: Signed

    @property
    def region(self) -> str:
        return self.signed.region

    def indexed(self, prefix: str) -> list[str]:
        """The values of `Prefix.1`, `Prefix.2`, ... (EC2's flattened list encoding), in index order."""
        pattern = re.compile(rf"^{re.escape(prefix)}\.(\d+)$")
        found = sorted((int(m.group(1)), v) for k, v in self.params.items() if (m := pattern.match(k)))
        return [v for _, v in found]

    def encode(self) -> bytes:
        from urllib.parse import urlencode

        return urlencode(list(self.params.items())).encode()


def parse_query(body: bytes, query_string: str, signed: Signed) -> QueryRequest | None:
    """The request as EC2 Query parameters, or None when it is not a Query request (no Action)."""
    pairs = parse_qsl(query_string, keep_blank_values=True)
    try:
        pairs += parse_qsl(body.decode("utf-8"), keep_blank_values=True)
    except UnicodeDecodeError:
        return None
    params = dict(pairs)
    if "Action" not in params:
        return None
    return QueryRequest(action=params["Action"], params=params, signed=signed)


@dataclass(frozen=True)
class Tag:
    key: str
    value: str


def tag_groups(params: Mapping[str, str]) -> list[tuple[str, list[Tag]]]:
    """Every set of tags a request asks to put on one resource: each `TagSpecification.N` (with its ResourceType) and
    CreateTags' `Tag.N` (named "CreateTags")."""
    groups: dict[str, dict[int, dict[str, str]]] = {}
    kinds: dict[str, str] = {}
    spec = re.compile(r"^TagSpecification\.(\d+)\.(?:Tag|Tags)\.(\d+)\.(Key|Value)$")
    plain = re.compile(r"^Tag\.(\d+)\.(Key|Value)$")
    for key, value in params.items():
        if m := spec.match(key):
            group, index, part = f"spec{m.group(1)}", int(m.group(2)), m.group(3)
            kinds.setdefault(group, params.get(f"TagSpecification.{m.group(1)}.ResourceType", "?"))
        elif m := plain.match(key):
            group, index, part = "CreateTags", int(m.group(1)), m.group(2)
            kinds.setdefault(group, "CreateTags")
        else:
            continue
        groups.setdefault(group, {}).setdefault(index, {})[part] = value
    return [(kinds[g], [Tag(t.get("Key", ""), t.get("Value", "")) for _, t in sorted(items.items())])
            for g, items in groups.items()]


# ---- responses -------------------------------------------------------------------------------------------------


@dataclass
class Reply:
    """An HTTP answer the layer gives instead of (or copied from) moto."""

    status: int
    body: bytes
    headers: list[tuple[str, str]] = field(default_factory=lambda: [("Content-Type", "text/xml")])


def request_id() -> str:
    return str(uuid.uuid4())


def ec2_error(code: str, message: str, status: int = 400) -> Reply:
    """The EC2 Query API error body (errors-overview.html, see the module docstring) with its HTTP status."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{escape(code)}</Code>'
            f"<Message>{escape(message)}</Message></Error></Errors><RequestID>{request_id()}</RequestID></Response>")
    return Reply(status, body.encode())


def json_error(code: str, message: str, status: int) -> Reply:
    """The error shape of AWS's JSON-protocol services (SSM, ...): `{"__type": code, "message": ...}` — what botocore's
    JSON parser reads into ClientError."""
    import json

    body = json.dumps({"__type": code, "message": message}).encode()
    return Reply(status, body, [("Content-Type", "application/x-amz-json-1.1"), ("x-amzn-RequestId", request_id())])


def rest_xml_error(code: str, message: str, status: int) -> Reply:
    """The error shape of S3 (and other REST-XML services): `<Error><Code/><Message/></Error>`."""
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{escape(code)}</Code>'
            f"<Message>{escape(message)}</Message><RequestId>{request_id()}</RequestId></Error>")
    return Reply(status, body.encode(), [("Content-Type", "application/xml")])


def query_xml_error(code: str, message: str, status: int) -> Reply:
    """The error shape of the other Query-protocol services (IAM, STS): `<ErrorResponse><Error>...`."""
    body = (f'<ErrorResponse><Error><Type>Sender</Type><Code>{escape(code)}</Code><Message>{escape(message)}'
            f"</Message></Error><RequestId>{request_id()}</RequestId></ErrorResponse>")
    return Reply(status, body.encode())


@dataclass
class XmlNode:
    """A tiny XML builder for the EC2 answers the layer writes itself (a dict of element -> value, lists as
    `<item>`s, as EC2's Query responses encode them)."""

    fields: dict[str, object]

    def render(self) -> str:
        return "".join(_element(name, value) for name, value in self.fields.items() if value is not None)


def _element(name: str, value: object) -> str:
    if isinstance(value, XmlNode):
        return f"<{name}>{value.render()}</{name}>"
    if isinstance(value, list):
        return f"<{name}>" + "".join(f"<item>{item.render()}</item>" for item in value) + f"</{name}>"
    if isinstance(value, bool):
        return f"<{name}>{'true' if value else 'false'}</{name}>"
    return f"<{name}>{escape(str(value))}</{name}>"


def ec2_response(action: str, **fields: object) -> Reply:
    """An EC2 success answer `<{Action}Response xmlns=...><requestId/>...fields...</{Action}Response>`."""
    inner = XmlNode({"requestId": request_id(), **fields}).render()
    body = f'<?xml version="1.0" encoding="UTF-8"?>\n<{action}Response xmlns="{EC2_XMLNS}">{inner}</{action}Response>'
    return Reply(200, body.encode())


def tag_set(tags: Iterable[Tag]) -> list[XmlNode]:
    return [XmlNode({"key": t.key, "value": t.value}) for t in tags]
