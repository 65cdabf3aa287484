"""The watch step in-process: metrics -> progress, how machines' ends become a run state, caps, budgets."""

from __future__ import annotations

import datetime as dt
import json
import time
from decimal import Decimal
from pathlib import Path

import pytest

from gpuplan.jobs.metrics import log_metrics
from gpuplan.jobs.spec import parse_spec
from gpuplan.launching.plan import plan_launch
from gpuplan.launching.sequence import check_gates, launch
from gpuplan.providers.base import Instance, InstanceState
from gpuplan.providers.local import LocalProvider
from gpuplan.store.db import Store
from gpuplan.store.models import Event, Run, RunState
from gpuplan.supervise.progress import measure
from gpuplan.supervise.watch import _final_state, cap_reason, stop_run, watch_all, watch_run

UTC = dt.timezone.utc


def test_metrics_give_throughput_progress_and_eta(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "metrics.jsonl"
    monkeypatch.setenv("GPUPLAN_METRICS", str(path))
    assert measure(path, 1000) is None
    lines = [{"time": 100.0, "step": 1, "tokens": 100, "loss": 3.0},
             {"time": 102.0, "step": 3, "tokens": 300, "loss": 2.0}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{\"time\": 10")  # a half-written last line
    progress = measure(path, 1000)
    assert progress is not None
    assert progress.tokens_per_s == pytest.approx(100.0)  # 200 tokens in 2 s
    assert progress.fraction == pytest.approx(0.3) and progress.eta_seconds == pytest.approx(7.0)
    assert progress.loss == 2.0 and progress.step == 3
    log_metrics(5, tokens=500, loss=1.5)  # the stdlib helper appends a line the reader understands
    assert measure(path, 1000).tokens == 500  # type: ignore[union-attr]
    monkeypatch.setenv("RANK", "1")
    log_metrics(6, tokens=600)  # other ranks do not write
    assert measure(path, 1000).tokens == 500  # type: ignore[union-attr]


def test_progress_from_total_steps_without_token_total(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"time": 0, "step": 10, "total_steps": 100}\n{"time": 10, "step": 20, "total_steps": 100}\n')
    progress = measure(path)
    assert progress is not None and progress.fraction == pytest.approx(0.2) and progress.eta_seconds == 80


def _inst(rank: int, state: str, code: int | None, reason: str | None = None) -> Instance:
    return Instance(provider="local", instance_id=f"r/node-{rank}", state=state, node_rank=rank, exit_code=code,
                    state_reason=reason)


@pytest.mark.parametrize(("nodes", "expected"), [
    ([_inst(0, InstanceState.SUCCEEDED, 0), _inst(1, InstanceState.SUCCEEDED, 0)], (RunState.SUCCEEDED, 0)),
    ([_inst(0, InstanceState.SUCCEEDED, 0), _inst(1, InstanceState.FAILED, 2)], (RunState.FAILED, 2)),
    ([_inst(0, InstanceState.TERMINATED, -15, "max_hours")], (RunState.CAPPED, -15)),
    ([_inst(0, InstanceState.TERMINATED, -15, "stopped")], (RunState.STOPPED, -15)),
    ([_inst(0, InstanceState.PREEMPTED, None)], (RunState.FAILED, None)),
    ([_inst(0, InstanceState.TERMINATED, None, "the node folder is gone")], (RunState.LOST, None)),
])
def test_how_machines_ending_become_a_run_state(nodes: list[Instance], expected: tuple[str, int | None]) -> None:
    state, _, code = _final_state(nodes)
    assert (state, code) == expected


def test_cap_reasons() -> None:
    now = dt.datetime(2025, 1, 1, 12, tzinfo=UTC)
    run = Run(name="x", provider="local", spec_text="", spec_hash="", state=RunState.RUNNING,
              started_at=now - dt.timedelta(hours=2), max_hours=1.5)
    assert cap_reason(run, now).startswith("max_hours")  # type: ignore[union-attr]
    run.max_hours = 3
    assert cap_reason(run, now) is None
    run.deadline_at = now - dt.timedelta(minutes=1)
    assert cap_reason(run, now).startswith("deadline")  # type: ignore[union-attr]
    run.state = RunState.SUCCEEDED
    assert cap_reason(run, now) is None


@pytest.fixture
def store(tmp_path: Path) -> Store:
    opened = Store.open(f"sqlite:///{tmp_path / 'w.db'}")
    yield opened  # type: ignore[misc]
    opened.close()


def _launch(store: Store, text: str, provider: LocalProvider, secrets: dict[str, str] | None = None) -> str:
    spec = parse_spec(text)
    plan = plan_launch(spec, text, provider=provider)
    return launch(store, plan, provider, secrets or {}, gates=check_gates(store, plan, provider, force=False))


def test_budget_enforcement_caps_live_runs(store: Store, tmp_path: Path) -> None:
    from gpuplan.books.budgets import set_budget

    provider = LocalProvider(root=tmp_path / "runs", price_per_hour=Decimal(3600))  # $1/s
    factory = lambda name: provider  # noqa: E731
    run_id = _launch(store, "name: spender\nruntime: process\nproject: p1\ncommand: sleep 30\n", provider)
    with store.session() as session:
        set_budget(session, "team", Decimal("0.5"), "total", project="p1")
    time.sleep(0.8)
    results = {r.run_id: r for r in watch_all(store, provider_factory=factory)}
    assert results[run_id].state == RunState.CAPPED
    assert "budget 'team' exhausted" in (results[run_id].summary["state_reason"] or "")
    assert all(i["terminated_at"] is not None for i in results[run_id].summary["instances"])
    with store.session() as session:
        kinds = {e.kind for e in session.query(Event).filter(Event.run_id == run_id)}
    assert {"created", "launched", "capped"} <= kinds


def test_stop_then_status_keeps_the_stop(store: Store, tmp_path: Path) -> None:
    provider = LocalProvider(root=tmp_path / "runs")
    run_id = _launch(store, "name: s\nruntime: process\ncommand: sleep 30\n", provider)
    stopped = stop_run(store, run_id, provider_factory=lambda _: provider)
    assert stopped.state == RunState.STOPPED
    again = watch_run(store, run_id, provider_factory=lambda _: provider)
    assert again.state == RunState.STOPPED and not again.changed
    assert provider.list_tagged(run_id) == []


def test_run_is_recorded_before_the_provider_call_and_a_failure_is_kept(store: Store, tmp_path: Path) -> None:
    from gpuplan.providers.base import ProviderError

    broken = LocalProvider(root=tmp_path / "runs", python=str(tmp_path / "no-such-python"))
    with pytest.raises(ProviderError, match="could not start"):
        _launch(store, "name: doomed\nruntime: process\ncommand: \"true\"\n", broken)
    with store.session() as session:
        (run,) = session.query(Run).all()
        kinds = [e.kind for e in session.query(Event).filter(Event.run_id == run.id).order_by(Event.id)]
        assert run.state == RunState.FAILED and run.state_reason.startswith("launch failed")
        assert kinds[0] == "created" and "launch_failed" in kinds and run.ended_at is not None


def test_watch_json_without_once_is_refused_instead_of_looping_silently() -> None:
    from support.clihelp import run_subprocess

    result = run_subprocess("watch", "--json", "--interval", "0.5", timeout=60)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("error: --json needs --once") and result.stderr.count("\n") == 1
    assert result.stdout == ""
    once = run_subprocess("watch", "--once", "--json")
    assert once.exit_code == 0 and once.json() == []


def test_ctrl_c_stops_the_watch_loop_with_130_wherever_it_lands() -> None:
    """Ctrl-C is how the loop ends: one line and exit 130, the same as any interrupted command (it exited 0 when
    the signal landed in the sleep between passes and 130 when it landed in a pass)."""
    import signal
    import subprocess
    import sys

    from support.clihelp import interruptible_children

    with interruptible_children():
        proc = subprocess.Popen([sys.executable, "-m", "gpuplan", "watch", "--interval", "30"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # written before the first pass: the loop is about to run, then sleep
        assert first.startswith("watching live runs every 30 s"), first
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, first + rest
    assert rest.strip().splitlines()[-1] == "stopped watching; the runs keep going"
    assert "Traceback" not in rest and "error:" not in rest
