"""The job-spec reference page, generated from the pydantic model's JSON schema (gpuplan.jobs.spec.JobSpec).

Every field with its type, default and description comes from the schema, so a new field appears at the next
`make docs`. Examples are real: the value each field has in the shipped example specs (examples/*.yaml), else
the schema's own `examples`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
JSONValue = object


@dataclass(frozen=True)
class SpecField:
    """One field of the spec, flattened: `resources.gpu`, its schema and whether its section requires it."""

    path: str
    schema: Mapping[str, JSONValue]
    required: bool


def job_spec_schema() -> dict[str, JSONValue]:
    from gpuplan.jobs.spec import JobSpec

    return JobSpec.model_json_schema(by_alias=True, mode="validation")


def _resolve(schema: Mapping[str, JSONValue], root: Mapping[str, JSONValue], *,
             overlay: bool = True) -> Mapping[str, JSONValue]:
    """A schema through its $ref; with `overlay`, the referring field's own keys (its description) win."""
    ref = schema.get("$ref")
    if isinstance(ref, str):
        target: object = root
        for part in ref.removeprefix("#/").split("/"):
            target = target[part]  # type: ignore[index]
        if not overlay:
            return target  # type: ignore[return-value]
        return {**target, **{k: v for k, v in schema.items() if k != "$ref"}}  # type: ignore[dict-item]
    return schema


def _object_of(schema: Mapping[str, JSONValue], root: Mapping[str, JSONValue]) -> Mapping[str, JSONValue] | None:
    """The object schema a field holds (a section such as `resources`), through $ref and `X | None`."""
    schema = _resolve(schema, root, overlay=False)
    if schema.get("type") == "object" and "properties" in schema:
        return schema
    for option in schema.get("anyOf", []):  # type: ignore[union-attr]
        found = _object_of(option, root)  # type: ignore[arg-type]
        if found is not None:
            return found
    return None


def walk_fields(schema: Mapping[str, JSONValue] | None = None) -> Iterator[SpecField]:
    """Every field, sections first-level then their fields, in the model's order."""
    root = schema or job_spec_schema()
    yield from _walk(root, root, "")


def _walk(obj: Mapping[str, JSONValue], root: Mapping[str, JSONValue], prefix: str) -> Iterator[SpecField]:
    required = set(obj.get("required", []))  # type: ignore[arg-type]
    for name, sub in obj.get("properties", {}).items():  # type: ignore[union-attr]
        path = f"{prefix}{name}"
        yield SpecField(path, _resolve(sub, root), name in required)
        section = _object_of(sub, root)
        if section is not None:
            yield from _walk(section, root, f"{path}.")


def type_name(schema: Mapping[str, JSONValue], root: Mapping[str, JSONValue]) -> str:
    schema = _resolve(schema, root)
    if "enum" in schema:
        return " \\| ".join(f"`{json.dumps(v)}`" for v in schema["enum"])  # type: ignore[union-attr]
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "anyOf" in schema:
        names = [type_name(s, root) for s in schema["anyOf"]]  # type: ignore[union-attr]
        names = [n for n in names if n != "null"] + (["null"] if "null" in names else [])
        return " or ".join(dict.fromkeys(names))
    kind = schema.get("type")
    if kind == "array":
        return f"list of {type_name(schema.get('items', {}), root)}"  # type: ignore[arg-type]
    if kind == "object":
        if "properties" in schema:
            return "section"
        values = schema.get("additionalProperties")
        return f"map of string to {type_name(values, root)}" if isinstance(values, dict) else "map"
    if schema.get("format") == "date-time":
        return "date-time"
    if kind == "string" and "pattern" in schema and schema.get("title", "").lower().startswith("money"):
        return "amount"
    return str(kind) if kind else "any"


def example_values(folder: Path = REPO / "examples") -> dict[str, tuple[str, str]]:
    """field path -> (value as YAML, the example file it comes from), from the shipped example specs."""
    found: dict[str, tuple[str, str]] = {}
    for spec in sorted(folder.glob("*.yaml")):
        data = yaml.safe_load(spec.read_text())
        if isinstance(data, dict):
            _collect(data, "", spec.name, found)
    return found


