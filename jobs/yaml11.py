"""The YAML loader of job specs: PyYAML's safe loader without YAML 1.1's surprises.

PyYAML implements YAML 1.1, whose plain scalars mean more than they seem: `max_hours: 1:30:00` is the base-60
number 5400 (a 5,400-hour fail-safe, not 90 minutes), `mode: 0755` is the octal 493, `lora: yes` and `on` are
booleans (then taken as 1 by a number field), and `deadline: 2026-02-30` is a timestamp whose construction crashed
(ValueError; `!!timestamp garbage` an AttributeError). Each is refused here with the line and how to write the
value instead (quoted, when it is text), as a MarkedYAMLError that the spec loader turns into one line, exit 2:

- base-60, octal and binary (0b) numbers: refused (write the number, or quote the text);
- YAML 1.1 booleans other than true/false (yes, no, on, off, y, n): refused (write true or false, or quote);
- integers of more digits than Python converts (4,300) and timestamps that are no date: refused;
- timestamps that are dates stay text, so the spec's own validation reads them (with the field's name).
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.constructor import ConstructorError

MAX_DIGITS = 4000  # below Python's int/str conversion limit (4,300 digits); no spec number has more than 30
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_OCTAL = re.compile(r"^[-+]?0[0-7_]+$")
_BINARY = re.compile(r"^[-+]?0b[01_]+$")  # YAML 1.1 only (https://yaml.org/type/int.html); 1.2's core has no 0b


def _refuse(node: yaml.Node, problem: str) -> ConstructorError:
    return ConstructorError(None, None, problem, node.start_mark)


class SpecLoader(yaml.SafeLoader):
    """SafeLoader that refuses YAML 1.1's base-60 numbers, octal numbers, yes/no/on/off booleans, huge integers
    and impossible timestamps, and keeps dates as text."""

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        value = str(self.construct_scalar(node))
        if _SEXAGESIMAL.match(value):
            raise _refuse(node, f"{value} is a YAML 1.1 base-60 number ({super().construct_yaml_int(node)}); quote "
                                f"it ('{value}') if it is text, or write the number itself")
        if _OCTAL.match(value):
            raise _refuse(node, f"{value} is a YAML 1.1 octal number ({super().construct_yaml_int(node)}); write it "
                                f"without the leading 0, or quote it ('{value}') if it is text")
        if _BINARY.match(value):
            raise _refuse(node, f"{value} is a YAML 1.1 binary number ({super().construct_yaml_int(node)}); write "
                                f"it in decimal, or quote it ('{value}') if it is text")
        if sum(c.isdigit() for c in value) > MAX_DIGITS:
            raise _refuse(node, f"a number of {len(value):,} digits is out of any range")
        return int(super().construct_yaml_int(node))

    def construct_yaml_float(self, node: yaml.ScalarNode) -> float:
        value = str(self.construct_scalar(node))
        if _SEXAGESIMAL.match(value):
            raise _refuse(node, f"{value} is a YAML 1.1 base-60 number; quote it ('{value}') if it is text, or "
                                "write the number itself")
        if len(value) > MAX_DIGITS:
            raise _refuse(node, f"a number of {len(value):,} characters is out of any range")
        return float(super().construct_yaml_float(node))

    def construct_yaml_bool(self, node: yaml.ScalarNode) -> bool:
        value = str(self.construct_scalar(node))
        if value.lower() not in ("true", "false"):
            raise _refuse(node, f"{value} is a YAML 1.1 boolean; write true or false, or quote it ('{value}') if "
                                "it is text")
        return bool(super().construct_yaml_bool(node))

    def construct_yaml_timestamp(self, node: yaml.ScalarNode) -> Any:
        value = str(self.construct_scalar(node))
        try:
            super().construct_yaml_timestamp(node)
        except (ValueError, AttributeError, OverflowError):
            raise _refuse(node, f"{value!r} is not a date or time (a YAML timestamp)") from None
        return value  # a date stays text: the field's own validation reads it (and names the field)


SpecLoader.add_constructor("tag:yaml.org,2002:int", SpecLoader.construct_yaml_int)
SpecLoader.add_constructor("tag:yaml.org,2002:float", SpecLoader.construct_yaml_float)
SpecLoader.add_constructor("tag:yaml.org,2002:bool", SpecLoader.construct_yaml_bool)
SpecLoader.add_constructor("tag:yaml.org,2002:timestamp", SpecLoader.construct_yaml_timestamp)
