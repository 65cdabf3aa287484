"""The provider interface is closed: nothing outside providers/ knows a cloud by name or probes a provider.

Adding a cloud must mean a package under providers/ and a line in the registry, nothing else: so no module of
gpuplan/ or jobs/ outside providers/ may compare a value with a cloud's name, dispatch on one, or look into a
provider with getattr/inspect. Stricter than a grep for `== "aws"`: it reads the syntax tree, so it catches the
name on either side, `!=`, `in`/`not in` a tuple, list, set or dict literal, `match ... case "gcp":`, a name
bound to a cloud literal and then compared, and `.startswith("aws")`; and it knows every registered provider's
name plus the clouds still to come.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gpuplan.providers.base import Attachable, Provider, RefreshesPrices
from gpuplan.providers.registry import BUILTIN_PROVIDERS, load_provider_class

ROOT = Path(__file__).resolve().parents[3]
CHECKED = ("gpuplan", "jobs")
CLOUD_NAMES = frozenset(BUILTIN_PROVIDERS) | {"azure", "gce", "ec2", "lambda", "runpod", "kubernetes"}


def _sources() -> list[Path]:
    files = [p for top in CHECKED for p in (ROOT / top).rglob("*.py")]
    return sorted(p for p in files if "providers" not in p.relative_to(ROOT).parts)


def _cloud_literals(node: ast.AST) -> list[str]:
    """The cloud names among the string literals `node` is (or holds, for a tuple/list/set/dict literal)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if node.value.lower() in CLOUD_NAMES else []
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [name for elt in node.elts for name in _cloud_literals(elt)]
    if isinstance(node, ast.Dict):
        return [name for key in node.keys if key is not None for name in _cloud_literals(key)]
    return []


def cloud_name_uses(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every comparison or dispatch on a cloud's name in `tree`."""
    bound: set[str] = set()  # names assigned a cloud literal (AWS = "aws"), compared later
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _cloud_literals(node.value) and not isinstance(node.value, ast.Dict):
            bound.update(t.id for t in node.targets if isinstance(t, ast.Name))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                names = _cloud_literals(operand)
                if isinstance(operand, ast.Name) and operand.id in bound:
                    names = [operand.id]
                found += [(node.lineno, f"compares with {n!r}") for n in names]
        elif isinstance(node, ast.match_case):
            found += [(node.pattern.lineno, f"case {n!r}") for sub in ast.walk(node.pattern)
                      if isinstance(sub, ast.MatchValue) for n in _cloud_literals(sub.value)]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("startswith", "endswith") and node.args:
            found += [(node.lineno, f".{node.func.attr}({n!r})") for n in _cloud_literals(node.args[0])]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Dict) and _cloud_literals(node.value):
            found.append((node.lineno, "indexes a dict keyed by cloud names"))
    return found


def provider_probes(tree: ast.AST) -> list[tuple[int, str]]:
    """getattr(provider...)/hasattr(provider...) and inspect.signature: asking a provider what it can do
    instead of declaring it (capabilities are flags and mixins on the class)."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in ("getattr", "hasattr") and node.args:
            target = ast.unparse(node.args[0])
            if "provider" in target.lower() or target in ("cls", "self.provider"):
                found.append((node.lineno, f"{func.id}({target}, ...)"))
        if isinstance(func, ast.Attribute) and func.attr == "signature" and ast.unparse(func.value) == "inspect":
            found.append((node.lineno, "inspect.signature"))
    return found


@pytest.mark.parametrize("snippet, expected", [
    ('x == "aws"', 1), ('"gcp" != cloud', 1), ('cloud in ("local", "slurm")', 2), ('c not in {"azure"}', 1),
    ('AWS = "aws"\nif c == AWS: pass', 1), ('match c:\n    case "gcp": pass', 1), ('c.startswith("aws")', 1),
    ('{"aws": 1, "gcp": 2}[cloud]', 1), ('x == "awsome"', 0), ('provider.cloud == other.cloud', 0),
])
def test_the_checker_catches_what_the_grep_misses(snippet: str, expected: int) -> None:
    """The checker itself: each form of a cloud-name comparison is found, and look-alikes are not."""
    assert len(cloud_name_uses(ast.parse(snippet))) == expected


def test_no_cloud_name_is_compared_outside_providers() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in _sources()
                 for line, what in cloud_name_uses(ast.parse(path.read_text(), str(path)))]
    assert offenders == []


def test_nothing_outside_providers_probes_a_provider() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in _sources()
                 for line, what in provider_probes(ast.parse(path.read_text(), str(path)))]
    assert offenders == []


@pytest.mark.parametrize("name", sorted(BUILTIN_PROVIDERS))
def test_every_builtin_provider_declares_complete_capabilities(name: str) -> None:
    """A declared capability's methods are abstract: a provider class that forgot one could not be built.
    Every built-in can be attached to; the clouds with price APIs say so by class."""
    cls = load_provider_class(name)
    assert issubclass(cls, Provider) and not cls.__abstractmethods__
    assert issubclass(cls, Attachable)
    assert issubclass(cls, RefreshesPrices) == cls.priced_by_catalog
    assert "include_ended" in cls.list_tagged.__code__.co_varnames
