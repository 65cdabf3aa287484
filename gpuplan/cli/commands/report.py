"""`gpuplan report`: spend by period / project / cloud / GPU / run / user, estimate vs actual, and a PNG."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gpuplan.cli.context import AppContext, pass_app
from gpuplan.cli.output import emit_json, note, print_table
from gpuplan.errors import UserError

if TYPE_CHECKING:  # types only: sqlalchemy and the books load when a report runs, not at CLI start-up
    import datetime as dt

    from sqlalchemy.orm import Session

    from gpuplan.books.report import ReportRequest

NOW_HELP = "Fixed clock for reproducible reports (ISO time; env GPUPLAN_NOW); running instances accrue to it."


@click.command()
@click.option("--since", metavar="DATE", help="Start of the window (inclusive), e.g. 2026-11-01; UTC.")
@click.option("--until", metavar="DATE", help="End of the window (exclusive), e.g. 2026-12-01; UTC.")
@click.option("--by", "by", multiple=True, metavar="KEY",
              help="Group by one of day|week|month and/or any of project|cloud|gpu|instance-type|run|user "
                   "(repeat or comma-separate, e.g. --by gpu --by cloud; default month).")
@click.option("--project", help="Only this project's runs.")
@click.option("--cloud", "clouds", multiple=True, metavar="CLOUD[,CLOUD]",
              help="Only these clouds (repeatable or comma-separated, e.g. aws,gcp).")
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json", "markdown", "html"]), default="table",
              show_default=True, help="Output format.")
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a PNG: spend over time stacked by the --by key, with the budget line.")
@click.option("--accuracy", is_flag=True, help="Estimate vs actual hours and cost of every succeeded run instead "
                                               "(table or --json only; the spend filters do not apply).")
@click.option("--quoted", is_flag=True, help="Spot runs: the cost quoted at launch vs the cost billed at the spot "
                                             "price history when they settled, per run.")
@click.option("--bill", is_flag=True, help="AWS runs: the books vs the bill, from Cost Explorer grouped by the "
                                           "gpuplan:run-id cost allocation tag (which must be activated), per run "
                                           "and month (or --by day).")
@click.option("--now", "now_text", envvar="GPUPLAN_NOW", hidden=True, help=NOW_HELP)
@pass_app
def report(app: AppContext, since: str | None, until: str | None, by: tuple[str, ...], project: str | None,
           clouds: tuple[str, ...], fmt: str, as_json: bool, plot_path: Path | None, accuracy: bool,
           quoted: bool, bill: bool, now_text: str | None) -> None:
    """Spend from the instance ledger: what every dollar went to, straddling costs split at the edges.

    Each figure is price at launch x billed seconds of instance rows (running instances accrue to now); the
    TOTAL is exactly the sum of the rows.
    """
    from gpuplan.books import periods
    from gpuplan.books import report as rep

    now = periods.resolve_now(now_text)
    if as_json:
        if fmt not in ("table", "json"):
            # Both asked for a format: printing JSON where a CSV was wanted would break the reader of either.
            raise UserError(f"give --json or --format {fmt}, not both")
        fmt = "json"
    if accuracy:
        given = [flag for flag, value in (("--since", since), ("--until", until), ("--by", by),
                                          ("--project", project), ("--cloud", clouds), ("--plot", plot_path),
                                          ("--quoted", quoted), ("--bill", bill))
                 if value]
        if fmt not in ("table", "json"):
            given.append(f"--format {fmt}")
        if given:
            # Ignoring them would show every run while the user believes the figures are filtered.
            raise UserError(f"--accuracy covers every succeeded run as a table or JSON; it does not take "
                            f"{', '.join(given)}")
        _accuracy(app, now, fmt)
        return
    if quoted or bill:
        if quoted and bill:
            raise UserError("give --quoted or --bill, not both")
        _quoted_or_bill(app, quoted=quoted, since=since, until=until, by=by, project=project, clouds=clouds,
                        fmt=fmt, now=now, plot=plot_path)
        return
    unit, key = rep.parse_by(by)
    request = rep.ReportRequest(
        now=now,
        since=periods.parse_when(since, "--since") if since else None,
        until=periods.parse_when(until, "--until") if until else None,
        unit=unit, key=key, project=project,
        clouds=_clouds(clouds),
    )
    with app.store.session() as session:
        result = rep.build(session, request)
        if plot_path is not None:
            _plot(session, request, plot_path)
    if fmt == "json":
        emit_json(rep.to_json(result, request))
    elif fmt == "table":
        columns, rows = rep.table_rows(result, request)
        print_table(columns, rows, justify_right=("instances", "billed_hours", "cost_usd"))
        _spot_note(app, request)
    else:
        text = rep.render(result, request, fmt)
        if fmt != "html" and sys.stdout.isatty():  # names and projects are anyone's text: shown, not obeyed
            from gpuplan.cli.inert import inert_lines

            text = inert_lines(text)
        click.echo(text, nl=False)


def _quoted_or_bill(app: AppContext, *, quoted: bool, since: str | None, until: str | None, by: tuple[str, ...],
                    project: str | None, clouds: tuple[str, ...], fmt: str, now: dt.datetime,
                    plot: Path | None) -> None:
    """`--quoted` and `--bill` (gpuplan.cli.commands.report_extra): table or JSON, one at a time."""
    from gpuplan.books import periods
    from gpuplan.books import report as rep
    from gpuplan.cli.commands import report_extra

    if fmt not in ("table", "json") or plot is not None:
        raise UserError(f"--{'quoted' if quoted else 'bill'} prints a table or JSON; it does not take "
                        + ("--plot" if plot is not None else f"--format {fmt}"))
    start = periods.parse_when(since, "--since") if since else None
    end = periods.parse_when(until, "--until") if until else None
    if quoted:
        report_extra.show_quoted(app, since=start, until=end, project=project, clouds=_clouds(clouds),
                                 as_json=fmt == "json")
        return
    from gpuplan.books.cloud_bill import billed_clouds

    billed = billed_clouds()
    if clouds and not set(_clouds(clouds) or ()) <= billed:
        raise UserError(f"--bill reads AWS Cost Explorer: it covers --cloud {', '.join(sorted(billed))} only")
    unit, key = rep.parse_by(by)
    if key is not None:
        raise UserError("--bill is per run and period: --by takes month or day only")
    report_extra.show_bill(app, since=start, until=end, unit=unit, project=project, now=now,
                           as_json=fmt == "json")


def _spot_note(app: AppContext, request: ReportRequest) -> None:
    """Under the spend table: how far the billed spot cost in the window is from the launch quotes."""
    from gpuplan.books.quoted import quoted_vs_billed, summary_line

    with app.store.session() as session:
        line = summary_line(quoted_vs_billed(session, since=request.since, until=request.until,
                                             project=request.project, clouds=request.clouds))
    if line:
        note(line)


def _clouds(clouds: tuple[str, ...]) -> tuple[str, ...] | None:
    """`--cloud aws,gcp --cloud local` -> ("aws", "gcp", "local"); a misspelt cloud would report $0, so refuse it."""
    from gpuplan.providers.registry import provider_names

    names = sorted({c.strip().lower() for raw in clouds for c in raw.split(",") if c.strip()})
    known = provider_names()
    unknown = [c for c in names if c not in known]
    if unknown:
        raise UserError(f"--cloud: unknown cloud {', '.join(map(repr, unknown))}; known: {', '.join(known)}")
    return tuple(names) or None


def _plot(session: Session, request: ReportRequest, path: Path) -> None:
    from gpuplan.books import plot
    from gpuplan.books import report as rep

    buckets, series, unit = rep.plot_data(session, request)
    lines = [plot.BudgetLine(b.name, b.amount_usd, b.period) for b in rep.matching_budgets(session, request)]
    scope = f" — project {request.project}" if request.project else ""
    by = f" by {request.key.replace('+', ' and ')}" if request.key else ""
    plot.plot_spend(path, buckets, series, unit, lines, f"GPU spend per {unit}{by}{scope}")
    note(f"wrote {path}")


def _accuracy(app: AppContext, now: dt.datetime, fmt: str) -> None:
    from gpuplan.books import accuracy
    from gpuplan.cli.display import dollars, hours_text

    with app.store.session() as session:
        acc = accuracy.accuracy(session, now)
    if fmt == "json":
        emit_json({"runs": acc.runs, "summary": acc.summary, "by_gpu": acc.by_gpu})
        return

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1%}"

    def num(x: float | None, spec: str = ",.2f") -> str:
        return "-" if x is None else format(x, spec)

    print_table(
        ["run", "name", "gpu", "est time", "actual time", "time error", "est $", "actual $", "$ error"],
        [[r.run_id, r.name, r.gpu or "-", hours_text(r.est_hours), hours_text(r.actual_hours), pct(r.hours_error),
          "-" if r.est_cost_usd is None else dollars(r.est_cost_usd), dollars(r.actual_cost_usd),
          pct(r.cost_error)] for r in acc.runs],
        title="Estimate vs actual (succeeded runs)",
        justify_right=("est time", "actual time", "time error", "est $", "actual $", "$ error"),
    )
    s = acc.summary
    others = f" ({s.without_estimate} more without one)" if s.without_estimate else ""
    counted = f"{s.runs} {'run' if s.runs == 1 else 'runs'} with an estimate{others}"
    click.echo(f"{counted}: hours median |error| {num(s.median_abs_hours_error, '.1%')}, "
               f"mean |error| {num(s.mean_abs_hours_error, '.1%')}, median actual/estimate "
               f"{num(s.median_hours_ratio, '.3f')}; cost median |error| {num(s.median_abs_cost_error, '.1%')}, "
               f"mean |error| {num(s.mean_abs_cost_error, '.1%')}")
