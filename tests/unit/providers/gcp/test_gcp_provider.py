"""The GCP provider with the real google-cloud-compute clients (REST) against the fake Compute API.

What a user relies on: the VM GCE is asked for is right (GPUs, spot, the maxRunDuration fail-safe, labels, image,
startup script), a retried or repeated launch never makes a second VM, GCE's errors come back typed so failover
can act, and describe/terminate tell the truth (preemption included).
"""

from __future__ import annotations

import uuid
from decimal import Decimal
from typing import Any

import pytest

from gpuplan.providers.base import AuthError, CapacityError, InstanceState, LaunchRequest, ProviderError, QuotaError
from gpuplan.providers.gcp.provider import GcpProvider
from gpuplan.providers.gcp.rules import (
    DEFAULT_IMAGE_FAMILY,
    DEFAULT_IMAGE_PROJECT,
    MAX_SPEC_LABELS,
    OWN_LABELS,
    Endpoint,
    choose_machine_type,
    instance_name,
    label_value,
    labels_for,
    request_id,
    spec_label_problem,
)
from gpuplan.providers.gcp.secrets import LABEL_SECRETS, LABEL_SECRETS_VALUE
from gpuplan.providers.registry import get_provider

from support.fakes.gce_server import RunningFake

RUN = "r-0a1b2c3d4e"


@pytest.fixture
def provider(gce: RunningFake) -> GcpProvider:
    # Configured from the environment, as the CLI builds it; tiny retry delays keep throttling tests fast.
    return GcpProvider(retry_initial=0.01, retry_timeout=5)


def req(**kw: object) -> LaunchRequest:
    base: dict[str, object] = dict(run_id=RUN, name="tiny-gpt", command="python train.py", run_dir="/tmp/run",
                                   project="research", instance_type="n1-standard-8", gpu="T4", gpus_per_node=1,
                                   zones=("us-central1-a",), boot_script="#!/bin/bash\necho 'hello'\n",
                                   price_per_hour=Decimal("0.73"))
    base.update(kw)
    return LaunchRequest(**base)  # type: ignore[arg-type]


def stored(gce: RunningFake) -> list[dict]:
    return gce.state.live()


def inserts(gce: RunningFake) -> int:
    return gce.state.count_calls("POST", "/instances")


def test_registered_and_configured_from_the_environment(gce: RunningFake) -> None:
    provider = get_provider("gcp")
    assert isinstance(provider, GcpProvider)
    assert provider.project == "gpuplan-test"
    assert provider.endpoint.api_endpoint == gce.api_endpoint
    assert provider.endpoint.loopback
    assert provider.zones("us-central1") == ["us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f"]
    assert provider.zones("us-east1") == ["us-east1-b", "us-east1-c", "us-east1-d"]


def test_n1_launch_attaches_gpus_and_sets_everything_gce_needs(provider: GcpProvider, gce: RunningFake) -> None:
    [inst] = provider.launch(req(max_hours=2.5, labels={"team": "nlp-group"}))
    assert inst.instance_id == f"us-central1-a/{instance_name(RUN, 0)}"
    assert (inst.state, inst.zone, inst.region) == (InstanceState.RUNNING, "us-central1-a", "us-central1")
    assert (inst.instance_type, inst.gpu, inst.gpu_count, inst.spot) == ("n1-standard-8", "T4", 1.0, False)
    assert inst.run_id == RUN and inst.price_per_hour == Decimal("0.73") and inst.launched_at is not None

    [vm] = stored(gce)
    assert vm["guestAccelerators"] == [{
        "acceleratorType": "https://www.googleapis.com/compute/v1/projects/gpuplan-test/zones/us-central1-a/"
                           "acceleratorTypes/nvidia-tesla-t4", "acceleratorCount": 1}]
    scheduling = vm["scheduling"]
    assert scheduling["onHostMaintenance"] == "TERMINATE"
    assert scheduling["automaticRestart"] is False
    assert scheduling["provisioningModel"] == "STANDARD"
    # The on-cloud fail-safe: GCE deletes the VM after max_hours even if gpuplan is gone.
    assert scheduling["maxRunDuration"] == {"seconds": str(int(2.5 * 3600))}
    assert scheduling["instanceTerminationAction"] == "DELETE"
    assert vm["labels"] == {"gpuplan-run-id": RUN, "gpuplan-name": "tiny-gpt", "gpuplan-project": "research",
                            "gpuplan-created-by": "gpuplan", "gpuplan-node-rank": "0", "team": "nlp-group"}
    [disk] = vm["disks"]
    assert disk["boot"] and disk["autoDelete"]
    params = disk["initializeParams"]
    assert params["sourceImage"] == f"projects/{DEFAULT_IMAGE_PROJECT}/global/images/family/{DEFAULT_IMAGE_FAMILY}"
    assert params["labels"]["gpuplan-run-id"] == RUN  # the disk is labelled too
    assert params["diskSizeGb"] == "200"
    metadata = {i["key"]: i["value"] for i in vm["metadata"]["items"]}
    assert metadata["startup-script"] == "#!/bin/bash\necho 'hello'\n"
    assert metadata["install-nvidia-driver"] == "True"
    assert "serviceAccounts" not in vm  # least privilege unless a service account is configured


