"""Durable run storage: the spec's `storage:`, the run's URLs, which cloud takes which storage, the AWS role."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuplan.jobs.spec import parse_spec
from gpuplan.jobs.storage import check_storage, checkpoint_url, storage_misfit, storage_scheme
from gpuplan.providers.aws import iam as aws_iam

SPEC = "name: s\ncommand: python t.py\nstorage: {storage}\n"


@pytest.mark.parametrize(("value", "scheme"), [("s3://my-bucket/runs", "s3"), ("gs://b-1.x/a/b", "gs"),
                                                ("/shared/gpuplan", "path"), ("s3://my-bucket", "s3")])
def test_storage_values(value: str, scheme: str) -> None:
    assert storage_scheme(value) == scheme
    assert parse_spec(SPEC.format(storage=value + "/")).storage == value


@pytest.mark.parametrize("value", ["relative/dir", "s3://UPPER/x", "http://x/y", "/a/../b", "s3://b/$(id)",
                                   "/a\nb", "s3://ab"])
def test_bad_storage_is_a_spec_error(value: str) -> None:
    with pytest.raises(ValueError, match="storage"):
        check_storage(value)


def test_the_run_id_is_in_the_path() -> None:
    assert checkpoint_url("s3://b-b/p", "r-123") == "s3://b-b/p/r-123/checkpoints"


def test_each_cloud_takes_its_own_storage() -> None:
    assert storage_misfit("s3://bkt/p", "aws", ("s3",)) is None and storage_misfit("gs://bkt/p", "gcp", ("gs",)) is None
    assert storage_misfit("/shared", "slurm", ("path",)) is None and storage_misfit("gs://bkt/p", "plugin", ()) is None
    assert "gs:// prefix" in (storage_misfit("s3://bkt/p", "gcp", ("gs",)) or "")
    assert "s3:// prefix" in (storage_misfit("/shared", "aws", ("s3",)) or "")


def test_the_aws_role_may_touch_only_the_storage_prefix() -> None:
    policy = aws_iam.instance_policy("out", storage="s3://ckpt-bucket/team/runs")
    statements = [{k: v for k, v in s.items() if k != "Sid"} for s in policy["Statement"][1:3]]  # Sid: per prefix
    assert statements[0] == {"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
                             "Resource": "arn:aws:s3:::ckpt-bucket/team/runs/*"}
    assert statements[1] == {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::ckpt-bucket",
                             "Condition": {"StringLike": {"s3:prefix": ["team/runs/*"]}}}
    assert "copying checkpoints to and from s3://ckpt-bucket/team/runs" in aws_iam.needed_for(
        secrets=False, bucket=None, storage="s3://ckpt-bucket/team/runs")
    assert aws_iam.needed_for(secrets=False, bucket=None, storage="/shared") == ()


def test_the_strict_s3_check_denies_what_the_role_does_not_allow() -> None:
    from support.s3_policy import allowed, s3_request

    role = aws_iam.instance_policy("out", storage="s3://ckpt-bucket/team/runs")
    assert allowed(role, s3_request("GET", "/ckpt-bucket?list-type=2&prefix=team/runs/r-1/checkpoints/"))
    assert allowed(role, s3_request("PUT", "/ckpt-bucket/team/runs/r-1/checkpoints/m.pt"))
    assert allowed(role, s3_request("HEAD", "/ckpt-bucket/team/runs/r-1/code.tar.gz"))
    assert allowed(role, s3_request("PUT", "/out/gpuplan/r-1/node-0/job.log"))
    assert not allowed(role, s3_request("GET", "/ckpt-bucket?list-type=2&prefix=other/"))
    assert not allowed(role, s3_request("GET", "/ckpt-bucket/other/secret"))
    assert not allowed(role, s3_request("GET", "/out/gpuplan/r-1/node-0/job.log"))  # outputs: write only
    assert not allowed(role, s3_request("DELETE", "/ckpt-bucket/team/runs/r-1/checkpoints/m.pt"))


# The scheme knowledge is the providers': jobs/storage.py parses SCHEME://bucket/prefix for any scheme, a provider's
# `storage_schemes` says which its machines reach, and nothing outside providers/ names a cloud's scheme.


def test_a_scheme_a_new_provider_declares_needs_no_change_outside_its_package() -> None:
    assert storage_scheme("az://runs-bucket/team") == "az"
    assert storage_misfit("az://runs-bucket/team", "newcloud", ("az",)) is None
    assert storage_misfit("s3://runs-bucket/team", "newcloud", ("az",)) == (
        "storage s3://runs-bucket/team cannot be used on newcloud: a newcloud run keeps its checkpoints in an "
        "az:// prefix")


def test_the_known_schemes_are_what_the_registered_providers_declare() -> None:
    from gpuplan.providers.registry import load_provider_class, provider_names, storage_schemes

    declared = {s for name in provider_names() for s in load_provider_class(name).storage_schemes}
    assert storage_schemes() == declared and {"s3", "gs", "path"} <= declared


def test_a_default_storage_no_provider_reaches_is_one_line_exit_2() -> None:
    from gpuplan.config import config_path

    from support.clihelp import run_cli

    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('[defaults]\nstorage = "ftp://runs-bucket/x"\n')
    shown = run_cli("config", "show")
    assert shown.exit_code == 2 and len(shown.stderr.strip().splitlines()) == 1, shown.stderr
    assert ("storage ftp://runs-bucket/x: no provider keeps runs in ftp:// storage; they take an az:// prefix, "
            "a gs:// prefix, a shared folder path, an s3:// prefix") in shown.stderr


def test_a_spec_storage_its_provider_does_not_reach_is_refused_before_launch(tmp_path: Path) -> None:
    from support.clihelp import run_cli

    spec = tmp_path / "job.yaml"
    spec.write_text(SPEC.format(storage="ftp://runs-bucket/x"))
    out = run_cli("launch", str(spec), "--provider", "local", "--dry-run", "--allow-cpu")
    assert out.exit_code == 2, out.stderr
    assert ("storage ftp://runs-bucket/x cannot be used on local: a local run keeps its checkpoints in a shared "
            "folder path") in out.stderr


SCHEME_LITERAL_USES = ("startswith", "endswith", "removeprefix", "removesuffix")


def _scheme_uses(tree: ast.AST, schemes: frozenset[str]) -> list[tuple[int, str]]:
    """Comparisons with a provider's scheme (`== "s3"`), its URL prefix (`.startswith("gs://")`) or a dict keyed by
    schemes: dispatching on a cloud's storage outside its provider."""
    def literal(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value.lower()
            if text in schemes or any(text.startswith(f"{s}://") for s in schemes):
                return node.value
        return None

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                elts = operand.elts if isinstance(operand, (ast.Tuple, ast.List, ast.Set)) else [operand]
                found += [(node.lineno, f"compares with {lit!r}") for e in elts if (lit := literal(e))]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in SCHEME_LITERAL_USES and node.args and (lit := literal(node.args[0])):
            found.append((node.lineno, f".{node.func.attr}({lit!r})"))
        elif isinstance(node, ast.Dict) and any(k is not None and literal(k) for k in node.keys):
            found.append((node.lineno, "a dict keyed by storage schemes"))
    return found


def test_no_storage_scheme_of_a_provider_is_dispatched_on_outside_providers() -> None:
    from gpuplan.jobs.storage import PATH
    from gpuplan.providers.registry import storage_schemes

    root = Path(__file__).resolve().parents[3]
    schemes = frozenset(storage_schemes() - {PATH})
    files = sorted(p for top in ("gpuplan", "jobs") for p in (root / top).rglob("*.py")
                   if "providers" not in p.relative_to(root).parts)
    found = [f"{p.relative_to(root)}:{line}: {what}" for p in files
             for line, what in _scheme_uses(ast.parse(p.read_text()), schemes)]
    assert found == []


def test_the_scheme_check_catches_each_form() -> None:
    code = ('a == "s3"\nb in ("gs", "x")\nc.startswith("s3://")\nd.removeprefix("gs://")\n'
            'e = {"s3": 1}[f]\nok = g == "path"\n')
    assert [line for line, _ in _scheme_uses(ast.parse(code), frozenset({"s3", "gs"}))] == [1, 2, 3, 4, 5]
