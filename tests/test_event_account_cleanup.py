"""The event's clean-up and an attendee's own role (course/event/room.py, helpers/aws/account.py), against a
stand-in for boto3 whose every call is validated against botocore's service model (none is sent): warm pools are
released with KeepAlivePeriodInSeconds=0 (nothing else ends one early), the room's Studio apps of every type are
deleted in spaces and under profiles, the Studio log group goes too, and a laptop finds its attendee's own job role
by its path."""

from __future__ import annotations

import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.validate import validate_parameters

from course.event import room, stack
from helpers.aws import leftovers
from helpers.aws.setup_errors import RoleError

MODELS = botocore.session.get_session()


class Client:
    """One service: answers from ``answers[operation]`` (a list of pages for a paginated call), records each call."""

    def __init__(self, service: str, answers: dict, calls: list):
        self.model, self.answers, self.calls = MODELS.get_service_model(service), answers, calls

    def _call(self, method: str, **params):
        op = "".join(part.title() for part in method.split("_"))
        op = {"ListTags": "ListTags", "ListRoles": "ListRoles"}.get(op, op)
        validate_parameters(params, self.model.operation_model(op).input_shape)
        self.calls.append((op, params))
        answer = self.answers.get(op, {})
        return answer(params) if callable(answer) else answer

    def __getattr__(self, method):
        return lambda **params: self._call(method, **params)

    def get_paginator(self, method):
        client = self

        class Pages:
            def paginate(self, **params):
                return [client._call(method, **params)]

        return Pages()


class Session:
    def __init__(self, answers: dict):
        self.answers, self.calls, self.region_name = answers, [], "us-east-1"

    def client(self, service, region_name=None):
        return Client(service, self.answers.get(service, {}), self.calls)


def _jobs(params):
    if params.get("WarmPoolStatusEquals") == "Available":
        return {"TrainingJobSummaries": [_summary("attendee-01-lab08-x"), _summary("attendee-011-lab08-y")]}
    return {"TrainingJobSummaries": [_summary("attendee-02-lab02-z"), _summary("workshop-demo")]}


def _summary(name):
    return {
        "TrainingJobName": name,
        "TrainingJobArn": f"arn:aws:sagemaker:us-east-1:111122223333:training-job/{name}",
        "CreationTime": 0,
        "TrainingJobStatus": "Completed",
    }


def _tags(params):
    name = params["ResourceArn"].rsplit("/", 1)[1]
    who = name.rsplit("-lab", 1)[0] if "-lab" in name else None
    return {"Tags": [{"Key": "workshop-attendee", "Value": who}] if who else []}


APPS = {
    "Apps": [
        {
            "DomainId": "d-1",
            "SpaceName": "a1-space",
            "AppType": "JupyterLab",
            "AppName": "default",
            "Status": "InService",
        },
        {
            "DomainId": "d-1",
            "SpaceName": "a2-space",
            "AppType": "CodeEditor",
            "AppName": "default",
            "Status": "InService",
        },
        {"DomainId": "d-1", "UserProfileName": "attendee-03", "AppType": "JupyterServer", "AppName": "default"},
        {"DomainId": "d-1", "SpaceName": "old", "AppType": "JupyterLab", "AppName": "default", "Status": "Deleted"},
    ]
}
ANSWERS = {
    "sagemaker": {"ListTrainingJobs": _jobs, "ListTags": _tags, "ListApps": APPS},
    "logs": {"DescribeLogGroups": lambda p: {"logGroups": [{"logGroupName": p["logGroupNamePrefix"]}]}},
}


def test_an_attendee_s_warm_pools_are_released_with_a_keep_alive_of_zero():
    session = Session(ANSWERS)
    released = leftovers.release_warm_pools("attendee-01", boto_session=session)
    assert released == ["attendee-01-lab08-x"]  # not attendee-011's, whose name merely contains the prefix
    updates = [p for op, p in session.calls if op == "UpdateTrainingJob"]
    assert updates == [{"TrainingJobName": "attendee-01-lab08-x", "ResourceConfig": {"KeepAlivePeriodInSeconds": 0}}]
    listed = next(p for op, p in session.calls if op == "ListTrainingJobs")
    assert listed == {"WarmPoolStatusEquals": "Available", "NameContains": "attendee-01-"}


def test_the_room_s_clean_up_lists_then_stops_releases_and_deletes_everything():
    found = room.room_cleanup("d-1", boto_session=Session(ANSWERS))
    assert found.jobs == ("attendee-02-lab02-z",)  # the facilitator's untagged demo is theirs to stop
    assert found.warm_pools == ("attendee-01-lab08-x", "attendee-011-lab08-y")  # every attendee's
    assert found.apps == (
        "a1-space/JupyterLab/default",
        "a2-space/CodeEditor/default",
        "attendee-03/JupyterServer/default",
    )
    assert found.log_groups == ("/aws/sagemaker/studio", "/aws/sagemaker/TrainingJobs")
    assert not found.done and "room_cleanup(done=True)" in repr(found)
    session = Session(ANSWERS)
    room.room_cleanup("d-1", boto_session=session, done=True)
    acted = [(op, p) for op, p in session.calls if not op.startswith(("List", "Describe"))]
    assert ("StopTrainingJob", {"TrainingJobName": "attendee-02-lab02-z"}) in acted
    assert sum(op == "UpdateTrainingJob" for op, _ in acted) == 2
    deleted = [p for op, p in acted if op == "DeleteApp"]
    assert {(p.get("SpaceName") or p.get("UserProfileName"), p["AppType"]) for p in deleted} == {
        ("a1-space", "JupyterLab"),
        ("a2-space", "CodeEditor"),
        ("attendee-03", "JupyterServer"),
    }
    assert [p["logGroupName"] for op, p in acted if op == "DeleteLogGroup"] == list(found.log_groups)


def test_a_missing_log_group_is_not_an_error():
    def gone(params):
        raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "gone"}}, "DeleteLogGroup")

    answers = ANSWERS | {"logs": ANSWERS["logs"] | {"DeleteLogGroup": gone}}
    assert room.room_cleanup(None, boto_session=Session(answers), done=True).done


def test_a_laptop_finds_its_attendee_s_own_job_role_by_its_path():
    role = "arn:aws:iam::111122223333:role/workshop-jobs/workshop/attendee-07/workshop-JobRole07-AB"
    session = Session(
        {"iam": {"ListRoles": lambda p: {"Roles": [{"Arn": role}] if "attendee-07" in p["PathPrefix"] else []}}}
    )
    assert stack.attendee_role_arn("workshop", "attendee-07", boto_session=session) == role
    assert session.calls == [("ListRoles", {"PathPrefix": "/workshop-jobs/workshop/attendee-07/"})]
    with pytest.raises(RoleError, match="within the stack's Attendees count"):
        stack.attendee_role_arn("workshop", "attendee-41", boto_session=session)


def test_the_role_path_is_the_template_s():
    from test_event_account import account_template

    template = account_template.JOB_ROLE_PATH + "attendee-07/"
    assert stack.JOB_ROLE_PATH.format(stack="${AWS::StackName}", attendee="attendee-07") == template