def test_no_max_hours_means_no_run_duration(provider: GcpProvider, gce: RunningFake) -> None:
    provider.launch(req(max_hours=None))
    scheduling = stored(gce)[0]["scheduling"]
    assert "maxRunDuration" not in scheduling and "instanceTerminationAction" not in scheduling


def test_spot_is_deleted_on_preemption_not_stopped(provider: GcpProvider, gce: RunningFake) -> None:
    [inst] = provider.launch(req(spot=True, max_hours=1))
    assert inst.spot
    scheduling = stored(gce)[0]["scheduling"]
    assert scheduling["provisioningModel"] == "SPOT"
    assert scheduling["instanceTerminationAction"] == "DELETE"
    assert scheduling["automaticRestart"] is False
    assert scheduling["maxRunDuration"] == {"seconds": "3600"}


@pytest.mark.parametrize(("machine", "gpu", "count", "expect_gpu", "expect_count"), [
    ("a2-highgpu-2g", "A100", 2, "A100-40GB", 2.0),
    ("a3-highgpu-8g", "H100", 8, "H100", 8.0),
    (None, "L4", 1, "L4", 1.0),  # no machine type in the offer: a g2 host is chosen
    ("g2-standard-48", "L4", 4, "L4", 4.0),
])
def test_accelerator_optimised_types_get_their_fixed_gpus(provider: GcpProvider, gce: RunningFake, machine: str | None,
                                                          gpu: str, count: int, expect_gpu: str,
                                                          expect_count: float) -> None:
    # The fake, like GCE, refuses guestAccelerators on these types: success proves none were sent.
    [inst] = provider.launch(req(instance_type=machine, gpu=gpu, gpus_per_node=count, zones=("us-central1-b",)))
    assert (inst.gpu, inst.gpu_count) == (expect_gpu, expect_count)
    assert inst.instance_type == (machine or "g2-standard-8")


def test_machine_type_choice_without_an_offer_type() -> None:
    assert choose_machine_type(None, "T4", 4) == "n1-standard-32"
    assert choose_machine_type(None, "A100-80GB", 8) == "a2-ultragpu-8g"
    assert choose_machine_type("n1-highmem-8", "V100", 1) == "n1-highmem-8"
    with pytest.raises(ProviderError, match="no H100 machine with 3"):
        choose_machine_type(None, "H100", 3)
    with pytest.raises(ProviderError, match="unknown GPU"):
        choose_machine_type(None, "K80000", 1)


def test_gpuplans_own_label_values_are_sanitised_to_gce_rules() -> None:
    labels = labels_for(req(name="My Run: v2 (ÜBER)", project="Team.A/B"))
    assert labels["gpuplan-name"] == "my-run--v2---ber-"
    assert labels["gpuplan-project"] == "team-a-b"
    assert label_value("R-ABC") == "r-abc" and len(label_value("x" * 80)) == 63
    name = instance_name("r-" + "f" * 70, 3, generation=2)
    assert len(name) <= 63 and name.endswith("-g2-3") and name.startswith("gpuplan-r-")


