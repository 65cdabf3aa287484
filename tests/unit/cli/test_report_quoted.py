"""`gpuplan report` shows what spot runs were quoted at launch against what they were billed when they settled."""

from __future__ import annotations

from gpuplan.store.db import Store

from support.clihelp import run_cli
from support.spot_history import HistoryProvider, seed, settle_run


def settled() -> None:
    store = Store.open()
    try:
        seed(store)
        settle_run(store, HistoryProvider())
    finally:
        store.close()


def test_quoted_lists_each_spot_run_with_both_costs() -> None:
    settled()
    result = run_cli("report", "--quoted", "--json")
    assert result.exit_code == 0, result.stderr
    [row] = result.json()
    assert (row["run_id"], row["machines"], row["quoted_usd"], row["billed_usd"]) == ("r-sp0t", 1, 61.70115, 64)
    assert row["difference_usd"] == 2.29885 and row["sources"] == ["aws: DescribeSpotPriceHistory"]
    table = run_cli("report", "--quoted")
    assert "r-sp0t" in table.stdout and "+2.30" in table.stdout


def test_the_spend_report_notes_the_difference() -> None:
    settled()
    result = run_cli("report")
    assert result.exit_code == 0, result.stderr
    assert "spot as billed: 1 machine(s) of 1 run(s) quoted $61.70 at launch, billed $64.00" in result.stderr
    assert "(+2.30)" in result.stderr


def test_nothing_billed_yet_is_an_answer() -> None:
    result = run_cli("report", "--quoted")
    assert result.exit_code == 0 and "no spot run billed" in result.stderr
    assert run_cli("report", "--quoted", "--json").json() == []
