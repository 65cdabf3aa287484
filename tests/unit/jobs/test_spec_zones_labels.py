"""`resources.zones` and `labels`: what the spec accepts, and the labels EC2 would refuse as tags (refused here,
exit 2, instead of by RunInstances in every zone: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/Using_Tags.html
#tag-restrictions)."""

from __future__ import annotations

import pytest

from gpuplan.jobs.spec import MAX_LABELS, SpecError, parse_spec

BASE = "name: z\nruntime: process\ncommand: 'true'\n"


def test_zones_take_names_and_ids_including_a_local_zone() -> None:
    spec = parse_spec(BASE + "resources: {zones: [us-east-1a, use1-az4, use1-atl2-az1]}\n")
    assert spec.resources.zones == ["us-east-1a", "use1-az4", "use1-atl2-az1"]
    assert parse_spec(BASE + "resources: {zones: 'us-central1-a, us-central1-b'}\n").resources.zones == [
        "us-central1-a", "us-central1-b"]


@pytest.mark.parametrize("zone", ["US-EAST-1A", "us east 1a", "-us-east-1a", "us-east-1a;rm"])
def test_a_zone_that_is_no_zone_name_or_id_is_refused_with_its_line(zone: str) -> None:
    with pytest.raises(SpecError, match=r"<spec>:5: resources.zones: .*not a zone name or id") as info:
        parse_spec(BASE + f"resources:\n  zones: [{zone!r}]\n")
    assert info.value.exit_code == 2


def test_labels_within_ec2_tag_rules_are_kept() -> None:
    labels = {"team": "nlp", "cost-center": "CC 42/b", "k" * 128: "v" * 256, "a.b:c@d=e+f_g": ""}
    text = BASE + "labels:\n" + "".join(f"  {k!r}: {v!r}\n" for k, v in labels.items())
    assert parse_spec(text).labels == labels


@pytest.mark.parametrize(("key", "value", "why"), [
    ("aws:team", "x", "reserved"),
    ("AWS:team", "x", "reserved"),
    ("gpuplan:run-id", "x", "reserved"),
    ("k" * 129, "x", "1-128"),
    ("team/nlp", "x", "no spaces or '/'"),  # instance tags in metadata (InstanceMetadataTags=enabled) refuse '/'
    ("my team", "x", "no spaces or '/'"),
    ("_index", "x", "1-128"),
    ("team", "v" * 257, "at most 256"),
    ("team", "a;b", "at most 256"),
])
def test_labels_ec2_would_refuse_are_refused_at_validation(key: str, value: str, why: str) -> None:
    with pytest.raises(SpecError, match=why) as info:
        parse_spec(BASE + f"labels:\n  {key!r}: {value!r}\n")
    assert info.value.exit_code == 2


def test_at_most_43_labels_since_ec2_allows_50_tags_and_gpuplan_sets_7() -> None:
    assert MAX_LABELS == 43
    ok = BASE + "labels:\n" + "".join(f"  k{i}: v\n" for i in range(MAX_LABELS))
    assert len(parse_spec(ok).labels) == MAX_LABELS
    with pytest.raises(SpecError, match="at most 43 labels"):
        parse_spec(BASE + "labels:\n" + "".join(f"  k{i}: v\n" for i in range(MAX_LABELS + 1)))