@pytest.mark.parametrize(("labels", "rule"), [
    ({"9lives": "x"}, "keys start with a lowercase letter"),
    ({"Team": "nlp"}, "keys start with a lowercase letter"),
    ({"team": "NLP Group"}, "values hold only lowercase letters"),
    ({"team.name": "nlp"}, "keys hold only lowercase letters"),
    ({"team": "x" * 64}, "values are at most 63 characters"),
    ({"k" * 64: "x"}, "keys are 1 to 63 characters"),
    ({"": "x"}, "keys are 1 to 63 characters"),
    ({"team": "é" * 63}, "under 128 bytes"),  # 63 characters, 126 bytes: fine; see the next case
    ({"gpuplan-run-id": "forged"}, "gpuplan's own"),
])
def test_spec_labels_breaking_gce_rules_are_refused_not_rewritten(labels: dict[str, str], rule: str) -> None:
    problem = spec_label_problem(labels)
    if labels == {"team": "é" * 63}:
        assert problem is None
        assert spec_label_problem({"team": "é" * 63 + "a"}) is not None
        assert spec_label_problem({"téam": "日本語"}) is None  # international characters are allowed
        return
    assert problem is not None and rule in problem
    assert "labeling-resources#requirements" in problem or "gpuplan's own" in problem
    with pytest.raises(ProviderError, match=r"not a valid GCP label|gpuplan's own"):
        labels_for(req(labels=labels))


def test_request_id_is_a_stable_uuid_per_run_zone_generation_and_rank() -> None:
    rid = request_id(RUN, "us-central1-a", 0, 0)
    assert uuid.UUID(rid).version == 5
    assert rid == request_id(RUN, "us-central1-a", 0, 0)
    others = {request_id(RUN, "us-central1-b", 0, 0), request_id(RUN, "us-central1-a", 1, 0),
              request_id(RUN, "us-central1-a", 0, 1), request_id("r-other", "us-central1-a", 0, 0),
              request_id(RUN, "us-central1-a", 0, 0, attempt=1)}
    assert rid not in others and len(others) == 5


def test_a_failed_request_id_is_not_replayed(provider: GcpProvider, gce: RunningFake) -> None:
    # GCE answers a reused requestId with its first operation: after a capacity failure, launching the same run in
    # the same zone later must use the next attempt's id, or it would replay the failure forever.
    gce.state.fail_insert("us-central1-a")
    with pytest.raises(CapacityError):
        provider.launch(req())
    [inst] = provider.launch(req())
    assert inst.state == InstanceState.RUNNING
    used = [c[2]["requestId"] for c in gce.state.calls if c[0] == "POST" and c[1].endswith("/instances")]
    assert used == [request_id(RUN, "us-central1-a", 0, 0, 0), request_id(RUN, "us-central1-a", 0, 0, 1)]


def test_lost_insert_response_is_retried_with_the_same_request_id(provider: GcpProvider, gce: RunningFake) -> None:
    # GCE created the VM but the answer never arrived: the client's retry sends the same requestId and gets the
    # first operation back; no second VM exists.
    gce.state.lose_insert_response("us-central1-a")
    [inst] = provider.launch(req())
    assert inst.state == InstanceState.RUNNING
    assert inserts(gce) == 2
    request_ids = {c[2]["requestId"] for c in gce.state.calls if c[0] == "POST" and c[1].endswith("/instances")}
    assert request_ids == {request_id(RUN, "us-central1-a", 0, 0)}
    assert len(stored(gce)) == 1


def test_lookup_by_label_prevents_a_second_launch(provider: GcpProvider, gce: RunningFake) -> None:
    first = provider.launch(req())
    # A retried launch of the same run, even aimed at another zone, returns the running VM.
    again = GcpProvider(retry_initial=0.01).launch(req(zones=("us-central1-b",)))
    assert [i.instance_id for i in again] == [i.instance_id for i in first]
    assert inserts(gce) == 1 and len(stored(gce)) == 1


def test_existing_name_is_reused_not_doubled(provider: GcpProvider, gce: RunningFake) -> None:
    # Deterministic names are the third guard: even with the label lookup bypassed, GCE answers alreadyExists.
    provider.launch(req())
    body = provider._instance_body(req(), "us-central1-a", instance_name(RUN, 0), "n1-standard-8",
                                   ("nvidia-tesla-t4", 1), 0)
    assert provider._insert("us-central1-a", body, request_id(RUN, "us-central1-a", 0, 9)) is None
    assert len(stored(gce)) == 1


def test_multi_node_runs_share_a_zone_and_are_all_or_nothing(provider: GcpProvider, gce: RunningFake) -> None:
    nodes = provider.launch(req(nodes=2, run_id="r-twonodes00"))
    assert [n.node_rank for n in nodes] == [0, 1]
    assert {n.zone for n in nodes} == {"us-central1-a"}

    gce.state.fail_insert("us-central1-b", skip=1)  # rank 0 starts, rank 1 finds no capacity
    with pytest.raises(CapacityError):
        provider.launch(req(nodes=2, run_id="r-halfrun000", zones=("us-central1-b",)))
    assert not [vm for vm in stored(gce) if vm["labels"]["gpuplan-run-id"] == "r-halfrun000"]


