"""Job.tags against the SageMaker API's own tag rules (botocore's model), checked when the Job is made."""

from __future__ import annotations

import re

import botocore.session
import pytest

from helpers import job_spec as job_module
from helpers import jobs
from helpers.errors import JobCheckError
from helpers.job_spec import Job
from helpers.targets import resolve


def _api_rules():
    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.shape_for("TagKey").metadata, model.shape_for("TagValue").metadata


def test_the_rules_are_the_installed_models():
    key, value = _api_rules()
    rules, _ = job_module._tag_rules()
    assert rules["Key"] == (key.get("min", 0), key["max"], key["pattern"])
    assert rules["Value"] == (value.get("min", 0), value["max"], value["pattern"])
    # Python's re has no \p{L}: the pattern must keep the one form the check reads, or the characters go unchecked
    for pattern in (key["pattern"], value["pattern"]):
        categories, literals = job_module._pattern_class(pattern)
        assert categories == {"L", "Z", "N"} and set("_.:/=+-@") <= literals


@pytest.mark.parametrize(
    "tags",
    [
        {},
        {"team": "ml", "cost-center": "1234"},
        {"owner": ""},
        {"팀": "머신 러닝", "プロジェクト": "カタログ 2"},
        {"k" * 128: "v" * 256},
        {"path": "a/b:c=d+e-f@g_h.i"},
    ],
)
def test_tags_the_api_takes_pass(tags):
    assert Job("x", tags=tags).tags == tags


@pytest.mark.parametrize(
    "tags, says",
    [
        ({"cost center!": "x"}, r"key 'cost center!' contains '!'.*letters, digits, spaces.*e\.g\. 'cost center-'"),
        ({"team": "ml#1"}, r"the value of 'team' \('ml#1'\) contains '#'"),
        ({"k" * 129: "v"}, r"has 129 characters; SageMaker takes 1 to 128 for a tag key: shorten it"),
        ({"k": "v" * 257}, r"has 257 characters; SageMaker takes 0 to 256 for a tag value"),
        ({"": "v"}, r"key '' has 0 characters.*give it a name"),
        ({"aws:owner": "me"}, r"'aws:owner' starts with 'aws:', a prefix AWS reserves.*e\.g\. 'owner'"),
        ({"AWS:Owner": "me"}, r"starts with 'aws:'"),
        ({"epochs": 3}, r"the value of 'epochs' \(3\) is not text.*'3'"),
        ({f"t{i}": "v" for i in range(51)}, r"51 tags, but a training job takes at most 50"),
    ],
)
def test_tags_the_api_would_refuse_are_refused_with_what_to_do(tags, says):
    with pytest.raises(ValueError, match=r"^Job\.tags: .*" + says):
        Job("x", tags=tags)


def test_a_list_of_tags_is_refused():
    with pytest.raises(ValueError, match=re.escape("give a dict of key -> value")):
        Job("x", tags=[{"Key": "team", "Value": "ml"}])


def test_the_helpers_own_tag_keys_are_refused(data_channels):
    with pytest.raises(JobCheckError, match="workshop-attendee"):
        jobs.preflight(Job("x", channels=data_channels, tags={"workshop-attendee": "bob"}), resolve("ml.g5.2xlarge"))


@pytest.fixture
def data_channels(small_catalog):
    return job_module.catalog_channels(small_catalog)
