"""moto fixtures for the AWS tests: in-process (mock_aws) and a server on 127.0.0.1, plus fault injection.

No test may reach real AWS. Three guards, each loud:
- credentials are the fake `testing` pair and no profile is set (checked before every AWS fixture);
- in-process, botocore's HTTP layer refuses any request to a host other than 127.0.0.1 (moto answers before
  the HTTP layer, so a request that gets there escaped moto);
- the server fixture checks the endpoint it hands out is loopback.

moto implements no error injection, so errors are injected through botocore's event hooks: in server mode a
`before-send` handler returns an EC2 XML error body with a 4xx status (the real parser turns it into a
ClientError); in-process, moto's own `before-send` handler would still run the call (and create phantom
instances), so the same XML body is parsed by botocore's real EC2 parser in a `before-call` handler, which
short-circuits the call.
"""

from __future__ import annotations

import os
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import pytest

FAKE_KEY = "testing"
LOOPBACK = {"127.0.0.1", "localhost", "::1"}
# The DLAMI parameter is AWS-reserved (moto refuses to create it), so tests register a GPU-like AMI and publish
# it under this parameter; the real default is checked to fail with a clear message. moto's ~1300 default AMIs
# are not loaded (0.6 s per region per test).
TEST_AMI_PARAMETER = "/gpuplan/test/dlami-id"
TEST_REGIONS = ("us-east-1", "us-west-2")


def register_test_ami(ec2: Any, architecture: str = "x86_64") -> str:
    """Register a GPU-base-like AMI (/dev/sda1 root) of `architecture` in the client's region; returns its id."""
    image = ec2.register_image(
        Name=f"gpuplan-test-dlami-{architecture}", Architecture=architecture, RootDeviceName="/dev/sda1",
        VirtualizationType="hvm",
        BlockDeviceMappings=[{"DeviceName": "/dev/sda1", "Ebs": {"VolumeSize": 75, "VolumeType": "gp3"}}])
    image_id = str(image["ImageId"])
    set_ami_architecture(image_id, architecture, ec2.meta.region_name)
    return image_id


def set_ami_architecture(image_id: str, architecture: str, region: str) -> None:
    """moto's RegisterImage drops `Architecture` (DescribeImages then lists none): set it on moto's own AMI, in
    this process or in the ThreadedMotoServer it runs, as EC2 would have recorded it."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends

    ec2_backends[DEFAULT_ACCOUNT_ID][region].amis[image_id].architecture = architecture


def publish_test_ami(ssm: Any, image_id: str) -> None:
    """Put the AMI id under TEST_AMI_PARAMETER (moto's SSM loads AWS's public parameters: ~1 s per region)."""
    ssm.put_parameter(Name=TEST_AMI_PARAMETER, Value=image_id, Type="String", Overwrite=True)


@dataclass
class Clients:
    """botocore clients cached for the whole run (creating one costs ~0.1 s; a new session ~0.6 s)."""

    session: Any
    _cache: dict[tuple[str, str], Any] = field(default_factory=dict)

    def __call__(self, service: str, region: str = "us-east-1") -> Any:
        key = (service, region)
        if key not in self._cache:
            self._cache[key] = self.session.client(service, region_name=region)
        return self._cache[key]


def assert_fake_credentials() -> None:
    """Fail loudly unless the environment holds moto's fake credentials and no profile or session token."""
    problems = []
    if os.environ.get("AWS_ACCESS_KEY_ID") != FAKE_KEY or os.environ.get("AWS_SECRET_ACCESS_KEY") != FAKE_KEY:
        problems.append("AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY are not the fake 'testing' pair")
    for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        if os.environ.get(var):
            problems.append(f"{var} is set")
    if problems:
        raise RuntimeError("refusing to run AWS tests that could reach real AWS: " + "; ".join(problems))


def guard_http(monkeypatch: pytest.MonkeyPatch) -> None:
    import botocore.httpsession

    original = botocore.httpsession.URLLib3Session.send

    def send(self: Any, request: Any) -> Any:
        host = urlparse(request.url).hostname
        if host not in LOOPBACK:
            raise RuntimeError(f"a test tried to reach {request.url} (not loopback): refusing to talk to real AWS")
        return original(self, request)

    monkeypatch.setattr(botocore.httpsession.URLLib3Session, "send", send)


