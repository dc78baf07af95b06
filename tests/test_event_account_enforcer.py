"""The room's limits that IAM cannot express (infra/enforcer.py, the template's JobLimits function), run offline on
SageMaker's training-job state-change event (tests/event_account/: the event EventBridge delivers, in the shape of
AWS's documented example, for lab 02's 2-node job) against a stand-in for the SageMaker client: a job above the
per-job instance limit, or one that takes its attendee over their instances at once, is tagged with why and stopped;
the labs' own jobs (lab 02's two nodes, lab 05's three jobs) are left alone; the facilitator's jobs have no attendee."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys

import botocore.session
import pytest
from botocore.validate import validate_parameters
from conftest import REPO
from test_event_account import Stack, account_template

EVENT = json.loads((REPO / "tests" / "event_account" / "job-state-change-inprogress.json").read_text(encoding="utf-8"))


def _enforcer():
    spec = importlib.util.spec_from_file_location("workshop_enforcer", REPO / "infra" / "enforcer.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


enforcer = _enforcer()


class ClientError(Exception):
    pass


MODEL = botocore.session.get_session().get_service_model("sagemaker")


def valid(operation: str, **params) -> None:
    """The call as botocore would validate it before sending: the handler's requests are real ones."""
    validate_parameters(params, MODEL.operation_model(operation).input_shape)


class FakeSageMaker:
    """What the handler calls, over a list of running jobs: (name, attendee tag, instance count, created ms)."""

    class exceptions:  # noqa: N801 (boto3's spelling)
        ClientError = ClientError

    def __init__(self, running):
        self.jobs = {n: {"tag": t, "count": c, "created": at} for n, t, c, at in running}
        self.stopped, self.tagged = [], {}

    def get_paginator(self, name):
        assert name == "list_training_jobs"
        jobs = self.jobs

        class Pages:
            def paginate(self, NameContains, StatusEquals):  # noqa: N803 (the API's names)
                valid("ListTrainingJobs", NameContains=NameContains, StatusEquals=StatusEquals)
                assert StatusEquals == "InProgress"
                found = [n for n in jobs if NameContains in n]
                arn = "arn:aws:sagemaker:us-east-1:111122223333:training-job/"
                return [{"TrainingJobSummaries": [{"TrainingJobName": n, "TrainingJobArn": arn + n} for n in found]}]

        return Pages()

    def describe_training_job(self, TrainingJobName):  # noqa: N803
        valid("DescribeTrainingJob", TrainingJobName=TrainingJobName)
        job = self.jobs[TrainingJobName]
        return {"CreationTime": job["created"], "ResourceConfig": {"InstanceCount": job["count"]}}

    def list_tags(self, ResourceArn):  # noqa: N803
        valid("ListTags", ResourceArn=ResourceArn)
        name = ResourceArn.rsplit("/", 1)[1]
        tag = self.jobs[name]["tag"]
        return {"Tags": [{"Key": "workshop-attendee", "Value": tag}] if tag else []}

    def add_tags(self, ResourceArn, Tags):  # noqa: N803
        valid("AddTags", ResourceArn=ResourceArn, Tags=Tags)
        self.tagged[ResourceArn] = {t["Key"]: t["Value"] for t in Tags}

    def stop_training_job(self, TrainingJobName):  # noqa: N803
        valid("StopTrainingJob", TrainingJobName=TrainingJobName)
        if TrainingJobName in self.stopped:
            raise ClientError("already stopping")
        self.stopped.append(TrainingJobName)


@pytest.fixture(autouse=True)
def _limits(monkeypatch):
    # the values the template gives the function
    variables = Stack().prop("JobLimits", "Environment")["Variables"]
    for name, value in variables.items():
        monkeypatch.setenv(name, value)


def event(count: int = 2, name: str = EVENT["detail"]["TrainingJobName"], tags=None, created: int | None = None):
    e = copy.deepcopy(EVENT)
    d = e["detail"]
    d["ResourceConfig"]["InstanceCount"] = count
    d["TrainingJobName"], d["TrainingJobArn"] = name, d["TrainingJobArn"].rsplit("/", 1)[0] + "/" + name
    d["Tags"] = EVENT["detail"]["Tags"] if tags is None else tags
    d["CreationTime"] = created or d["CreationTime"]
    return e


T0 = EVENT["detail"]["CreationTime"]


def test_the_template_gives_the_function_the_limits_and_its_code():
    stack = Stack()
    assert stack.prop("JobLimits", "Environment")["Variables"] == {
        "MAX_INSTANCES_PER_JOB": str(account_template.MAX_INSTANCES_PER_JOB),
        "MAX_INSTANCES_PER_ATTENDEE": str(account_template.MAX_INSTANCES_PER_ATTENDEE),
    }
    inline = stack.prop("JobLimits", "Code")["ZipFile"]
    assert inline == (REPO / "infra" / "enforcer.py").read_text(encoding="utf-8")
    rule = stack.prop("JobStarts", "EventPattern")
    assert rule["source"] == [EVENT["source"]] and rule["detail-type"] == [EVENT["detail-type"]]
    assert rule["detail"]["TrainingJobStatus"] == ["InProgress"]


