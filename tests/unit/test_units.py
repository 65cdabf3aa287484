from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuplan.units import format_size, parse_duration_hours, parse_size


@pytest.mark.parametrize(
    ("text", "value"),
    [("7B", 7 * 10**9), ("125M", 125 * 10**6), ("1.3e9", 1_300_000_000), ("2T", 2 * 10**12),
     ("1.5t", 1_500_000_000_000), ("300", 300), ("70b", 70 * 10**9), (" 8 B ", 8 * 10**9), (1e6, 10**6)],
)
def test_parse_size(text, value) -> None:
    assert parse_size(text) == value


@pytest.mark.parametrize("text", ["", "B", "-7B", "0", "7X", "seven", "nan", "1e999", True])
def test_parse_size_rejects(text) -> None:
    with pytest.raises(ValueError):
        parse_size(text)


@given(st.integers(min_value=1, max_value=10**15))
def test_format_then_parse_is_close(value: int) -> None:
    assert abs(parse_size(format_size(value)) - value) <= value * 0.005 + 1


def test_durations() -> None:
    assert parse_duration_hours("48h") == 48
    assert parse_duration_hours("90m") == 1.5
    assert parse_duration_hours("2d") == 48
    assert parse_duration_hours("3") == 3
    with pytest.raises(ValueError):
        parse_duration_hours("-1h")
    with pytest.raises(ValueError):
        parse_duration_hours("soon")


def test_durations_take_an_exponent_as_sizes_do() -> None:
    """`--deadline 1e3` was refused as not looking like a duration, though the error said a bare number is hours
    and `--tokens 1e12` works; now it reads as 1000 h, and `1e9` is refused for its range, not its spelling."""
    from support.clihelp import run_cli

    assert parse_duration_hours("1e3") == 1000
    assert parse_duration_hours("2.5E+1h") == 25
    assert parse_duration_hours("6e1 minutes") == 1
    with pytest.raises(ValueError, match="and 876,600 hours, not '1e9'"):
        parse_duration_hours("1e9", what="--deadline")
    with pytest.raises(ValueError, match="look like"):
        parse_duration_hours("3e")
    result = run_cli("plan", "--params", "7B", "--tokens", "10B", "--gpu", "H100", "--deadline", "1e9")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "and 876,600 hours" in result.stderr


@pytest.mark.parametrize("text", ["72h", "3d", "3 days", "3 d", "72 hours", "3D", "4320m", "4320 minutes",
                                  "259200s", "72", "3 Days", "0.5 week"])
def test_plan_deadline_accepts_every_form_it_advertises(text: str) -> None:
    """`plan --deadline 3 days` was refused while `90 min` worked; every spelling of 72 hours now reads the same."""
    from support.clihelp import run_cli

    assert parse_duration_hours(text) == pytest.approx(72 if text != "0.5 week" else 84)
    result = run_cli("plan", "--params", "7B", "--tokens", "10B", "--gpu", "H100", "--deadline", text, "--json")
    assert result.exit_code == 0, result.stderr


@pytest.mark.parametrize("text", ["3 fortnights", "3days ago", "P3D", "-1d", "d"])
def test_plan_deadline_refuses_the_rest_naming_the_accepted_forms(text: str) -> None:
    from support.clihelp import run_cli

    result = run_cli("plan", "--params", "7B", "--tokens", "10B", "--deadline", text)
    assert result.exit_code == 2
    assert result.stderr == (f"error: --deadline must look like 72h, 90m, 3d or 3 days (units s, m, h, d, w; "
                             f"a bare number is hours), not {text!r}\n")


def test_zero_duration_only_where_zero_means_off() -> None:
    assert parse_duration_hours("0", allow_zero=True) == 0
    assert parse_duration_hours("0m", allow_zero=True) == 0
    assert parse_duration_hours("15m", allow_zero=True) == 0.25
    with pytest.raises(ValueError, match="greater than zero"):
        parse_duration_hours("0m")
    with pytest.raises(ValueError, match="zero or more"):
        parse_duration_hours(-1, allow_zero=True)