@pytest.fixture(scope="session")
def aws_session() -> Any:
    """One boto3 session for the whole test run: a new session re-reads botocore's service models (~0.6 s)."""
    import boto3
    import moto  # noqa: F401 - moto adds its request hook to botocore's built-in handlers on import

    # Explicit fake keys: this session can never sign a request with real credentials.
    return boto3.session.Session(aws_access_key_id=FAKE_KEY, aws_secret_access_key=FAKE_KEY,
                                 region_name="us-east-1")


def live_endpoint(monkeypatch: pytest.MonkeyPatch) -> None:
    """A live (moto) endpoint: the AWS clients retry as they do for a user again (the conftest guard's one attempt
    is for its dead port)."""
    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)


def _enable_type_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto reads MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION once, at import: set the env and the parsed setting."""
    import moto.settings

    monkeypatch.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    monkeypatch.setenv("MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION", "true")
    monkeypatch.setattr(moto.settings, "EC2_ENABLE_INSTANCE_TYPE_VALIDATION", True)


@pytest.fixture(scope="session")
def aws_clients(aws_session: Any) -> Clients:
    return Clients(aws_session)


@pytest.fixture
def aws(moto_env: dict[str, str], aws_session: Any) -> Any:
    """An AwsProvider on in-process moto in us-east-1 with the test AMI and fast waiters (a test module that
    needs another set-up, e.g. the CLI's own provider, defines its own `aws`)."""
    from gpuplan.providers.aws.provider import AwsProvider

    return AwsProvider(session=aws_session, image_id=moto_env["us-east-1"], waiter_delay=0.05)


@pytest.fixture
def moto_env(monkeypatch: pytest.MonkeyPatch, aws_clients: Clients) -> Iterator[dict[str, str]]:
    """In-process moto: every boto3 call in the test is answered by moto; nothing reaches the network.

    Yields region -> the id of a test AMI registered there.
    """
    from moto import mock_aws

    assert_fake_credentials()
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)  # moto intercepts the real (amazonaws.com) endpoints
    live_endpoint(monkeypatch)
    _enable_type_validation(monkeypatch)
    guard_http(monkeypatch)
    with mock_aws():
        yield {region: register_test_ami(aws_clients("ec2", region)) for region in TEST_REGIONS}


@dataclass
class MotoServer:
    """A moto server on a loopback port, shared by a test module; `reset()` empties it between tests."""

    endpoint: str
    server: Any = field(repr=False)
    amis: dict[str, str] = field(default_factory=dict)

    def reset(self) -> None:
        req = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST", data=b"")
        with urllib.request.urlopen(req, timeout=10):
            pass

    def env(self) -> dict[str, str]:
        """The environment a process under test needs to reach this server and nothing else."""
        assert urlparse(self.endpoint).hostname in LOOPBACK, self.endpoint
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_ACCESS_KEY_ID": FAKE_KEY, "AWS_SECRET_ACCESS_KEY": FAKE_KEY,
                "AWS_DEFAULT_REGION": "us-east-1", "MOTO_EC2_ENABLE_INSTANCE_TYPE_VALIDATION": "true",
                **({"GPUPLAN_AWS_IMAGE_ID": self.amis["us-east-1"]} if self.amis else {})}


@pytest.fixture(scope="module")
def moto_server_module() -> Iterator[MotoServer]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield MotoServer(endpoint=f"http://{host}:{port}", server=server)
    finally:
        server.stop()


