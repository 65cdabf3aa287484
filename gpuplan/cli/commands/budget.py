"""`gpuplan budget`: hard spending caps per month, week or in total, optionally per project and clouds."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, TypedDict

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, print_table, say
from gpuplan.errors import UserError

if TYPE_CHECKING:
    from gpuplan.store.models import Budget

NOW_HELP = "Fixed clock (ISO time; env GPUPLAN_NOW), for reproducible status in tests."


def _amount(text: str) -> Decimal:
    try:
        value = Decimal(text.replace(",", "").lstrip("$"))
    except InvalidOperation:
        raise UserError(f"--amount: not a number of dollars: {text!r}") from None
    if not value.is_finite() or value <= 0:
        raise UserError(f"--amount must be a positive number of dollars, got {text}")
    return value


class BudgetJson(TypedDict):
    """A budget as `budget set/list --json` prints it (key order is the contract)."""

    name: str
    amount_usd: Decimal
    period: str
    project: str | None
    clouds: list[str] | None


def _budget_json(b: Budget) -> BudgetJson:
    from gpuplan.books.budgets import parse_clouds

    return {"name": b.name, "amount_usd": b.amount_usd, "period": b.period, "project": b.project,
            "clouds": parse_clouds(b.clouds)}


@click.group()
def budget() -> None:
    """Spending caps that launch and watch enforce: a job that would overrun one is refused (exit 2)."""


@budget.command("set")
@click.argument("name")
@click.option("--amount", required=True, metavar="USD", help="The cap in US dollars, e.g. 5000.")
@click.option("--period", type=click.Choice(["month", "week", "total"]), required=True,
              help="Calendar month or ISO week (UTC), or a lifetime total.")
@click.option("--project", help="Only this project's runs count (default: every project).")
@click.option("--cloud", "clouds", multiple=True, help="Only these clouds count (repeatable; default: all).")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def set_(app: AppContext, name: str, amount: str, period: str, project: str | None, clouds: tuple[str, ...],
         as_json: bool) -> None:
    """Create or replace the budget NAME."""
    from gpuplan.books import budgets

    value = _amount(amount)
    cloud_list = [c for raw in clouds for c in raw.split(",")]
    with app.store.session() as session:
        b = budgets.set_budget(session, name, value, period, project, cloud_list)
        payload = _budget_json(b)
    if as_json:
        emit_json(payload)
    else:
        cloud_list = payload["clouds"] or []
        parts = [f"project {project}" if project else "", "clouds " + ",".join(cloud_list) if cloud_list else ""]
        scope = ", ".join(p for p in parts if p) or "all spend"
        per = "in total" if period == "total" else f"per {period}"
        say(f"budget {name}: ${value:,.2f} {per} ({scope})")


@budget.command("list")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def list_(app: AppContext, as_json: bool) -> None:
    """List the budgets: name, cap, period, and the project and clouds they cover."""
    from gpuplan.books import budgets

    with app.store.session() as session:
        rows = [_budget_json(b) for b in budgets.list_budgets(session)]
    if as_json:
        emit_json(rows)
        return
    print_table(["name", "amount", "period", "project", "clouds"],
                [[r["name"], f"${r['amount_usd']:,.2f}", r["period"], r["project"] or "(all)",
                  ",".join(r["clouds"]) if r["clouds"] else "(all)"] for r in rows],
                justify_right=("amount",))


@budget.command("status")
@click.argument("name", required=False)
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@click.option("--now", "now_text", envvar="GPUPLAN_NOW", hidden=True, help=NOW_HELP)
@pass_app
def status(app: AppContext, name: str | None, as_json: bool, now_text: str | None) -> None:
    """Spent, reserved, free, burn rate and forecast per budget.

    Reserved: what live runs may still spend (each launch reserves its most possible spend, its machine
    fail-safe x price x nodes, and its machines stop by themselves when that is spent). Free: amount - spent -
    reserved, what the next launch may reserve."""
    from gpuplan.books import budgets, periods

    now = periods.resolve_now(now_text)
    with app.store.session() as session:
        chosen = [budgets.get_budget(session, name)] if name else budgets.list_budgets(session)
        statuses = [budgets.status(session, b, now) for b in chosen]
    if as_json:
        emit_json(statuses)
        return

    def usd(v: Decimal | None) -> str:
        return "-" if v is None else ("-" if v < 0 else "") + f"${abs(v):,.2f}"

    print_table(
        ["budget", "period", "amount", "spent", "reserved", "free", "burn/h", "forecast", "live runs"],
        [[s.name, s.period if s.period_start is None else f"{s.period} from {s.period_start:%Y-%m-%d}",
          usd(s.amount_usd), usd(s.spent_usd), usd(s.reserved_usd),
          usd(s.free_usd) + (" EXHAUSTED" if s.exhausted else ""), usd(s.burn_usd_per_hour),
          usd(s.forecast_usd), s.live_runs] for s in statuses],
        justify_right=("amount", "spent", "reserved", "free", "burn/h", "forecast", "live runs"),
    )


@budget.command("rm")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_app
def rm(app: AppContext, name: str, as_json: bool) -> None:
    """Delete the budget NAME; launches and the watcher stop enforcing it at once (spend records stay)."""
    from gpuplan.books import budgets

    with app.store.session() as session:
        budgets.remove_budget(session, name)
    if as_json:
        emit_json({"removed": name})
    else:
        say(f"removed budget {name}")
