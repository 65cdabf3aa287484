"""Issue 32 item 7 on GCP, Secret Manager and Cloud Storage: before anything is recorded, a launch asks IAM
(projects.testIamPermissions, buckets.testIamPermissions) whether the caller may do what the run's secrets and bucket
need, and refuses with one line naming what is missing. Against the fakes, whose `caller_permissions` answer
testIamPermissions and refuse the Secret Manager calls themselves; the shipped permission list is enough for a whole
launch with secrets and its teardown."""

from __future__ import annotations

import pytest

from gpuplan.errors import UserError
from gpuplan.providers.base import LaunchRequest
from gpuplan.providers.gcp.permissions import launch_roles
from gpuplan.providers.gcp.provider import GcpProvider

from support.fakes.gce_server import RunningFake
from support.fakes.gcs_server import FakeGcs, serve
from support.fakes.secretmanager_server import RunningSecretManager

SHIPPED = set(launch_roles()["permissions"])


def req(run_id: str = "r-access0001", **kw: object) -> LaunchRequest:
    fields: dict[str, object] = {"run_id": run_id, "name": "acc", "command": "true", "run_dir": "/tmp/acc",
                                 "gpu": "T4", "gpus_per_node": 1, "instance_type": "n1-standard-8",
                                 "zones": ("us-central1-a",), "boot_script": "#!/bin/sh\ntrue\n",
                                 "secrets": {"HF_TOKEN": "hf_x"}}
    fields.update(kw)
    return LaunchRequest(**fields)  # type: ignore[arg-type]


def test_with_the_shipped_permissions_a_launch_with_secrets_is_checked_and_runs(
        gce: RunningFake, secretmanager: RunningSecretManager) -> None:
    secretmanager.state.caller_permissions = set(SHIPPED)
    gce.strict.caller_permissions = set(SHIPPED)
    provider = GcpProvider(retry_initial=0.01, retry_timeout=5)
    check = provider.check_launch(req())
    assert not any("not checked" in note for note in check.notes)
    nodes = provider.launch(req())
    provider.terminate([n.instance_id for n in nodes])
    assert secretmanager.state.denied == [] and secretmanager.state.secrets == {}
    assert secretmanager.state.deleted == ["gpuplan-r-access0001-HF_TOKEN"]


@pytest.mark.parametrize("lacking", ["secretmanager.versions.add", "secretmanager.secrets.delete"])
def test_a_caller_without_a_secret_permission_is_refused_before_anything(
        gce: RunningFake, secretmanager: RunningSecretManager, lacking: str) -> None:
    secretmanager.state.caller_permissions = SHIPPED - {lacking}
    with pytest.raises(UserError) as refused:
        GcpProvider(retry_initial=0.01, retry_timeout=5).check_launch(req())
    text = str(refused.value)
    assert lacking in text and "project gpuplan-test" in text and "roles/secretmanager.admin" in text
    assert "\n" not in text and secretmanager.state.secrets == {} and gce.state.live() == []


def test_without_the_check_the_same_caller_fails_half_way(gce: RunningFake,
                                                         secretmanager: RunningSecretManager) -> None:
    """What the check prevents: the fake itself refuses the call the caller may not make, after the secret exists."""
    from gpuplan.providers.base import ProviderError

    secretmanager.state.caller_permissions = SHIPPED - {"secretmanager.versions.add"}
    with pytest.raises(ProviderError):
        GcpProvider(retry_initial=0.01, retry_timeout=5).launch(req())
    assert secretmanager.state.denied == ["secretmanager.versions.add"]


def test_a_run_without_secrets_asks_nothing_of_secret_manager(gce: RunningFake,
                                                              secretmanager: RunningSecretManager) -> None:
    secretmanager.state.caller_permissions = set()
    assert GcpProvider(retry_initial=0.01, retry_timeout=5).check_launch(req(secrets={})).notes == ()


def test_the_runs_buckets_are_checked(gce: RunningFake) -> None:
    with serve(FakeGcs(buckets={"outputs-b", "ckpt-b"})) as gcs:
        provider = GcpProvider(bucket="outputs-b", storage_endpoint=f"{gcs.url}/storage/v1/", retry_initial=0.01,
                               retry_timeout=5)
        storage = {"run_storage_url": "gs://ckpt-b/team/run"}
        gcs.state.caller_permissions = {p for p in SHIPPED if p.startswith("storage.")}
        assert provider.check_launch(req(secrets={}, options=storage)).notes == ()
        gcs.state.caller_permissions -= {"storage.objects.create"}
        with pytest.raises(UserError, match=r"storage\.objects\.create on gs://outputs-b"):
            provider.check_launch(req(secrets={}, options=storage))
        # A bucket the check cannot see is a note, not a refusal.
        missing = GcpProvider(bucket="nobody-b", storage_endpoint=f"{gcs.url}/storage/v1/", retry_initial=0.01,
                              retry_timeout=5).check_launch(req(secrets={}))
        assert [n for n in missing.notes if "gs://nobody-b not checked" in n]


def test_no_route_to_resource_manager_is_a_note() -> None:
    check = GcpProvider(retry_initial=0.01, retry_timeout=1).check_launch(req())
    assert [n for n in check.notes if n.startswith("Secret Manager permissions not checked")]