@pytest.fixture
def moto_server(moto_server_module: MotoServer, monkeypatch: pytest.MonkeyPatch) -> MotoServer:
    """The module's moto server, reset, with this test's environment pointed at it."""
    assert_fake_credentials()
    _enable_type_validation(monkeypatch)
    moto_server_module.reset()
    for key, value in moto_server_module.env().items():
        monkeypatch.setenv(key, value)
    live_endpoint(monkeypatch)
    guard_http(monkeypatch)
    import boto3

    session = boto3.session.Session()
    moto_server_module.amis = {r: register_test_ami(session.client("ec2", region_name=r)) for r in TEST_REGIONS}
    monkeypatch.setenv("GPUPLAN_AWS_IMAGE_ID", moto_server_module.amis["us-east-1"])
    return moto_server_module


# ---- error injection ------------------------------------------------------------------------------------------


def ec2_error_xml(code: str, message: str) -> bytes:
    """The body EC2 sends with a 4xx: the shape botocore's EC2 parser reads."""
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Response><Errors><Error><Code>{code}</Code>'
            f"<Message>{message}</Message></Error></Errors><RequestID>gpuplan-test</RequestID></Response>"
            ).encode()


class _RawBody:
    def __init__(self, body: bytes) -> None:
        self._body = body

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._body


@dataclass
class Injector:
    """Fail chosen calls of one operation with an EC2 error; `calls` records every call's parameters."""

    code: str
    message: str = "injected by the test"
    status: int = 400
    when: Callable[[dict[str, Any]], bool] = lambda params: True
    calls: list[dict[str, Any]] = field(default_factory=list)
    failed: int = 0

    def _params_of_body(self, body: Any) -> dict[str, Any]:
        from urllib.parse import parse_qs

        text = body.decode() if isinstance(body, bytes) else str(body or "")
        return {k: v[0] for k, v in parse_qs(text).items()}

    def before_send(self, request: Any, **_: Any) -> Any:
        """Server mode: answer with the XML error (moto's server never sees the call)."""
        from botocore.awsrequest import AWSResponse

        params = self._params_of_body(request.body)
        self.calls.append(params)
        if not self.when(params):
            return None
        self.failed += 1
        return AWSResponse(request.url, self.status, {}, _RawBody(ec2_error_xml(self.code, self.message)))

    def before_call(self, params: dict[str, Any], model: Any, **_: Any) -> Any:
        """In-process: parse the same XML with botocore's EC2 parser and short-circuit the call."""
        from botocore.awsrequest import AWSResponse
        from botocore.parsers import create_parser

        flat = _query_params(params)
        self.calls.append(flat)
        if not self.when(flat):
            return None
        self.failed += 1
        parsed = create_parser("ec2").parse(
            {"status_code": self.status, "headers": {}, "body": ec2_error_xml(self.code, self.message)},
            model.output_shape)
        return AWSResponse("https://ec2.amazonaws.com/", self.status, {}, None), parsed


def _query_params(request_dict: dict[str, Any]) -> dict[str, Any]:
    """The serialised EC2 query parameters of a `before-call` request dict (same names as on the wire)."""
    body = request_dict.get("body")
    return {k: str(v) for k, v in body.items()} if isinstance(body, dict) else {}


def inject(client: Any, operation: str, injector: Injector, *, server: bool) -> Injector:
    """Register `injector` on one botocore client for `operation` (e.g. "RunInstances")."""
    if server:
        client.meta.events.register_first(f"before-send.ec2.{operation}", injector.before_send)
    else:
        client.meta.events.register_first(f"before-call.ec2.{operation}", injector.before_call)
    return injector


def in_zone(*zones: str) -> Callable[[dict[str, Any]], bool]:
    """A `when` predicate: the call targets one of these zones."""
    return lambda params: params.get("Placement.AvailabilityZone") in zones


def serve(client: Any, operation: str, parsed: dict[str, Any], calls: list[dict[str, Any]]) -> None:
    """Answer an operation moto does not implement (CreatePlacementGroup) with a response of its real shape."""
    from botocore.awsrequest import AWSResponse

    def handler(params: dict[str, Any], **_: Any) -> Any:
        calls.append(_query_params(params))
        return AWSResponse("https://ec2.amazonaws.com/", 200, {}, None), parsed

    client.meta.events.register_first(f"before-call.ec2.{operation}", handler)


