"""Non-finite numbers (nan, inf, -inf, 1e999) are bad input everywhere a user types a number: one line, exit 2.

Click's float and FloatRange accept them (nan even passes a range check), so every numeric flag goes through
gpuplan.cli.commands.params.FiniteFloat, and sizes, durations and dollar amounts through gpuplan.units.finite.
"""

from __future__ import annotations

import pytest

from gpuplan.units import finite, parse_duration_hours, parse_size

from support.clihelp import run_cli

NON_FINITE = ["nan", "inf", "-inf", "1e999", "NaN", "Infinity"]
ESTIMATE = ["estimate", "--gpu", "H100", "--params", "7B"]
PLAN = ["plan", "--params", "7B", "--tokens", "1B", "--gpu", "H100"]

COMMANDS = {
    "estimate --throughput": [*ESTIMATE, "--tokens", "1B", "--throughput", "{}"],
    "estimate --mfu": [*ESTIMATE, "--tokens", "1B", "--mfu", "{}"],
    "estimate --epochs": [*ESTIMATE, "--samples", "1M", "--epochs", "{}"],
    "estimate --network-gbps": [*ESTIMATE, "--tokens", "1B", "--network-gbps", "{}"],
    "estimate --params": ["estimate", "--gpu", "H100", "--tokens", "1B", "--params", "{}"],
    "estimate --tokens": [*ESTIMATE, "--tokens", "{}"],
    "plan --budget": [*PLAN, "--budget", "{}"],
    "plan --max-price": [*PLAN, "--max-price", "{}"],
    "plan --interruption-rate": [*PLAN, "--interruption-rate", "{}"],
    "plan --throughput": [*PLAN, "--throughput", "{}"],
    "plan --deadline": [*PLAN, "--deadline", "{}"],
    "prices --max-price": ["prices", "--max-price", "{}"],
    "prices --min-gpus": ["prices", "--min-gpus", "{}"],
    "bench --peak-tflops": ["bench", "--model", "gpt2", "--peak-tflops", "{}"],
    "bench --max-hours": ["bench", "--model", "gpt2", "--on", "aws", "--max-hours", "{}"],
    "bench --budget": ["bench", "--model", "gpt2", "--on", "aws", "--budget", "{}"],
    "watch --interval": ["watch", "--once", "--interval", "{}"],
    "scheduler run --interval": ["scheduler", "run", "--interval", "{}"],
    "budget set --amount": ["budget", "set", "b", "--period", "month", "--amount", "{}"],
}


@pytest.mark.parametrize("value", ["nan", "inf", "1e999"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_non_finite_numbers_are_refused_with_exit_2(command: str, value: str) -> None:
    args = [value if a == "{}" else a for a in COMMANDS[command]]
    result = run_cli(*args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_negative_infinity_is_refused_where_a_sign_is_allowed() -> None:
    result = run_cli(*[("-inf" if a == "{}" else a) for a in COMMANDS["estimate --network-gbps"]])
    assert result.exit_code == 2
    assert "'-inf' is not a finite number" in result.stderr


def test_budget_amount_too_large_for_the_books_is_bad_input_and_records_nothing() -> None:
    result = run_cli("budget", "set", "b", "--period", "month", "--amount", "1e300")
    assert result.exit_code == 2, result.stderr
    assert "less than $10,000,000,000" in result.stderr
    listed = run_cli("budget", "list", "--json")
    assert listed.json() == []


@pytest.mark.parametrize("text", NON_FINITE)
def test_the_shared_parsers_refuse_non_finite(text: str) -> None:
    with pytest.raises(ValueError, match=r"must be|look like"):
        parse_size(text, what="--params")
    with pytest.raises(ValueError, match="must"):
        parse_duration_hours(text, what="--deadline")
    with pytest.raises(ValueError, match="finite"):
        finite(float(text) if text != "Infinity" else float("inf"))


def test_finite_numbers_still_work() -> None:
    assert finite(2.5) == 2.5
    assert parse_size("1e9") == 1_000_000_000
    result = run_cli(*ESTIMATE, "--tokens", "1B", "--throughput", "3000", "--json")
    assert result.exit_code == 0, result.stderr
