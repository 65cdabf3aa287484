"""Click parameter types for the numbers users type on the command line.

One rule for every numeric flag (gpuplan.units.finite): `nan`, `inf`, `-inf` and `1e999` are refused as bad
input (one line, exit 2) instead of flowing into estimates as nan hours or into budgets as infinite dollars.
Click's own `float` and `FloatRange` accept all of them (a nan even passes a range check).

A second rule on top (`bounded`, `bounded_int`): the number must lie inside its range in gpuplan.limits, the
table the job spec checks too, so `--gpus 10**23` is refused as plainly as `gpus_per_node: 10**23` in a spec.
"""

from __future__ import annotations

from collections.abc import Callable
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


class _InLimit(click.ParamType):
    """What the float and the whole-number flavours share: gpuplan.limits' range `limit_name` (with a flag's own
    floor `low`), handed to Click's range type, checked with the table's wording, and described in --help."""

    limit_name: str
    low: float | None

    def _limit_range(self, name: str, low: float | None, cast: Callable[[float], Any] | None = None
                     ) -> dict[str, Any]:
        """Remember the range and return Click's range arguments for it (`cast`: int for a whole-number type)."""
        self.limit_name, self.low = name, low
        bound = limit(name)
        as_type = cast or (lambda number: number)
        return {"min": as_type(bound.low) if low is None else low, "max": as_type(bound.high),
                "min_open": bound.low_open and low is None, "max_open": bound.high_open}

    def _checked(self, number: Any, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        try:
            check(self.limit_name, number, "", text=value if isinstance(value, str) else None, low=self.low)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)
        return number

    def _describe_range(self) -> str:
        """`--help` states the table's range in words (`more than 0 and at most 1e+10 tokens/s per GPU`)."""
        return limit(self.limit_name).floored(self.low).describe()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.limit_name!r})"


class Bounded(_InLimit, FiniteFloat):
    """A finite float inside gpuplan.limits' range `name` (optionally with a flag's own higher floor `low`)."""

    def __init__(self, name: str, *, low: float | None = None) -> None:
        super().__init__(**self._limit_range(name, low))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return float(self._checked(self.finite_float(value, param, ctx), value, param, ctx))


class BoundedInt(_InLimit, click.IntRange):
    """A whole number inside gpuplan.limits' range `name` (optionally with a flag's own floor `low`)."""

    name = "integer"

    def __init__(self, name: str, *, low: int | None = None) -> None:
        super().__init__(**self._limit_range(name, low, int))

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        return self._checked(click.INT.convert(value, param, ctx), value, param, ctx)


def bounded(name: str, *, low: float | None = None) -> Bounded:
    """The Click type of a float flag whose range is gpuplan.limits' `name`."""
    return Bounded(name, low=low)


def bounded_int(name: str, *, low: int | None = None) -> BoundedInt:
    """The Click type of a whole-number flag whose range is gpuplan.limits' `name`."""
    return BoundedInt(name, low=low)
