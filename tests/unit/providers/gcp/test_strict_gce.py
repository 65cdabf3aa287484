"""The strict GCE layer (tests/support/strict_gce.py): each documented rule refuses what the plain fake accepts.

Each test sends the violating request with the real google-cloud-compute client, once with the rule off (the plain
fake: accepted, a VM exists) and once with it on (GCE's documented error, no VM). The sources of each rule are in
the layer's docstring; gpuplan's side (it never sends these) is tests/unit/providers/gcp/test_gcp_machine_rules.py.
"""

from __future__ import annotations

import itertools
import uuid
from typing import Any

import pytest
from google.api_core import exceptions as gexc
from google.auth.credentials import AnonymousCredentials
from google.cloud import compute_v1

from support.fakes.gce_server import RunningFake

ZONE = "us-central1-c"
IMAGE = "projects/deeplearning-platform-release/global/images/family/common-cu128-ubuntu-2204-nvidia-570"
_names = itertools.count()


def client(gce: RunningFake, kind: str) -> Any:
    return getattr(compute_v1, kind)(credentials=AnonymousCredentials(), transport="rest",
                                     client_options={"api_endpoint": gce.api_endpoint})


def body(machine: str = "a3-highgpu-8g", *, labels: dict[str, str] | None = None, image: str = IMAGE,
         disk_type: str = "pd-balanced", model: str = "STANDARD") -> compute_v1.Instance:
    """A VM GCE accepts except for what the test changes (GPUs terminate on maintenance, spot never restarts)."""
    params = compute_v1.AttachedDiskInitializeParams(source_image=image,
                                                     disk_type=f"zones/{ZONE}/diskTypes/{disk_type}")
    return compute_v1.Instance(
        name=f"strict-{next(_names)}", machine_type=f"zones/{ZONE}/machineTypes/{machine}", labels=labels or {},
        disks=[compute_v1.AttachedDisk(boot=True, auto_delete=True, initialize_params=params)],
        network_interfaces=[compute_v1.NetworkInterface(network="global/networks/default",
                                                        nic_type="GVNIC" if machine.startswith("a3-") else None)],
        scheduling=compute_v1.Scheduling(on_host_maintenance="TERMINATE", automatic_restart=False,
                                         provisioning_model=model),
    )


def insert(gce: RunningFake, instance: compute_v1.Instance) -> compute_v1.Operation:
    """Insert and wait for the operation; returns the finished operation (its `error` set when GCE refused)."""
    op = client(gce, "InstancesClient").insert(project=gce.state.project, zone=ZONE, instance_resource=instance)
    return client(gce, "ZoneOperationsClient").wait(project=gce.state.project, zone=ZONE, operation=op.name)


def error_body(exc: gexc.GoogleAPICallError) -> tuple[int, str, str]:
    [item] = exc.errors
    return exc.code, item["reason"], item["message"]


@pytest.mark.parametrize(("labels", "message"), [
    ({f"k{i}": "v" for i in range(65)}, "Invalid value for field 'resource.labels': ''. Too many labels"),
    ({"Team": "nlp"}, "Invalid value for field 'resource.labels': ''. Label key 'Team' violates format constraints. "
                      "The key must start with a lowercase character"),
    ({"team": "NLP Group"}, "Invalid value for field 'resource.labels': ''. Label value 'NLP Group' violates format "
                            "constraints. The value can only contain lowercase letters, numeric characters, "
                            "underscores and dashes. The value can be at most 63 characters long. International "
                            "characters are allowed."),
    ({"team": "x" * 64}, "Label value '" + "x" * 64 + "' violates format constraints"),
])
def test_labels_rule(gce: RunningFake, labels: dict[str, str], message: str) -> None:
    gce.strict.labels = False
    assert not insert(gce, body(labels=labels)).error  # the plain fake takes them
    gce.strict.labels = True
    with pytest.raises(gexc.BadRequest) as caught:
        insert(gce, body(labels=labels))
    code, reason, text = error_body(caught.value)
    assert (code, reason) == (400, "invalid") and message in text
    assert len(gce.state.live()) == 1 and gce.strict.refused == ["labels"]


def test_labels_rule_allows_what_gce_allows(gce: RunningFake) -> None:
    labels = {f"k{i}": "v" for i in range(63)} | {"téam": "日本語-1"}  # 64, international characters
    assert not insert(gce, body(labels=labels)).error and gce.strict.refused == []


def test_image_family_rule_on_get_from_family(gce: RunningFake) -> None:
    images = client(gce, "ImagesClient")
    gce.strict.image_families = False
    assert images.get_from_family(project="deeplearning-platform-release", family="pytorch-0-1-gone").name
    gce.strict.image_families = True
    with pytest.raises(gexc.NotFound) as caught:
        images.get_from_family(project="deeplearning-platform-release", family="pytorch-0-1-gone")
    assert error_body(caught.value) == (404, "notFound", "The resource 'projects/deeplearning-platform-release/"
                                                         "global/images/family/pytorch-0-1-gone' was not found")
    found = images.get_from_family(project="deeplearning-platform-release",
                                   family="common-cu128-ubuntu-2204-nvidia-570")
    assert found.family == "common-cu128-ubuntu-2204-nvidia-570"


