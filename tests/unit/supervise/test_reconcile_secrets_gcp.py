"""`gpuplan reconcile --cloud gcp` finds the run secrets gpuplan left in Secret Manager and, with --terminate,
deletes the orphans: secrets of a run that is final in the database, or of a run it has never heard of (older
than the grace). A running run's secrets are never touched; a refused delete is reported, not fatal; no value is
ever printed. The real CLI in-process against the fake Compute API and the fake Secret Manager (real
google-cloud-secret-manager client, REST).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

import pytest

from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.secrets import run_of, secret_id
from gpuplan.runs.events import EventKind
from gpuplan.store.db import Store
from gpuplan.store.models import Event

from support.clihelp import Result, run_cli
from support.fakes.gce_server import RunningFake
from support.fakes.secretmanager_server import RunningSecretManager

VALUE = "tok-VALUE-0f9e8d-$(touch PWNED)"
MARK = "tok-VALUE"  # any fragment of the value in an output is a leak
SPEC = """\
name: reconcile-secrets
command: python train.py
secrets: [API_TOKEN]
resources:
  gpu: L4
  regions: [us-central1]
limits:
  max_hours: 1
"""
LABELS = {"gpuplan-created-by": "gpuplan"}


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Path:
    monkeypatch.setenv("API_TOKEN", VALUE)
    caplog.set_level(logging.DEBUG)
    path = tmp_path / "job.yaml"
    path.write_text(SPEC)
    return path


def launch(spec: Path) -> str:
    launched = run_cli("launch", str(spec), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    return str(launched.json()["run_id"])


def leave_secret(sm: RunningSecretManager, run_id: str, age: dt.timedelta = dt.timedelta(0)) -> str:
    """A secret as a launch stores it (the real client), made `age` ago: what a crashed gpuplan leaves."""
    GcpProvider().secrets.put(run_id, {"API_TOKEN": VALUE}, {**LABELS, "gpuplan-run-id": run_id})
    sid = secret_id(run_id, "API_TOKEN")
    with sm.state.lock:
        stored = sm.state.secrets[sid]
        stored.created = (dt.datetime.fromisoformat(stored.created) - age).isoformat()
    return sid


def secret_rows(result: Result) -> dict[str, dict]:
    assert result.exit_code == 0, result.stderr
    return {r["secret"]: r for r in result.json() if r.get("resource") == "secret"}


def assert_no_value(results: list[Result], caplog: pytest.LogCaptureFixture) -> None:
    for result in results:
        assert MARK not in result.stdout and MARK not in result.stderr
    assert MARK not in caplog.text
    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        assert all(MARK not in (e.message + (e.data_json or "")) for e in s.query(Event).all())
    store.close()


def test_orphan_secrets_are_reported_then_deleted_and_a_running_runs_are_kept(
        gce: RunningFake, secretmanager: RunningSecretManager, spec: Path, caplog: pytest.LogCaptureFixture) -> None:
    state = secretmanager.state
    running = launch(spec)  # its VM runs: its secret is in use
    stopped = launch(spec)
    # The stop's own clean-up is refused (an IAM hiccup): the stopped run's secret is left behind.
    state.refuse_deletes.add(secret_id(stopped, "API_TOKEN"))
    assert run_cli("stop", stopped).exit_code == 0
    state.refuse_deletes.clear()
    crashed = leave_secret(secretmanager, "r-0ff0ff0ff0", age=dt.timedelta(days=2))  # no such run here
    young = leave_secret(secretmanager, "r-0ff0ff0ff1")  # a launch in another database, seconds ago
    state.secrets["someone-elses"] = type(state.secrets[young])("projects/gpuplan-test/secrets/someone-elses", {})
    before = set(state.secrets)
    live_sid, stopped_sid = secret_id(running, "API_TOKEN"), secret_id(stopped, "API_TOKEN")
    assert {live_sid, stopped_sid, crashed, young} <= before

    # Without --terminate: reported, nothing deleted.
    found = run_cli("reconcile", "--cloud", "gcp", "--json")
    rows = secret_rows(found)
    assert sorted(rows) == sorted([stopped_sid, crashed, young])
    assert {k: v for k, v in rows[stopped_sid].items() if k != "age_s"} == {
        "resource": "secret", "cloud": "gcp", "provider": "gcp", "region": None, "secret": stopped_sid,
        "run_id": stopped, "run_state": "stopped", "kind": "orphan", "why": f"run {stopped} is stopped",
        "action": None}
    assert (rows[crashed]["kind"], rows[crashed]["run_id"], rows[crashed]["run_state"]) == (
        "orphan", "r-0ff0ff0ff0", None)
    assert rows[crashed]["why"] == "no run r-0ff0ff0ff0 in the database" and rows[crashed]["age_s"] >= 2 * 86400
    assert rows[young]["kind"] == "young" and rows[young]["why"].endswith("younger than the 15m grace")
    assert set(state.secrets) == before
    human = run_cli("reconcile", "--cloud", "gcp")
    assert human.exit_code == 0, human.stderr
    assert stopped_sid in human.stdout and crashed in human.stdout and live_sid not in human.stdout
    assert "--terminate` to delete the orphan secrets" in human.stderr

    # --terminate asks first; declining deletes nothing.
    declined = run_cli("reconcile", "--cloud", "gcp", "--terminate", input="n\n")
    assert declined.exit_code != 0 and "Delete 2 orphan secret(s)" in declined.stderr
    assert set(state.secrets) == before

    ended = run_cli("reconcile", "--cloud", "gcp", "--terminate", "-y", "--json")
    rows = secret_rows(ended)
    assert {s: r["action"] for s, r in rows.items()} == {stopped_sid: "deleted", crashed: "deleted", young: None}
    assert set(state.secrets) == before - {stopped_sid, crashed}  # the running run's and the young one stay
    assert state.value(live_sid) == VALUE.encode()
    store = Store.open(os.environ["GPUPLAN_DB"])
    with store.session() as s:
        events = {e.run_id: e.message for e in s.query(Event).all() if e.kind == EventKind.RECONCILE_SECRET_DELETED}
    store.close()
    assert events == {stopped: f"orphan secret {stopped_sid} (gcp) deleted by reconcile",
                      None: f"orphan secret {crashed} (gcp) deleted by reconcile"}

    # --grace 0: the unknown run's young secret is an orphan too; the running run's is still untouched.
    no_grace = run_cli("reconcile", "--cloud", "gcp", "--terminate", "-y", "--grace", "0", "--json")
    assert {s: r["action"] for s, r in secret_rows(no_grace).items()} == {young: "deleted"}
    assert set(state.secrets) == {live_sid, "someone-elses"}
    again = run_cli("reconcile", "--cloud", "gcp")
    assert again.exit_code == 0 and "in agreement" in again.stderr
    assert_no_value([found, human, declined, ended, no_grace, again], caplog)


def test_a_refused_delete_is_reported_and_the_others_still_go(
        gce: RunningFake, secretmanager: RunningSecretManager, spec: Path, caplog: pytest.LogCaptureFixture) -> None:
    kept = leave_secret(secretmanager, "r-0ff0ff0ff2", age=dt.timedelta(hours=1))
    gone = leave_secret(secretmanager, "r-0ff0ff0ff3", age=dt.timedelta(hours=1))
    secretmanager.state.refuse_deletes.add(kept)

    result = run_cli("reconcile", "--cloud", "gcp", "--terminate", "-y", "--json")
    rows = secret_rows(result)  # exit 0: the leftover is reported, the run of reconcile is not failed
    assert rows[gone]["action"] == "deleted"
    assert rows[kept]["action"].startswith("delete failed: ") and "403" in rows[kept]["action"]
    assert f"gcp: could not delete secret {kept}" in result.stderr
    assert list(secretmanager.state.secrets) == [kept]
    assert_no_value([result], caplog)


def test_an_unreachable_secret_manager_is_a_warning_not_a_failure(gce: RunningFake) -> None:
    # The autouse environment points Secret Manager at a closed port; the machines are still checked.
    result = run_cli("reconcile", "--cloud", "gcp", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json() == []
    assert "gcp: secrets not checked: cannot list Secret Manager secrets" in result.stderr


NO_SECRETS_SPEC = SPEC.replace("secrets: [API_TOKEN]\n", "")


def test_a_project_without_the_secret_manager_api_has_no_secrets_to_check(
        gce: RunningFake, secretmanager: RunningSecretManager, tmp_path: Path) -> None:
    """A user who never used `secrets:` never enabled Secret Manager: reconcile reads that as no secrets, quietly."""
    from google.api_core import exceptions as gexc

    secretmanager.state.disabled = True
    # What the real client makes of the fake's answer: Google's 403, the reason in the ErrorInfo detail.
    with pytest.raises(gexc.Forbidden) as refused:
        list(GcpProvider().secrets.client().list_secrets(request={"parent": "projects/gpuplan-test"}))
    assert (refused.value.reason, refused.value.metadata["service"]) == (
        "SERVICE_DISABLED", "secretmanager.googleapis.com")
    assert GcpProvider().list_secrets() == []

    job = tmp_path / "plain.yaml"
    job.write_text(NO_SECRETS_SPEC)
    launched = run_cli("launch", str(job), "--provider", "gcp", "-y", "--detach", "--json")
    assert launched.exit_code == 0, launched.stderr
    quiet = run_cli("reconcile", "--cloud", "gcp")
    assert quiet.exit_code == 0, quiet.stderr
    assert "in agreement: checked gcp" in quiet.stderr and "secrets not checked" not in quiet.stderr
    as_json = run_cli("reconcile", "--cloud", "gcp", "--json")
    assert as_json.exit_code == 0 and as_json.json() == [] and "secrets not checked" not in as_json.stderr


def test_a_caller_who_may_not_list_secrets_is_still_warned(
        gce: RunningFake, secretmanager: RunningSecretManager) -> None:
    """A missing permission is not a disabled API: there may be secrets reconcile cannot see, so it says so."""
    secretmanager.state.refuse_lists = True
    result = run_cli("reconcile", "--cloud", "gcp", "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json() == []
    assert "gcp: secrets not checked: cannot list Secret Manager secrets: 403 " in result.stderr
    assert "secretmanager.secrets.list" in result.stderr


def test_only_secret_managers_own_service_disabled_reads_as_no_secrets() -> None:
    """The ErrorInfo decides, on either transport (REST raises Forbidden, gRPC PermissionDenied)."""
    from google.api_core import exceptions as gexc

    from gpuplan.providers.gcp.rules import service_disabled

    def info(service: str, reason: str = "SERVICE_DISABLED") -> dict:
        return {"reason": reason, "domain": "googleapis.com", "metadata": {"service": service}}

    sm = "secretmanager.googleapis.com"
    assert service_disabled(gexc.from_http_status(403, "off", error_info=info(sm)), sm)
    assert service_disabled(gexc.PermissionDenied("off", error_info=info(sm)), sm)
    # Another API switched off (e.g. the quota project's): not a statement about Secret Manager.
    assert not service_disabled(gexc.from_http_status(403, "off", error_info=info("compute.googleapis.com")), sm)
    # A plain permission error, whatever its message says, and other reasons.
    assert not service_disabled(gexc.from_http_status(403, "Secret Manager API has not been used in project 1 "
                                                           "before or it is disabled."), sm)
    assert not service_disabled(gexc.from_http_status(403, "denied", error_info=info(sm, "IAM_PERMISSION_DENIED")),
                                sm)
    assert not service_disabled(gexc.from_http_status(400, "bad", error_info=info(sm)), sm)
    assert not service_disabled(ValueError("SERVICE_DISABLED"), sm)


def test_the_run_of_a_secret_is_read_where_its_label_agrees() -> None:
    assert run_of("gpuplan-r-0a1b2c3d4e-HF_TOKEN", "r-0a1b2c3d4e") == "r-0a1b2c3d4e"
    assert run_of("gpuplan-Run-X-A-B", "run-x") == "Run-X"  # the label is the run id made label-safe
    assert run_of("gpuplan-r-1-TOKEN", "r-2") is None  # label and name disagree: never guessed
    assert run_of("gpuplan-r-1-TOKEN", None) is None
    assert run_of("other-r-1-TOKEN", "r-1") is None
