"""Bounds on a job spec before anything walks it: size, nesting depth, alias expansion, recursive anchors.

A spec is a few hundred bytes of YAML, but YAML can describe far more than it spells: nine levels of ten aliases
(534 bytes) expand to 10^9 nodes, which the duplicate-key check and validation walked for minutes; 3,000 levels
of nesting overflowed Python's stack (RecursionError); `labels: &a {x: *a}` is a mapping that contains itself;
`/dev/zero` never ends. Each is refused here with one line (SpecError, exit 2) in milliseconds:

- the text is read with a cap (`read_bounded`: at most MAX_SPEC_BYTES + 1 bytes, so an endless file stops);
- the YAML event stream (a state machine, not recursion) is scanned for the nesting depth before any node tree
  is built (`check_events`);
- the node graph is walked without recursion, counting every node as often as aliases make it appear
  (`check_graph`): over MAX_EXPANDED_NODES is an alias bomb, a node inside itself is a recursive anchor.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from gpuplan.limits import limit

MAX_SPEC_BYTES = 256 * 1024  # the longest real spec (inline script and all) is a few KB
MAX_DEPTH = 64  # a spec nests 3 levels (limits.max_hours); env or labels values are flat
MAX_EXPANDED_NODES = 100_000  # every node as often as aliases repeat it


class SpecBoundsError(ValueError):
    """The spec is too big, too deep, or expands too far; the message is the one line to show."""


def read_bounded(path: Path) -> str:
    """The spec file's text, read at most MAX_SPEC_BYTES + 1 bytes (a device like /dev/zero never ends)."""
    from gpuplan.readfile import read_text

    return read_text(path, "the job spec", MAX_SPEC_BYTES)  # regular files only (gpuplan.readfile)


def check_size(text: str) -> None:
    if len(text) > MAX_SPEC_BYTES:
        raise SpecBoundsError(f"the job spec is over {MAX_SPEC_BYTES // 1024} KB; a spec is a few KB of YAML")


def check_events(text: str, loader: Any) -> None:
    """Refuse nesting deeper than MAX_DEPTH, read from the parser's events (no node tree yet, no recursion)."""
    import yaml

    bracket_depth(text)
    depth = 0
    for event in yaml.parse(text, Loader=loader):
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecBoundsError(f"line {event.start_mark.line + 1}: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1


def bracket_depth(text: str) -> None:
    """Refuse flow brackets (`[`, `{`) nested deeper than MAX_DEPTH, by one linear pass over the characters.

    PyYAML's scanner is quadratic in flow depth (each token re-checks every open level: 3,000 levels took a
    second on a busy machine) before the first event arrives, so the depth is read here first. Quoted text and
    comments are skipped; brackets inside a plain scalar still count, which errs only on a spec that opens more
    than 64 of them without closing."""
    depth, quote, comment, previous = 0, "", False, "\n"
    for char in text:
        if comment:
            comment = char != "\n"
        elif quote:
            if char == quote and not (quote == '"' and previous == "\\"):
                quote = ""
        elif char in "'\"":
            quote = char
        elif char == "#" and previous in " \t\n":
            comment = True
        elif char in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise SpecBoundsError(f"nested deeper than {MAX_DEPTH} levels")
        elif char in "]}":
            depth = max(depth - 1, 0)
        previous = char


def check_graph(root: Any) -> None:
    """Walk the composed nodes iteratively, each as often as aliases repeat it: refuse an alias bomb (over
    MAX_EXPANDED_NODES) and a recursive anchor (a node that contains itself)."""
    import yaml

    count = 0
    # (node, the ids of the collection nodes above it): a child whose id is among them is a cycle.
    stack: list[tuple[Any, frozenset[int]]] = [(root, frozenset())]
    while stack:
        node, above = stack.pop()
        count += 1
        if count > MAX_EXPANDED_NODES:
            raise SpecBoundsError(f"the job spec expands to over {MAX_EXPANDED_NODES:,} values through its aliases "
                                  "(&anchor/*alias); write the values out")
        if isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        elif isinstance(node, yaml.SequenceNode):
            children = list(node.value)
        else:
            continue
        inside = above | {id(node)}
        for child in children:
            if id(child) in inside:
                raise SpecBoundsError(f"line {child.start_mark.line + 1}: an alias refers to a value that contains "
                                      "it (a recursive anchor)")
            stack.append((child, inside))


def find_nul(data: Any, path: str = "") -> str | None:
    """The dotted path of the first string (key or value) holding a NUL character, or None.

    No argv, environment variable or file name can carry a NUL (execve ends the string there), so a spec with one
    would be recorded and then fail on the machine (the run ended `lost`): refuse it up front. Called after
    check_graph, so the data is finite and acyclic."""
    stack: list[tuple[Any, str]] = [(data, path)]
    while stack:
        value, where = stack.pop()
        if isinstance(value, str):
            if "\x00" in value:
                return where or "spec"
        elif isinstance(value, dict):
            for key, item in value.items():
                child = f"{where}.{key}" if where else str(key)
                if isinstance(key, str) and "\x00" in key:
                    return child
                stack.append((item, child))
        elif isinstance(value, list):
            stack.extend((item, f"{where}[{i}]") for i, item in enumerate(value))
    return None


def load_bounded(text: str) -> tuple[Any, Any]:
    """(node tree, data) of YAML `text` once every bound holds; SpecBoundsError when one does not, and PyYAML's
    own errors for text that is not YAML. One parse: the data is constructed from the checked node tree."""
    from gpuplan.jobs.yaml11 import SpecLoader

    check_size(text)
    check_events(text, SpecLoader)  # nesting depth, before any recursive code sees the text
    loader = SpecLoader(text)  # YAML 1.1's base-60, octal and yes/no surprises refused (gpuplan.jobs.yaml11)
    try:
        node = loader.get_single_node()
        if node is None:
            return None, None
        check_graph(node)  # alias bombs and recursive anchors, before anything walks the values
        return node, loader.construct_document(node)
    finally:
        loader.dispose()


def deadline_in_range(value: dt.datetime) -> dt.datetime:
    """A deadline the books and timers can hold: in UTC before the year 10000 and within 100 years (the `hours`
    limit) of now. `9999-12-31T23:59:59-12:00` passed --dry-run and crashed the real launch (OverflowError)."""
    try:
        utc = value.astimezone(dt.timezone.utc)
        latest = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=limit("hours").high)
    except OverflowError:
        utc, latest = None, None
    if utc is None or latest is None or utc > latest:
        raise ValueError(f"deadline {value.isoformat()} is more than 100 years away")
    return value
