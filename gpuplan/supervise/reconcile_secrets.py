"""Leftover run secrets in the clouds' secret stores: the part of `gpuplan reconcile` that finds and deletes them.

A run's secrets live in its cloud's secret store while the run may need them (AWS SSM parameters
`/gpuplan/<run_id>/<NAME>`, GCP Secret Manager secrets `gpuplan-<run_id>-<NAME>`) and the provider deletes them
when the run ends. A gpuplan that crashed, or a delete that failed, leaves them behind for good: a credential
sitting in the account with nothing using it. The rule, kept apart from the machine rules in
gpuplan.supervise.reconcile:

- **orphan**: its run is final in the database (succeeded, failed, stopped, capped, lost), or the database has no
  such run and the secret is older than the grace period. `--terminate` deletes it.
- a secret of a run the database holds as live (pending, provisioning, running) is never touched nor reported:
  a launching run's machine reads it at boot, a running run's spot relaunch reads it again.
- **young**: no such run in the database, but younger than the grace (the store's own time: SSM last-modified,
  Secret Manager createTime), or of unknown age: a launch recorded in another database may be about to boot a
  machine that reads it. Reported, never deleted (the same grace as for machines; `--grace 0` turns it off).
- **unattributed**: gpuplan's prefix and tags, but no run can be read from it. Reported, never deleted: a
  guessed run could be a live one.

Only names are ever handled: providers list secrets through metadata calls that carry no values.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuplan.providers.base import CloudSecret, Provider, ProviderError
from gpuplan.store.models import RunState
from gpuplan.supervise.reconcile import ORPHAN, Policy, age_since, configure_provider, grace_verdict

RESOURCE = "secret"
UNATTRIBUTED = "unattributed"  # no run can be read from it: never deleted

Build = Callable[[str, Sequence[str]], Provider]


@dataclass(frozen=True)
class SecretFinding:
    """A secret reconcile reports: an orphan, or one it spares and says why (the JSON row of a secret)."""

    secret: CloudSecret
    kind: str
    run_state: str | None
    age_s: int | None
    why: str

    def as_dict(self, action: str | None = None) -> dict[str, Any]:
        return {"resource": RESOURCE, "cloud": self.secret.provider, "provider": self.secret.provider,
                "region": self.secret.region, "secret": self.secret.name, "run_id": self.secret.run_id,
                "run_state": self.run_state, "kind": self.kind, "age_s": self.age_s, "why": self.why,
                "action": action}


@dataclass
class SecretReport:
    findings: list[SecretFinding] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)  # provider -> why its secrets could not be listed

    @property
    def orphans(self) -> list[SecretFinding]:
        return [f for f in self.findings if f.kind == ORPHAN]


def classify_secret(secret: CloudSecret, run_state: str | None, grace: dt.timedelta,
                    now: dt.datetime) -> tuple[str | None, int | None, str]:
    """(kind, age in seconds, why) of one secret; kind None: its run is live, so it is neither reported nor touched.

    The run's state decides first, as for machines; a run the database has never heard of is only an orphan once
    the secret has outlived the grace.
    """
    age, age_s = age_since(secret.created_at, now)
    if secret.run_id is None:
        return UNATTRIBUTED, age_s, "no run id can be read from its name (never deleted by reconcile)"
    run = f"run {secret.run_id}"
    if run_state in RunState.FINAL:
        return ORPHAN, age_s, f"{run} is {run_state}"
    if run_state is not None:  # live (or a state this gpuplan does not know): the run may still read it
        return None, age_s, f"{run} is {run_state}"
    return grace_verdict(f"no {run} in the database", age, age_s, grace,
                         undated="the store does not say when it was made")


def compare_secrets(secrets: Sequence[CloudSecret], policy: Policy) -> list[SecretFinding]:
    """The findings for one provider's listed secrets (live runs' secrets left out)."""
    if not secrets:
        return []
    states: Mapping[str, str] = policy.run_states({s.run_id for s in secrets if s.run_id})
    now = policy.now or dt.datetime.now(dt.timezone.utc)
    findings = []
    for secret in secrets:
        state = states.get(secret.run_id or "")
        kind, age_s, why = classify_secret(secret, state, policy.grace, now)
        if kind is not None:
            findings.append(SecretFinding(secret=secret, kind=kind, run_state=state, age_s=age_s, why=why))
    return findings


def check_secrets(provider_names: Iterable[str], regions_of: Callable[[str], Sequence[str]], policy: Policy, *,
                  build: Build = configure_provider) -> SecretReport:
    """List each provider's run secrets and classify them; a provider whose store cannot be listed is skipped
    with its reason (the machine check of the same provider still counts)."""
    report = SecretReport()
    for name in provider_names:
        try:
            secrets = build(name, regions_of(name)).list_secrets()
        except (ProviderError, NotImplementedError) as exc:
            report.skipped[name] = str(exc)
            continue
        report.findings.extend(compare_secrets(secrets, policy))
    return report


def delete_orphan_secrets(findings: Sequence[SecretFinding], regions_of: Callable[[str], Sequence[str]], *,
                          build: Build = configure_provider) -> dict[CloudSecret, str | None]:
    """Delete every orphan among the findings, grouped by provider; each one's outcome: None (deleted) or why
    it could not be. A provider that cannot even be built fails its own secrets only."""
    outcome: dict[CloudSecret, str | None] = {}
    by_provider: dict[str, list[CloudSecret]] = {}
    for f in findings:
        if f.kind == ORPHAN:
            by_provider.setdefault(f.secret.provider, []).append(f.secret)
    for name, secrets in by_provider.items():
        regions = sorted({*regions_of(name), *(s.region for s in secrets if s.region)})
        try:
            failed = build(name, regions).delete_secrets(secrets)
        except (ProviderError, NotImplementedError) as exc:
            failed = {s: str(exc) for s in secrets}
        outcome.update({s: failed.get(s) for s in secrets})
    return outcome
