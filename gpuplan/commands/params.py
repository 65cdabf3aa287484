"""Click parameter types for the numbers users type on the command line.

One rule for every numeric flag (gpuplan.units.finite): `nan`, `inf`, `-inf` and `1e999` are refused as bad
input (one line, exit 2) instead of flowing into estimates as nan hours or into budgets as infinite dollars.
Click's own `float` and `FloatRange` accept all of them (a nan even passes a range check).

A second rule on top (`bounded`, `bounded_int`): the number must lie inside its range in gpuplan.limits, the
table the job spec checks too, so `--gpus 10**23` is refused as plainly as `gpus_per_node: 10**23` in a spec.
"""

from __future__ import annotations

from typing import Any

import click

from gpuplan.limits import check, limit
from gpuplan.units import finite


class FiniteFloat(click.FloatRange):
    """A float, optionally bounded like click.FloatRange, that must be finite."""

    name = "float"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return super().convert(self.finite_float(value, param, ctx), param, ctx)

    def finite_float(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        """`value` as a float; nan, inf and overflowing literals fail as bad input."""
        number = click.FLOAT.convert(value, param, ctx)
        try:
            finite(number)
        except ValueError:
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return float(number)

    def _describe_range(self) -> str:
        """No range in --help when the only rule is "finite"."""
        return "" if self.min is None and self.max is None else super()._describe_range()

    def __repr__(self) -> str:
        return "FiniteFloat" if self.min is None and self.max is None else f"FiniteFloat {self._describe_range()}"


NUMBER = FiniteFloat()


class Bounded(FiniteFloat):
    """A finite float inside gpuplan.limits' range `name` (optionally with a flag's own higher floor `low`)."""

    def __init__(self, name: str, *, low: float | None = None) -> None:
        bound = limit(name)
        super().__init__(min=bound.low if low is None else low, max=bound.high,
                         min_open=bound.low_open and low is None, max_open=bound.high_open)
        self.limit_name = name
        self.low = low

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = self.finite_float(value, param, ctx)
        try:
            check(self.limit_name, number, "", text=value if isinstance(value, str) else None, low=self.low)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return float(number)

    def _describe_range(self) -> str:
        """`--help` states the table's range in words (`more than 0 and at most 1e+10 tokens/s per GPU`)."""
        return _range_words(self.limit_name, self.low)

    def __repr__(self) -> str:
        return f"Bounded({self.limit_name!r})"


class BoundedInt(click.IntRange):
    """A whole number inside gpuplan.limits' range `name` (optionally with a flag's own floor `low`)."""

    name = "integer"

    def __init__(self, name: str, *, low: int | None = None) -> None:
        bound = limit(name)
        super().__init__(min=int(bound.low) if low is None else low, max=int(bound.high),
                         min_open=bound.low_open and low is None, max_open=bound.high_open)
        self.limit_name = name
        self.low = low

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.INT.convert(value, param, ctx)
        try:
            check(self.limit_name, number, "", text=value if isinstance(value, str) else None, low=self.low)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return number

    def _describe_range(self) -> str:
        return _range_words(self.limit_name, self.low)

    def __repr__(self) -> str:
        return f"BoundedInt({self.limit_name!r})"


def _range_words(name: str, low: float | None) -> str:
    return limit(name).floored(low).describe()


def bounded(name: str, *, low: float | None = None) -> Bounded:
    """The Click type of a float flag whose range is gpuplan.limits' `name`."""
    return Bounded(name, low=low)


def bounded_int(name: str, *, low: int | None = None) -> BoundedInt:
    """The Click type of a whole-number flag whose range is gpuplan.limits' `name`."""
    return BoundedInt(name, low=low)