def ec2_error_sitecustomize(code: str, message: str, *, status: int = 400, operation: str | None = None,
                            region_env: str | None = None) -> str:
    """A sitecustomize.py for a CLI child process (put its folder on PYTHONPATH): EC2 calls (every one, or only
    `operation`) answer EC2's error `code` before they reach the server, in every region, or only in the region
    named by the environment variable `region_env`. A child has no in-process hook."""
    only = f"client.meta.region_name == os.environ[{region_env!r}]" if region_env else "True"
    event = f"before-send.ec2.{operation}" if operation else "before-send.ec2"
    body = (f"<Response><Errors><Error><Code>{code}</Code><Message>{message}</Message></Error></Errors>"
            "<RequestID>t</RequestID></Response>").encode()
    return f"""\
import os
import botocore.session
from botocore.awsrequest import AWSResponse

class _Body:
    def stream(self, **_):
        yield {body!r}

_create = botocore.session.Session.create_client

def create_client(self, service_name, *args, **kwargs):
    client = _create(self, service_name, *args, **kwargs)
    if service_name == "ec2" and {only}:
        client.meta.events.register_first(
            {event!r}, lambda request, **_: AWSResponse(request.url, {status}, {{}}, _Body()))
    return client

botocore.session.Session.create_client = create_client
"""


def no_capacity_sitecustomize(region_env: str | None = None) -> str:
    """Every RunInstances answers InsufficientInstanceCapacity (in every region, or only `region_env`'s): a failover
    moves on to the next placement."""
    return ec2_error_sitecustomize("InsufficientInstanceCapacity", "We currently do not have sufficient capacity",
                                   operation="RunInstances", region_env=region_env)


def spot_interrupt(instance_id: str, region: str = "us-east-1") -> None:
    """What EC2 does on a spot interruption, done to moto's instance (in this process, or in the ThreadedMotoServer
    this process runs): EC2 has no API to interrupt a spot instance, and neither has moto."""
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.instances import StateReason

    backend = ec2_backends[DEFAULT_ACCOUNT_ID][region]
    backend.terminate_instances([instance_id])
    backend.get_instance(instance_id).state_reason = StateReason(
        "Server.SpotInstanceTermination: Spot instance termination", "Server.SpotInstanceTermination")


# ---- what a launch sent -----------------------------------------------------------------------------------------

USER_DATA_LIMIT = 16384  # EC2: "User data is limited to 16 KB, in raw form, before it is base64-encoded"
TEST_INSTANCE_PROFILE = "gpuplan-test-instance"


def user_data_of(ec2: Any, instance_id: str) -> str:
    """The boot script an instance got: EC2's base64 user data, gzip (gpuplan compresses it), within 16 KB raw."""
    import base64
    import gzip

    raw = base64.b64decode(ec2.describe_instance_attribute(
        InstanceId=instance_id, Attribute="userData")["UserData"]["Value"])
    assert len(raw) <= USER_DATA_LIMIT, f"user data of {len(raw)} bytes: EC2 refuses over {USER_DATA_LIMIT}"
    assert raw[:2] == b"\x1f\x8b", "gpuplan's user data is gzip (cloud-init decompresses it)"
    return gzip.decompress(raw).decode()


def create_instance_profile(iam: Any, name: str = TEST_INSTANCE_PROFILE) -> str:
    """An instance profile holding a role, as `gpuplan setup aws --create` makes, whose policy lets the machines read
    gpuplan's secrets and use any bucket (moto does not check policies; the strict layer's SimulatePrincipalPolicy,
    which the launch check asks, does: tests/support/strict_aws/account.py rule 13)."""
    import json

    trust = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                     "Action": "sts:AssumeRole"}]}
    iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
    iam.put_role_policy(RoleName=name, PolicyName="gpuplan-test", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Action": "ssm:GetParameter", "Resource": "arn:aws:ssm:*:*:parameter/gpuplan/*"},
            {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject", "s3:ListBucket"], "Resource": "*"}]}))
    iam.create_instance_profile(InstanceProfileName=name)
    iam.add_role_to_instance_profile(InstanceProfileName=name, RoleName=name)
    return name