@pytest.mark.parametrize("code", ["ZONE_RESOURCE_POOL_EXHAUSTED", "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS"])
def test_capacity_errors_are_typed_and_leave_nothing_behind(provider: GcpProvider, gce: RunningFake,
                                                            code: str) -> None:
    gce.state.fail_insert("us-central1-a", code)
    with pytest.raises(CapacityError) as info:
        provider.launch(req())
    assert (info.value.code, info.value.zone, info.value.region) == (code, "us-central1-a", "us-central1")
    assert "does not have enough resources" in str(info.value)
    assert stored(gce) == []


def test_gpu_not_offered_in_zone_is_a_capacity_error(provider: GcpProvider, gce: RunningFake) -> None:
    with pytest.raises(CapacityError) as info:
        provider.launch(req(gpu="V100", zones=("us-east1-b",)))
    assert info.value.code == "NOT_OFFERED_IN_ZONE"
    assert inserts(gce) == 0


def test_quota_errors_from_the_operation_and_from_http(provider: GcpProvider, gce: RunningFake) -> None:
    gce.state.fail_insert("us-central1-a", "QUOTA_EXCEEDED", "Quota 'NVIDIA_T4_GPUS' exceeded. Limit: 0.0")
    with pytest.raises(QuotaError, match="NVIDIA_T4_GPUS"):
        provider.launch(req())
    gce.state.fail_http("us-central1-a", 403, "quotaExceeded", "Quota 'GPUS_ALL_REGIONS' exceeded.")
    with pytest.raises(QuotaError) as info:
        provider.launch(req())
    assert info.value.code == "quotaExceeded"
    assert stored(gce) == []


@pytest.mark.parametrize(("status", "reason"), [(401, "required"), (403, "forbidden")])
def test_auth_errors(provider: GcpProvider, gce: RunningFake, status: int, reason: str) -> None:
    gce.state.fail_http("us-central1-a", status, reason, "Required 'compute.instances.create' permission")
    with pytest.raises(AuthError):
        provider.launch(req())


def test_throttling_is_retried(provider: GcpProvider, gce: RunningFake) -> None:
    gce.state.fail_http("us-central1-a", 429, "rateLimitExceeded", times=2)
    [inst] = provider.launch(req())
    assert inst.state == InstanceState.RUNNING
    assert inserts(gce) == 3 and len(stored(gce)) == 1


@pytest.mark.parametrize(("status", "state"), [
    ("PROVISIONING", InstanceState.PENDING), ("STAGING", InstanceState.PENDING),
    ("RUNNING", InstanceState.RUNNING), ("STOPPING", InstanceState.STOPPING),
    ("SUSPENDED", InstanceState.STOPPING), ("TERMINATED", InstanceState.TERMINATED),
])
def test_describe_maps_gce_statuses(provider: GcpProvider, gce: RunningFake, status: str, state: str) -> None:
    [inst] = provider.launch(req())
    gce.state.set_status("us-central1-a", instance_name(RUN, 0), status)
    [seen] = provider.describe([inst.instance_id])
    assert seen.state == state


def test_preempted_spot_vm_is_reported_preempted(provider: GcpProvider, gce: RunningFake) -> None:
    [inst] = provider.launch(req(spot=True))
    [other] = provider.launch(req(run_id="r-ondemand00"))
    gce.state.preempt("us-central1-a", instance_name(RUN, 0))
    assert stored(gce) != [] and len(stored(gce)) == 1  # deleted by GCE, as instanceTerminationAction says
    seen = {i.instance_id: i for i in provider.describe([inst.instance_id, other.instance_id])}
    assert seen[inst.instance_id].state == InstanceState.PREEMPTED
    assert seen[other.instance_id].state == InstanceState.RUNNING
    provider.terminate([other.instance_id])
    [gone] = provider.describe([other.instance_id])
    assert gone.state == InstanceState.TERMINATED  # deleted by us, not preempted


def test_terminate_deletes_waits_and_is_idempotent(provider: GcpProvider, gce: RunningFake) -> None:
    nodes = provider.launch(req(nodes=2))
    ids = [n.instance_id for n in nodes]
    provider.terminate(ids)
    assert stored(gce) == []
    provider.terminate(ids)  # already gone: not an error
    assert {i.state for i in provider.describe(ids)} == {InstanceState.TERMINATED}


