"""What a foreign task file becomes: a gpuplan spec's YAML text and the keys that did not map."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Translation:
    """A foreign task as a gpuplan spec: the spec's YAML text, where it came from, and what did not map."""

    origin: str  # "skypilot" | "dstack"
    spec_text: str
    unmapped: list[str] = field(default_factory=list)

    def note(self) -> str:
        """The one line that names everything left behind (empty when everything mapped)."""
        if not self.unmapped:
            return ""
        return (f"{self.origin} keys with no gpuplan equivalent, not used: {'; '.join(self.unmapped)} "
                "(see docs/guides/coming-from-skypilot-dstack.md)")


def dump_spec(data: dict[str, object], header: str) -> str:
    """YAML for a translated spec: keys in gpuplan's order, scripts as literal blocks, a comment on top."""
    import yaml

    class _Dumper(yaml.SafeDumper):
        pass

    def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
        style = "|" if "\n" in value else None
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)

    _Dumper.add_representer(str, _str)
    body = yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True, width=120)
    return header + body