def test_the_limits_are_the_labs_own_needs():
    try:
        from course.facilitator import lab_targets
    except ImportError:  # before the course machinery moved
        from helpers.facilitator import lab_targets
    launched = [t for t in lab_targets.TARGETS if t.launch]
    assert account_template.MAX_INSTANCES_PER_ATTENDEE == max(t.count for t in launched)  # lab 05's three jobs
    two_nodes = next(t for t in launched if t.lab == "02")
    assert account_template.MAX_INSTANCES_PER_JOB == two_nodes.count  # lab 02's one job on two nodes


def test_lab_02_s_two_node_job_runs():
    sm = FakeSageMaker([])
    assert enforcer.handle(event(2), sm) is None and not sm.stopped


def test_a_three_instance_job_is_stopped_and_tagged_with_why():
    sm = FakeSageMaker([])
    why = enforcer.handle(event(3), sm)
    name = EVENT["detail"]["TrainingJobName"]
    assert sm.stopped == [name]
    assert why == "3 instances in one job: the room allows 2 a job"
    assert sm.tagged[event(3)["detail"]["TrainingJobArn"]] == {enforcer.STOPPED_TAG: why}


def test_a_third_concurrent_two_node_job_is_stopped_and_lab_05_s_three_jobs_run():
    # two of A's 2-node jobs already running: a third takes A to 6 instances (and the second already to 4)
    running = [
        ("attendee-01-lab02-a", "attendee-01", 2, T0 - 2000),
        ("attendee-01-lab02-b", "attendee-01", 2, T0 - 1000),
    ]
    sm = FakeSageMaker(running)
    why = enforcer.handle(event(2, name="attendee-01-lab02-c"), sm)
    assert sm.stopped == ["attendee-01-lab02-c"] and "would hold 6 instances at once" in why
    # lab 05: its File, FastFile and FSx jobs, one instance each, at once
    lab05 = [
        ("attendee-01-lab05-file", "attendee-01", 1, T0 - 2000),
        ("attendee-01-lab05-fastfile", "attendee-01", 1, T0 - 1000),
    ]
    sm = FakeSageMaker(lab05)
    assert enforcer.handle(event(1, name="attendee-01-lab05-fsx"), sm) is None and not sm.stopped


def test_the_earlier_job_keeps_running_whichever_event_comes_first():
    # two jobs of A's started together: only the later one (by creation time) is over the limit
    running = [
        ("attendee-01-lab02-a", "attendee-01", 2, T0 - 1000),
        ("attendee-01-lab02-b", "attendee-01", 2, T0 + 1000),
    ]
    first = FakeSageMaker(running)
    assert enforcer.handle(event(2, name="attendee-01-lab02-a", created=T0 - 1000), first) is None
    second = FakeSageMaker(running)
    assert enforcer.handle(event(2, name="attendee-01-lab02-b", created=T0 + 1000), second)
    assert second.stopped == ["attendee-01-lab02-b"]


def test_other_attendees_and_the_facilitator_do_not_count_against_a():
    running = [
        ("attendee-02-lab02-a", "attendee-02", 2, T0 - 1000),
        ("attendee-011-lab02", "attendee-011", 2, T0 - 1000),  # a name that contains A's: another attendee's tag
        ("attendee-01-demo", None, 2, T0 - 1000),  # untagged: not A's
    ]
    sm = FakeSageMaker(running)
    assert enforcer.handle(event(2), sm) is None
    facilitator = FakeSageMaker([])
    assert enforcer.handle(event(2, name="workshop-demo", tags={}), facilitator) is None  # no attendee: per job only
    assert enforcer.handle(event(3, name="workshop-demo", tags={}), facilitator)  # the per-job limit holds for all


def test_a_second_event_of_a_stopped_job_is_quiet_and_other_states_are_ignored():
    sm = FakeSageMaker([])
    enforcer.handle(event(3), sm)
    enforcer.handle(event(3), sm)  # InProgress again (a secondary status change): already stopping
    assert sm.stopped == [EVENT["detail"]["TrainingJobName"]]
    done = event(3)
    done["detail"]["TrainingJobStatus"] = "Completed"
    assert enforcer.handle(done, FakeSageMaker([])) is None


def test_an_event_without_tags_is_judged_by_the_job_s_own_tags():
    running = [
        ("attendee-01-lab02-a", "attendee-01", 2, T0 - 2000),
        ("attendee-01-lab02-b", "attendee-01", 2, T0 - 1000),
    ]
    sm = FakeSageMaker([*running, ("attendee-01-lab02-c", "attendee-01", 2, T0)])
    bare = event(2, name="attendee-01-lab02-c")
    del bare["detail"]["Tags"]
    assert enforcer.handle(bare, sm) and sm.stopped == ["attendee-01-lab02-c"]