def test_list_tagged_finds_every_gpuplan_vm_across_zones(provider: GcpProvider, gce: RunningFake) -> None:
    provider.launch(req())
    provider.launch(req(run_id="r-elsewhere0", zones=("europe-west4-a",)))
    everything = provider.list_tagged()
    assert {(i.run_id, i.zone) for i in everything} == {(RUN, "us-central1-a"), ("r-elsewhere0", "europe-west4-a")}
    assert [i.run_id for i in provider.list_tagged("r-elsewhere0")] == ["r-elsewhere0"]
    # Reconcile hands over the regions it knows of; GCP still searches every zone (one aggregatedList call), so
    # an orphan in a region the books never mention is not missed.
    scoped = GcpProvider(regions=["us-central1"]).list_tagged()
    assert {i.run_id for i in scoped} == {RUN, "r-elsewhere0"}


def test_a_powered_off_vm_is_deleted_not_left_billing_its_disk(provider: GcpProvider, gce: RunningFake) -> None:
    # The boot script powers the VM off when the job ends; on GCE that only stops it (status TERMINATED).
    [inst] = provider.launch(req())
    gce.state.set_status("us-central1-a", instance_name(RUN, 0), "TERMINATED")
    [listed] = provider.list_tagged(RUN)
    assert listed.state == InstanceState.STOPPING  # still costs money: reconcile must see it
    [seen] = provider.describe([inst.instance_id])
    assert seen.state == InstanceState.TERMINATED
    assert seen.state_reason == "powered off by its job; deleted by gpuplan"
    gce.state.get_operation("us-central1-a", gce.state.operations_of("delete")[-1], wait=True)
    assert gce.state.live() == []


def test_launch_without_zone_picks_the_regions_first_zone(provider: GcpProvider, gce: RunningFake) -> None:
    [inst] = provider.launch(req(zones=(), region="us-east1"))
    assert inst.zone == "us-east1-b"


def test_endpoint_override_in_gclouds_form() -> None:
    assert Endpoint.parse("http://127.0.0.1:8089/compute/v1/") == Endpoint("http://127.0.0.1:8089", True)
    assert Endpoint.parse("http://localhost:8089/compute/v1") == Endpoint("http://localhost:8089", True)
    assert Endpoint.parse("https://compute.example.internal/compute/v1/") == \
        Endpoint("https://compute.example.internal", False)
    assert Endpoint.parse("http://[::1]:9000/compute/v1/").loopback
    assert Endpoint.parse(None) == Endpoint(None, False)


def test_anonymous_credentials_only_on_loopback(monkeypatch: pytest.MonkeyPatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # A non-loopback endpoint needs Application Default Credentials; there are none here, so: AuthError.
    # The metadata server lookup of google.auth is pointed at a closed loopback port (no test leaves 127.0.0.1).
    monkeypatch.setenv("GCE_METADATA_HOST", "127.0.0.1:9")
    monkeypatch.setenv("GCE_METADATA_IP", "127.0.0.1:9")
    monkeypatch.setenv("NO_GCE_CHECK", "True")
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(tmp_path / "gcloud"))
    monkeypatch.setenv("CLOUDSDK_API_ENDPOINT_OVERRIDES_COMPUTE", "https://compute.example.invalid/compute/v1/")
    provider = GcpProvider(project="p")
    assert not provider.endpoint.loopback
    with pytest.raises(AuthError, match="credentials not found"):
        provider.client("InstancesClient")