def _collect(data: Mapping[str, object], prefix: str, source: str, found: dict[str, tuple[str, str]]) -> None:
    for key, value in data.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and path != "env" and path != "labels":
            _collect(value, f"{path}.", source, found)
        if path not in found and isinstance(value, str) and "\n" in value:
            found[path] = (value.splitlines()[0] + " ...", source)
        elif path not in found:
            text = yaml.safe_dump(value, default_flow_style=True, width=10_000).strip()
            found[path] = (text.removesuffix("...").strip(), source)


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _default(field: SpecField) -> str:
    if field.required:
        return "required"
    if "default" not in field.schema:
        return ""
    value = field.schema["default"]
    if value is None or value == [] or value == {}:
        return "—" if value is None else f"`{json.dumps(value)}`"
    return f"`{json.dumps(value)}`"


def render_spec_reference() -> str:
    root = job_spec_schema()
    examples = example_values()
    fields = list(walk_fields(root))
    lines = [
        "# Job spec reference",
        "",
        "A job spec is a YAML file that `gpuplan plan`, `gpuplan launch` and `gpuplan schedule` read. This page is",
        "generated from the pydantic model's JSON schema (`gpuplan.jobs.spec.JobSpec`) at build time",
        "(`scripts/docsite/spec_reference.py`); the examples are the values the shipped specs in `examples/` use.",
        "",
        "Only `name` and `command` (or a multi-line `run`) are required. Unknown keys and bad values are errors",
        "that name the line (exit 2). Sizes read `7B`, `1.3e9`, `2T`; durations `72h`, `90m`, `3d` (a bare number",
        "is hours); money `25`, `0.5` or `\"$12.50\"`. A minimal spec:",
        "",
        "```yaml",
        (REPO / "examples" / "cpu-hello.yaml").read_text().strip() if (REPO / "examples" / "cpu-hello.yaml").exists()
        else "name: hello\nruntime: process\ncommand: echo hello",
        "```",
        "",
    ]
    sections = [f for f in fields if "." not in f.path]
    top = [f for f in sections if _object_of(f.schema, root) is None]
    lines += _table("Top-level fields", top, root, examples, "")
    for section in sections:
        obj = _object_of(section.schema, root)
        if obj is None:
            continue
        members = [f for f in fields if f.path.startswith(section.path + ".") and f.path.count(".") == 1]
        model = root.get("$defs", {}).get(str(obj.get("title")), obj)  # type: ignore[union-attr]
        about = str(model.get("description", "")).strip()  # the section's class docstring
        lines += _table(f"`{section.path}`", members, root, examples, about)
    lines += ["## The JSON schema", "",
              "The same schema as JSON, for editors that validate YAML against one "
              "(`JobSpec.model_json_schema()`):", "",
              "??? note \"job-spec.schema.json\"", "",
              "    ```json",
              *("    " + line for line in json.dumps(root, indent=2).splitlines()),
              "    ```", ""]
    return "\n".join(lines)


def _table(title: str, fields: list[SpecField], root: Mapping[str, JSONValue],
           examples: Mapping[str, tuple[str, str]], about: str) -> list[str]:
    lines = [f"## {title}", ""]
    if about:
        lines += [" ".join(about.split()), ""]
    lines += ["| field | type | default | description | example |", "| --- | --- | --- | --- | --- |"]
    for field in fields:
        example = examples.get(field.path)
        if example is not None:
            shown = f"`{_cell(example[0])}` ({example[1]})"
        elif field.schema.get("examples"):
            shown = f"`{_cell(json.dumps(field.schema['examples'][0]))}`"  # type: ignore[index]
        else:
            shown = ""
        desc = _cell(str(field.schema.get("description", "")))
        lines.append(f"| `{field.path}` | {type_name(field.schema, root)} | {_default(field)} | {desc} | {shown} |")
    lines.append("")
    return lines
