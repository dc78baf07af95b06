"""Pre-starting the room's Studio spaces (course.spaces): the real SageMaker requests, validated by botocore's
own service model and answered offline."""

from __future__ import annotations

import pytest

from course import spaces
from sagemaker_standin.offline_account import OfflineAWS

DOMAIN = "d-abc123example"
IMAGE = "arn:aws:sagemaker:us-east-1:081325390199:image/sagemaker-distribution-cpu"


def _domain(aws: OfflineAWS, instance_type: str | None = "ml.m5.xlarge") -> dict:
    """A domain of three attendees and the facilitator: attendee-01's space runs, attendee-02's was stopped (its app
    deleted), attendee-03 has none yet. Returns what was created, as the fake account keeps it."""
    made: dict = {"spaces": {"attendee-01-labs", "attendee-02-labs"}, "apps": {"attendee-01-labs": "InService"}}
    made["apps"]["attendee-02-labs"] = "Deleted"
    profiles = ["attendee-01", "attendee-02", "attendee-03", "facilitator"]
    aws.respond("ListUserProfiles", {"UserProfiles": [{"DomainId": DOMAIN, "UserProfileName": p} for p in profiles]})
    aws.respond("ListSpaces", lambda _: {"Spaces": [{"DomainId": DOMAIN, "SpaceName": s} for s in made["spaces"]]})
    aws.respond(
        "ListApps",
        lambda _: {
            "Apps": [
                {"DomainId": DOMAIN, "SpaceName": s, "AppType": "JupyterLab", "AppName": "default", "Status": st}
                for s, st in made["apps"].items()
            ]
        },
    )
    spec = {"SageMakerImageArn": IMAGE, **({"InstanceType": instance_type} if instance_type else {})}
    aws.respond(
        "DescribeDomain",
        {
            "DomainId": DOMAIN,
            "DefaultUserSettings": {
                "JupyterLabAppSettings": {"DefaultResourceSpec": spec},
                "SpaceStorageSettings": {"DefaultEbsStorageSettings": {"DefaultEbsVolumeSizeInGb": 15}},
            },
        },
    )
    aws.respond("CreateSpace", lambda p: made["spaces"].add(p["SpaceName"]) or {"SpaceArn": "arn:space"})
    aws.respond("CreateApp", lambda p: made["apps"].update({p["SpaceName"]: "Pending"}) or {"AppArn": "arn:app"})
    return made


def test_without_start_it_says_what_it_would_do_and_creates_nothing(capsys):
    aws = OfflineAWS()
    _domain(aws)
    assert spaces.main(["--domain", DOMAIN], boto_session=aws.boto_session) == 0
    out = capsys.readouterr().out
    assert "attendee-01-labs" in out and "running: nothing to do" in out
    assert "facilitator" not in out  # only the attendees' profiles get a space
    assert "2 to start; nothing done" in out
    assert not aws.calls_to("CreateSpace") and not aws.calls_to("CreateApp")


def test_start_creates_private_spaces_owned_by_each_attendee_and_starts_only_what_is_not_running(capsys):
    aws = OfflineAWS()
    made = _domain(aws)
    assert spaces.main(["--domain", DOMAIN, "--start"], boto_session=aws.boto_session) == 0
    (created,) = [c.params for c in aws.calls_to("CreateSpace")]
    assert created == {
        "DomainId": DOMAIN,
        "SpaceName": "attendee-03-labs",
        "OwnershipSettings": {"OwnerUserProfileName": "attendee-03"},
        "SpaceSharingSettings": {"SharingType": "Private"},
        "SpaceSettings": {
            "AppType": "JupyterLab",
            "SpaceStorageSettings": {"EbsStorageSettings": {"EbsVolumeSizeInGb": 15}},
        },
    }
    apps = [c.params for c in aws.calls_to("CreateApp")]
    assert [a["SpaceName"] for a in apps] == ["attendee-02-labs", "attendee-03-labs"]  # attendee-01's runs already
    assert all(a["ResourceSpec"] == {"InstanceType": "ml.m5.xlarge", "SageMakerImageArn": IMAGE} for a in apps)
    assert "started 2 of 3 spaces" in capsys.readouterr().out
    # run again: everything runs, nothing more is created
    assert spaces.main(["--domain", DOMAIN, "--start"], boto_session=aws.boto_session) == 0
    assert len(aws.calls_to("CreateApp")) == 2 and len(aws.calls_to("CreateSpace")) == 1
    assert set(made["apps"].values()) == {"InService", "Pending"}


def test_a_domain_without_a_default_instance_type_is_refused_before_anything_is_created():
    aws = OfflineAWS()
    _domain(aws, instance_type=None)
    with pytest.raises(ValueError, match="sets no default JupyterLab instance type"):
        spaces.main(["--domain", DOMAIN, "--start"], boto_session=aws.boto_session)
    assert not aws.calls_to("CreateSpace") and not aws.calls_to("CreateApp")
