"""Event data is read and written in one place: gpuplan/runs/events.py (through the payload dataclasses).

No other module of gpuplan/, providers/ or jobs/ may touch the stored JSON: it reads the syntax tree for the
`data_json` column (an attribute, a keyword, or a raw SQL string naming it), for keys taken out of the data
`history()` hands to displays (`event["data"]["hours"]`), for a `record_event`/`new_event` call that spreads
loose keyword data (`**data`) instead of passing its payload dataclass, and for an import from the events module
of anything but its typed API (the untyped `event_data(event)` dict that modules used to take apart).
"""

from __future__ import annotations

import ast
import dataclasses
import typing
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.runs import payloads
from gpuplan.runs.events import PAYLOAD_KINDS, EventKind, new_event

ROOT = Path(__file__).resolve().parents[3]
CHECKED = ("gpuplan", "providers", "jobs")
THE_ONE_PLACE = Path("gpuplan/runs/events.py")
COLUMN = "data_json"
WRITERS = frozenset({"record_event", "new_event"})
# what other modules may take from gpuplan.runs.events: the kinds, the typed writers and readers, and `history`
# (a display's copy of the stored JSON, whose keys the `["data"]` rule keeps anyone from taking apart)
TYPED_API = frozenset({"EventKind", "PAYLOAD_KINDS", "new_event", "record_event", "events_of", "payload",
                       "read_payload", "LATEST_OF_KIND_SQL", "history"})
# the kinds whose message says it all (everything else that carries data has a payload dataclass)
NO_DATA = frozenset({EventKind.LAUNCHING, EventKind.CPU_FALLBACK, EventKind.CAP, EventKind.STOP,
                     EventKind.ADOPT_FAILED, EventKind.RELAUNCH_SKIPPED, EventKind.SCHEDULE_PAUSED,
                     EventKind.SCHEDULE_RESUMED})


def _is_data_key(node: ast.AST) -> bool:
    """`x["data"]` or `x.get("data")`: the data of an event as `history()` gives it."""
    if isinstance(node, ast.Subscript):
        return isinstance(node.slice, ast.Constant) and node.slice.value == "data"
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get"
            and bool(node.args) and isinstance(node.args[0], ast.Constant) and node.args[0].value == "data")


def data_reads(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, what) for every place `tree` reads or writes event data past the payload functions."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr == COLUMN:
            found.append((node.lineno, f".{COLUMN}"))
        elif isinstance(node, ast.keyword) and node.arg == COLUMN:
            found.append((node.value.lineno, f"{COLUMN}="))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and COLUMN in node.value:
            found.append((node.lineno, f"SQL naming {COLUMN}"))
        elif isinstance(node, (ast.Subscript, ast.Attribute)) and _is_data_key(node.value) \
                and (isinstance(node, ast.Subscript) or node.attr == "get"):
            found.append((node.lineno, "a key of an event's data"))
        elif isinstance(node, ast.Call) and _called(node) in WRITERS \
                and any(k.arg is None for k in node.keywords):
            found.append((node.lineno, f"{_called(node)}(**data)"))
        elif isinstance(node, ast.ImportFrom) and node.module == "gpuplan.runs.events":
            found += [(node.lineno, f"imports {a.name}") for a in node.names if a.name not in TYPED_API]
    return sorted(found)


def _called(node: ast.Call) -> str | None:
    func = node.func
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _sources() -> list[Path]:
    return sorted(p for top in CHECKED for p in (ROOT / top).rglob("*.py") if p.relative_to(ROOT) != THE_ONE_PLACE)


def test_no_module_but_the_events_module_reads_or_writes_event_data() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in _sources()
             for line, what in data_reads(ast.parse(path.read_text(), str(path)))]
    assert found == [], "\n".join(found)


@pytest.mark.parametrize(("code", "what"), [
    # what the modules did before the payloads were typed
    ("regions = json.loads(data_json or '{}').get('regions')\nrows = select(Run.provider, Event.data_json)",
     ".data_json"),
    ("session.add(Event(kind=k, data_json=json.dumps(changes)))", "data_json="),
    ("SQL = \"SELECT data_json FROM events WHERE kind = 'relaunch'\"", "SQL naming data_json"),
    ("record_event(session, run, EventKind.RELAUNCH, msg, generation=2, **resume.as_data())", "record_event(**data)"),
    ("hours = event['data']['hours']", "a key of an event's data"),
    ("cap = row.get('data').get('cap')", "a key of an event's data"),
    ("from gpuplan.runs.events import EventKind, event_data", "imports event_data"),
])
def test_the_check_catches_each_way_of_going_around_the_payloads(code: str, what: str) -> None:
    assert what in [w for _, w in data_reads(ast.parse(code))]


def test_the_check_leaves_typed_reads_alone() -> None:
    code = ("plan = payload(event, LaunchPlanData)\nregions = plan.regions if plan else ()\n"
            "record_event(session, run, EventKind.RELAUNCH, msg, RelaunchData(2))\nkind = event['kind']")
    assert data_reads(ast.parse(code)) == []


def test_every_kind_carries_a_payload_dataclass_or_nothing() -> None:
    typed = {kind for kinds in PAYLOAD_KINDS.values() for kind in kinds}
    assert typed | NO_DATA == set(EventKind) and not typed & NO_DATA
    for cls in PAYLOAD_KINDS:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls  # type: ignore[attr-defined]


def _payload_classes() -> list[type[object]]:
    return [c for c in vars(payloads).values() if isinstance(c, type) and dataclasses.is_dataclass(c)]


@pytest.mark.parametrize("cls", _payload_classes(), ids=lambda c: c.__name__)
def test_money_is_decimal_and_no_field_is_any(cls: type[object]) -> None:
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        assert hints[f.name] is not typing.Any and "Any" not in str(hints[f.name]), (cls, f.name)
        if f.name.endswith(("_usd", "price_per_hour")):
            assert hints[f.name] == Decimal | None, (cls, f.name)


def test_a_kind_is_written_only_with_its_own_payload() -> None:
    with pytest.raises(TypeError, match="a launch_plan event does not carry RelaunchData"):
        new_event(EventKind.LAUNCH_PLAN, "plan", payloads.RelaunchData(1))
    with pytest.raises(TypeError, match="a cap event does not carry CappedData"):
        new_event(EventKind.CAP, "cap", payloads.CappedData("b"))
    assert new_event(EventKind.CAPPED, "capped", payloads.CappedData("b", Decimal("1.10"))).data_json == \
        '{"budget": "b", "spent_usd": "1.10", "amount_usd": null}'