def test_image_family_rule_on_insert(gce: RunningFake) -> None:
    gone = "projects/debian-cloud/global/images/family/debian-8"
    gce.strict.image_families = False
    assert not insert(gce, body(image=gone)).error
    gce.strict.image_families = True
    with pytest.raises(gexc.NotFound) as caught:
        insert(gce, body(image=gone))
    assert error_body(caught.value) == (404, "notFound", "The resource 'projects/debian-cloud/global/images/family/"
                                                         "debian-8' was not found")
    assert len(gce.state.live()) == 1


@pytest.mark.parametrize("machine", ["a4-highgpu-8g", "a3-ultragpu-8g"])
def test_hyperdisk_only_boot_disk_rule(gce: RunningFake, machine: str) -> None:
    gce.strict.boot_disks = False
    assert not insert(gce, body(machine, disk_type="pd-balanced", model="SPOT")).error
    gce.strict.boot_disks = True
    op = insert(gce, body(machine, disk_type="pd-balanced", model="SPOT"))
    [err] = op.error.errors
    assert (err.code, err.message) == ("UNSUPPORTED_OPERATION",
                                       f"[pd-balanced, {machine}] features are not compatible for creating instance.")
    assert len(gce.state.live()) == 1 and gce.strict.refused == ["boot_disks"]
    assert not insert(gce, body(machine, disk_type="hyperdisk-balanced", model="SPOT")).error


@pytest.mark.parametrize("machine", ["a3-highgpu-1g", "a3-highgpu-2g", "a3-highgpu-4g"])
def test_spot_or_flex_only_shape_rule(gce: RunningFake, machine: str) -> None:
    gce.strict.markets = False
    assert not insert(gce, body(machine, model="STANDARD")).error
    gce.strict.markets = True
    [err] = insert(gce, body(machine, model="STANDARD")).error.errors
    assert err.code == "UNSUPPORTED_OPERATION" and "provisioning model STANDARD" in err.message
    assert not insert(gce, body(machine, model="SPOT")).error  # Spot is sold
    assert not insert(gce, body("a3-highgpu-8g", model="STANDARD")).error  # 8 GPUs: on demand too
    assert len(gce.state.live()) == 3 and gce.strict.refused == ["markets"]


def test_a_replayed_request_id_leaves_no_failure_queued(gce: RunningFake) -> None:
    """A retried insert (same requestId) gets its first operation back; the strict layer must not queue a failure
    that the next, unrelated insert would then take."""
    instances = client(gce, "InstancesClient")
    request = compute_v1.InsertInstanceRequest(project=gce.state.project, zone=ZONE, request_id=str(uuid.uuid4()),
                                               instance_resource=body("a3-highgpu-1g", model="STANDARD"))
    first = instances.insert(request=request)
    assert instances.insert(request=request).name == first.name
    assert gce.state.failures.get(ZONE, []) == [] and gce.strict.refused == ["markets"]


def test_metadata_rule(gce: RunningFake) -> None:
    """A startup-script over 256 KiB: the plain fake takes it, GCE does not; exactly 256 KiB is allowed."""
    def with_script(size: int) -> compute_v1.Instance:
        instance = body()
        instance.metadata = compute_v1.Metadata(items=[compute_v1.Items(key="startup-script", value="x" * size)])
        return instance

    gce.strict.metadata = False
    assert not insert(gce, with_script(262145)).error
    gce.strict.metadata = True
    assert not insert(gce, with_script(262144)).error
    with pytest.raises(gexc.BadRequest) as caught:
        insert(gce, with_script(262145))
    code, reason, text = error_body(caught.value)
    assert (code, reason) == (400, "invalid") and "startup-script" in text
    assert len(gce.state.live()) == 2 and gce.strict.refused == ["metadata"]


def test_gpus_all_regions_rule(gce: RunningFake) -> None:
    """Issue 32 item 4: a new project's project-wide GPU quota is 0; the plain fake has no quotas."""
    assert not insert(gce, body("a3-highgpu-8g", model="SPOT")).error  # rule off: plain fake
    gce.strict.gpus_all_regions = 8
    with pytest.raises(gexc.Forbidden) as caught:
        insert(gce, body("a3-highgpu-8g", model="SPOT"))  # 8 live + 8 more > 8
    assert error_body(caught.value) == (403, "quotaExceeded", "Quota 'GPUS_ALL_REGIONS' exceeded. Limit: 8.0 globally.")
    assert len(gce.state.live()) == 1 and gce.strict.refused == ["gpus_all_regions"]