def test_missing_project_is_a_clear_error(gce: RunningFake, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GOOGLE_CLOUD_PROJECT")
    monkeypatch.delenv("CLOUDSDK_CORE_PROJECT", raising=False)
    with pytest.raises(ProviderError, match="no GCP project"):
        GcpProvider().zones("us-central1")


def test_startup_script_is_rendered_per_node_when_the_request_has_none(secretmanager: Any, gce: RunningFake,
                                                                        provider: GcpProvider) -> None:
    provider.launch(req(boot_script=None, nodes=2, command="python train.py --name \"$(reboot)\"",
                        secrets={"HF_TOKEN": "hf_secret_value"}, max_hours=1))
    vms = sorted(stored(gce), key=lambda vm: vm["name"])
    scripts = [{i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"] for vm in vms]
    master = f"{instance_name(RUN, 0)}.us-central1-a.c.gpuplan-test.internal"
    assert all(s.startswith("#!") for s in scripts)
    assert "NODE_RANK_=0" in scripts[0] and "NODE_RANK_=1" in scripts[1]
    assert f"MASTER_ADDR_={master}" in scripts[1]
    # User text enters only shell-quoted; the secret is kept in Secret Manager: the scripts and labels only name it.
    assert "'exec python train.py --name \"$(reboot)\"'" in scripts[0]
    assert all("hf_secret_value" not in s for s in scripts)
    assert all(f"SECRET_PARAMS=(projects/gpuplan-test/secrets/gpuplan-{RUN}-HF_TOKEN)" in s for s in scripts)
    assert all("hf_secret_value" not in v for vm in vms for v in vm["labels"].values())
    assert secretmanager.state.value(f"gpuplan-{RUN}-HF_TOKEN") == b"hf_secret_value"


def test_a_multi_node_launch_cut_short_is_completed_not_doubled(provider: GcpProvider, gce: RunningFake) -> None:
    # Only rank 0 made it before the launching process died (simulated by launching a one-node request).
    [rank0] = provider.launch(req(nodes=1, zones=("us-central1-c",)))
    nodes = provider.launch(req(nodes=3, zones=("us-central1-a",)))
    assert [(n.node_rank, n.zone) for n in nodes] == [(0, "us-central1-c"), (1, "us-central1-c"),
                                                      (2, "us-central1-c")]
    assert nodes[0].instance_id == rank0.instance_id
    assert len(stored(gce)) == 3


def test_relaunch_after_preemption_starts_a_fresh_vm(provider: GcpProvider, gce: RunningFake) -> None:
    [first] = provider.launch(req(spot=True))
    gce.state.preempt("us-central1-a", instance_name(RUN, 0))
    assert provider.describe([first.instance_id])[0].state == InstanceState.PREEMPTED
    # The watch loop relaunches from the checkpoint as the next generation: new names, new requestIds.
    [second] = provider.launch(req(spot=True, options={"generation": 1}))
    assert second.instance_id == f"us-central1-a/{instance_name(RUN, 0, generation=1)}"
    assert second.state == InstanceState.RUNNING
    # Even without a new generation, the finished insert's requestId is not replayed: a VM really starts.
    gce.state.preempt("us-central1-a", instance_name(RUN, 0, generation=1))
    [third] = provider.launch(req(spot=True))
    assert third.state == InstanceState.RUNNING and len(stored(gce)) == 1


def test_orchestrations_per_node_renderer_wins(provider: GcpProvider, gce: RunningFake) -> None:
    calls: list[tuple[int, str | None]] = []
    addrs: list[list[str]] = []

    def render(rank: int, master: str | None, node_addrs: list[str] = ()) -> str:  # type: ignore[assignment]
        calls.append((rank, master))
        addrs.append(list(node_addrs))
        return f"#!/bin/sh\necho node {rank}\n"

    provider.launch(req(nodes=2, boot_script="#!/bin/sh\necho one for all\n", options={"boot_script_for": render}))
    names = [f"{instance_name(RUN, r)}.us-central1-a.c.gpuplan-test.internal" for r in (0, 1)]
    assert calls == [(0, None), (1, names[0])]
    assert addrs == [names, names]  # every node's internal DNS name, rank order: GPUPLAN_NODE_IPS
    scripts = sorted({i["key"]: i["value"] for i in vm["metadata"]["items"]}["startup-script"] for vm in stored(gce))
    assert scripts == ["#!/bin/sh\necho node 0\n", "#!/bin/sh\necho node 1\n"]


def test_gpuplans_labels_and_the_specs_never_pass_gces_64() -> None:
    fits = {f"team-{i}": "x" for i in range(MAX_SPEC_LABELS)}
    labels = {**labels_for(req(labels=fits)), "gpuplan-node-rank": "0", LABEL_SECRETS: LABEL_SECRETS_VALUE}
    assert len(labels) == MAX_SPEC_LABELS + OWN_LABELS == 64  # what instance.py sends, at most
    assert labels["gpuplan-run-id"] == RUN and labels["gpuplan-created-by"] == "gpuplan"
    too_many = {**fits, "one-more": "x"}
    with pytest.raises(ProviderError, match="59 labels; GCP allows 64 per VM and gpuplan keeps 6 of them"):
        labels_for(req(labels=too_many))
