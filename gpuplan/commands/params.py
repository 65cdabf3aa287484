"""Click parameter types for the numbers users type on the command line.

One rule for every numeric flag (gpuplan.units.finite): `nan`, `inf`, `-inf` and `1e999` are refused as bad
input (one line, exit 2) instead of flowing into estimates as nan hours or into budgets as infinite dollars.
Click's own `float` and `FloatRange` accept all of them (a nan even passes a range check).
"""

from __future__ import annotations

from typing import Any

import click

from gpuplan.units import finite


class FiniteFloat(click.FloatRange):
    """A float, optionally bounded like click.FloatRange, that must be finite."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        try:
            finite(number)
        except ValueError:
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return super().convert(number, param, ctx)

    def _describe_range(self) -> str:
        """No range in --help when the only rule is "finite"."""
        return "" if self.min is None and self.max is None else super()._describe_range()

    def __repr__(self) -> str:
        return "FiniteFloat" if self.min is None and self.max is None else f"FiniteFloat {self._describe_range()}"


NUMBER = FiniteFloat()
