"""The room's limits that IAM cannot express (infra/enforcer.py, the template's JobLimits function), run offline
against tests/event_account/standin.py: SageMaker's training-job API behind a real botocore client, with AWS's
documented limits (50 tags a resource, each ResourceConfig shape, warm pools, throttling). What an attendee who tries
gets: a job above the per-job limit, or one that takes them over their instances at once (warm pools and rule
evaluators counted), or on a type, FSx path or FSx channel count the room refuses, is stopped before it is tagged; a
job that cannot be read or counted is stopped too; a job whose start event is lost is stopped by the next sweep. The
labs' own jobs (lab 02's two nodes, lab 05's three jobs, lab 08's warm pool then the next lab) run."""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import botocore.endpoint
import pytest
from conftest import REPO
from event_account.standin import EVENT, SCHEDULED, SageMakerStandIn
from test_event_account import Stack, account_template

from helpers import guardrails


def _enforcer():
    spec = importlib.util.spec_from_file_location("workshop_enforcer", REPO / "infra" / "enforcer.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


enforcer = _enforcer()
A, B = "attendee-01", "attendee-02"
BIG = "ml.g6.12xlarge"  # lab 02's and lab 08's nodes
SMALL = "ml.g6.xlarge"  # lab 01's, lab 05's


def role(who: str) -> str:
    return f"arn:aws:iam::111122223333:role/workshop-jobs/event/{who}/event-JobRole{who[-2:]}-x"


FACILITATOR_ROLE = "arn:aws:iam::111122223333:role/event-ExecutionRole-x"


def request(name: str, count: int = 1, instance_type: str = SMALL, who: str | None = A, **fields) -> dict:
    """A CreateTrainingJob request like the helpers' (the event sample's fields), ``who``'s unless None."""
    d = EVENT["detail"]
    out = {
        "TrainingJobName": name,
        "RoleArn": role(who) if who else FACILITATOR_ROLE,
        "AlgorithmSpecification": {k: d["AlgorithmSpecification"][k] for k in ("TrainingImage", "TrainingInputMode")},
        "InputDataConfig": [{k: c[k] for k in ("ChannelName", "DataSource")} for c in d["InputDataConfig"]],
        "OutputDataConfig": {"S3OutputPath": d["OutputDataConfig"]["S3OutputPath"]},
        "ResourceConfig": {"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 7200},
        "Tags": [{"Key": "workshop-attendee", "Value": who}, {"Key": "workshop-lab", "Value": "lab02"}] if who else [],
    }
    return out | fields


def fsx_channel(path: str, mode: str = "ro") -> dict:
    source = {"FileSystemId": "fs-0123456789abcdef0", "FileSystemAccessMode": mode, "FileSystemType": "FSxLustre"}
    return {"ChannelName": "train", "DataSource": {"FileSystemDataSource": source | {"DirectoryPath": path}}}


@pytest.fixture(autouse=True)
def _the_template_s_settings(monkeypatch):
    variables = Stack().prop("JobLimits", "Environment")["Variables"]
    for name, value in variables.items():
        value = value["Fn::Sub"].replace("${AWS::StackName}", "event") if isinstance(value, dict) else value
        monkeypatch.setenv(name, value)


@pytest.fixture
def waits(monkeypatch):
    """botocore's retry back-offs, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


def account(waits, **standin) -> tuple[SageMakerStandIn, object]:
    s = SageMakerStandIn(**standin)
    return s, s.client(enforcer.RETRIES)


@pytest.fixture
def room(waits):
    return account(waits)


def statuses(s: SageMakerStandIn) -> dict[str, str]:
    return {n: j["TrainingJobStatus"] for n, j in s.jobs.items()}


def stop_tag(s: SageMakerStandIn, name: str) -> str | None:
    return s.tags[s.jobs[name]["TrainingJobArn"]].get(enforcer.STOPPED_TAG)


# ---- what the template gives the function


def test_the_template_gives_the_function_its_limits_code_sweep_and_alarms():
    stack = Stack()
    variables = stack.prop("JobLimits", "Environment")["Variables"]
    assert variables == {
        "MAX_INSTANCES_PER_JOB": str(account_template.MAX_INSTANCES_PER_JOB),
        "MAX_INSTANCES_PER_ATTENDEE": str(account_template.MAX_INSTANCES_PER_ATTENDEE),
        "INSTANCE_TYPES": ",".join(guardrails.TRAINING_INSTANCE_TYPES),
        "JOB_ROLE_PATH": {"Fn::Sub": account_template.JOB_ROLE_PATH},  # the job roles' path, attendee next
    }
    assert stack.prop("JobLimits", "Code")["ZipFile"] == (REPO / "infra" / "enforcer.py").read_text(encoding="utf-8")
    rule = stack.prop("JobStarts", "EventPattern")
    assert rule["source"] == [EVENT["source"]] and rule["detail-type"] == [EVENT["detail-type"]]
    assert rule["detail"]["TrainingJobStatus"] == ["InProgress"]
    sweep = stack.resources["JobSweep"]["Properties"]
    assert sweep["ScheduleExpression"] == f"rate({account_template.SWEEP_MINUTES} minutes)"
    # a failed call: Lambda's retries, then the queue, whose alarm mails the facilitator; silence alarms too
    queue = ("GetAtt", "JobLimitsDeadLetters", "Arn")
    assert stack.value(stack.prop("JobLimits", "DeadLetterConfig")["TargetArn"]) == queue
    for name in ("JobStarts", "JobSweep"):
        (target,) = stack.prop(name, "Targets")
        assert stack.value(target["Arn"]) == ("GetAtt", "JobLimits", "Arn")
        assert stack.value(target["DeadLetterConfig"]["Arn"]) == queue
    for alarm in ("JobLimitsFailed", "JobLimitsSilent"):
        assert stack.prop(alarm, "AlarmActions") == [("Ref", "Alerts")]
    assert stack.prop("JobLimitsSilent", "TreatMissingData") == "breaching"  # no invocation at all is an alarm
    # reserved concurrency, unless a new account's 10 must all stay unreserved (JobLimitsConcurrency=0)
    assert stack.prop("JobLimits", "ReservedConcurrentExecutions") == "2"
    assert Stack(JobLimitsConcurrency="0").prop("JobLimits", "ReservedConcurrentExecutions") == ("Ref", "AWS::NoValue")
    granted = {
        a
        for s in stack.prop("JobLimitsRole", "Policies")[0]["PolicyDocument"]["Statement"]
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {"sqs:SendMessage", "sagemaker:StopTrainingJob", "sagemaker:UpdateTrainingJob"} <= granted


def test_the_limits_are_the_labs_own_needs():
    from course.facilitator import lab_targets

    launched = [t for t in lab_targets.TARGETS if t.launch]
    assert account_template.MAX_INSTANCES_PER_ATTENDEE == max(t.count for t in launched)  # lab 05's three jobs
    two_nodes = next(t for t in launched if t.lab == "02")
    assert account_template.MAX_INSTANCES_PER_JOB == two_nodes.count  # lab 02's one job on two nodes


def test_the_handler_retries_throttling_before_a_call_fails(monkeypatch):
    made = {}
    fake = types.ModuleType("boto3")
    fake.client = lambda service, config: made.setdefault("config", config) and None
    monkeypatch.setitem(sys.modules, "boto3", fake)
    monkeypatch.setattr(enforcer, "handle", lambda event, sm: "handled")
    assert enforcer.handler(SCHEDULED, None) == "handled"
    assert made["config"].retries == {"mode": "standard", "max_attempts": 8} == enforcer.RETRIES


# ---- the labs' own jobs run


def test_lab_02_s_two_node_job_and_lab_05_s_three_jobs_run(room):
    s, sm = room
    assert enforcer.handle(s.create(request("attendee-01-lab02", 2, BIG)), sm) is None
    s.end("attendee-01-lab02")
    for part in ("file", "fastfile", "fsx"):
        assert enforcer.handle(s.create(request(f"attendee-01-lab05-{part}")), sm) is None
    assert enforcer.handle(SCHEDULED, sm) == []  # the sweep agrees
    assert set(statuses(s).values()) == {"Completed", "InProgress"}


def test_lab_08_s_warm_pool_counts_until_released(room):
    s, sm = room
    lab08 = request("attendee-01-lab08", 2, BIG)
    lab08["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 1800
    assert enforcer.handle(s.create(lab08), sm) is None
    s.end("attendee-01-lab08")  # its two instances stay in the warm pool, billed
    assert enforcer.handle(s.create(request("attendee-01-lab01")), sm) is None  # 2 + 1: within 3
    s.end("attendee-01-lab01")
    why = enforcer.handle(s.create(request("attendee-01-lab02", 2, BIG)), sm)
    assert why == "attendee-01 would hold 4 instances at once: the room allows 3"
    # leftovers.release_warm_pools() (its own UpdateTrainingJob, with 0), and the stopped job gone: the same job runs
    s.end("attendee-01-lab02")
    sm.update_training_job(TrainingJobName="attendee-01-lab08", ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    assert enforcer.handle(s.create(request("attendee-01-lab02-again", 2, BIG)), sm) is None


# ---- an attendee who tries


def test_a_ten_instance_job_with_50_tags_is_stopped_though_no_tag_fits(room, capsys):
    s, sm = room
    tags = [{"Key": "workshop-attendee", "Value": A}] + [{"Key": f"pad-{i}", "Value": "x"} for i in range(49)]
    why = enforcer.handle(s.create(request("attendee-01-big", 10, Tags=tags)), sm)
    assert why == "10 instances in one job: the room allows 2 a job"
    assert statuses(s) == {"attendee-01-big": "Stopping"}  # stopped first
    assert stop_tag(s, "attendee-01-big") is None and len(s.tags[s.jobs["attendee-01-big"]["TrainingJobArn"]]) == 50
    assert "not tagged" in capsys.readouterr().out  # the 51st tag is refused, and said


def test_an_instance_groups_job_and_the_same_attendee_s_later_plain_job_are_each_stopped(room):
    s, sm = room
    groups = request("attendee-01-hetero", ResourceConfig={"InstanceGroups": [], "VolumeSizeInGB": 30})
    groups["ResourceConfig"]["InstanceGroups"] = [
        {"InstanceType": SMALL, "InstanceCount": 10, "InstanceGroupName": name} for name in ("a", "b")
    ]
    lost = s.create(groups)  # its event is lost: the later job's comes first
    assert "InstanceCount" not in s.jobs["attendee-01-hetero"]["ResourceConfig"]  # as SageMaker describes it
    why = enforcer.handle(s.create(request("attendee-01-plain")), sm)
    assert why == "attendee-01 would hold 21 instances at once: the room allows 3"
    assert enforcer.handle(SCHEDULED, sm) == ["attendee-01-hetero"]  # the sweep catches the lost one
    assert stop_tag(s, "attendee-01-hetero") == "20 instances in one job: the room allows 2 a job"
    assert statuses(s) == {"attendee-01-hetero": "Stopping", "attendee-01-plain": "Stopping"}
    assert enforcer.handle(lost, sm) is None  # its event, late: already stopping, quiet


def test_instance_preferences_and_rule_evaluators_are_counted(room):
    s, sm = room
    prefs = request("attendee-01-prefs", ResourceConfig={"VolumeSizeInGB": 30})
    prefs["ResourceConfig"]["InstancePreferences"] = [
        {"InstanceType": SMALL, "InstanceCount": 1},
        {"InstanceType": BIG, "InstanceCount": 3},
    ]
    assert enforcer.handle(s.create(prefs), sm) == "3 instances in one job: the room allows 2 a job"
    odd = request("attendee-01-odd-prefs", ResourceConfig={"VolumeSizeInGB": 30})  # SageMaker tries the first
    odd["ResourceConfig"]["InstancePreferences"] = [
        {"InstanceType": "ml.p4d.24xlarge", "InstanceCount": 1},
        {"InstanceType": SMALL, "InstanceCount": 2},
    ]
    assert enforcer.handle(s.create(odd), sm).startswith("ml.p4d.24xlarge: the room allows")
    rules = [
        {"RuleConfigurationName": f"rule-{i}", "RuleEvaluatorImage": "img", "InstanceType": SMALL} for i in range(2)
    ]
    job = request("attendee-01-debugged", DebugRuleConfigurations=rules[:1], ProfilerRuleConfigurations=rules[1:])
    assert enforcer.handle(s.create(job), sm) == "3 instances in one job: the room allows 2 a job"
    cheap = request("attendee-01-rule-on-t3", ProfilerRuleConfigurations=[rules[0] | {"InstanceType": "ml.t3.medium"}])
    assert enforcer.handle(s.create(cheap), sm) == "ml.t3.medium: the room allows ml.g6.xlarge ml.g6.12xlarge"


def test_a_job_that_cannot_be_counted_is_stopped(room):
    s, sm = room
    shapeless = request("attendee-01-shapeless", ResourceConfig={"VolumeSizeInGB": 30})  # no type, no count
    why = enforcer.handle(s.create(shapeless), sm)
    assert (
        why.startswith("not counted (KeyError") and s.jobs["attendee-01-shapeless"]["TrainingJobStatus"] == "Stopping"
    )
    assert stop_tag(s, "attendee-01-shapeless").startswith("not counted  KeyError")  # in a tag value's characters


def test_an_earlier_job_that_cannot_be_described_stops_the_new_one(waits):
    s, sm = account(waits, unreadable={"attendee-01-first"})
    s.create(request("attendee-01-first"))
    why = enforcer.handle(s.create(request("attendee-01-second")), sm)
    assert why.startswith("not counted (ClientError") and "ThrottlingException" in why
    assert s.jobs["attendee-01-second"]["TrainingJobStatus"] == "Stopping"
    assert len(waits) >= enforcer.RETRIES["max_attempts"] - 1  # botocore backed off and retried before giving up


def test_throttling_is_retried_and_changes_no_verdict(waits):
    def run(**standin):
        s, sm = account(waits, **standin)
        out = [enforcer.handle(s.create(request(f"attendee-01-job{i}", 2, BIG)), sm) for i in range(3)]
        return out + [enforcer.handle(SCHEDULED, sm)], s

    calm, _ = run()
    busy, s = run(throttle={"DescribeTrainingJob": 0.3, "ListTrainingJobs": 0.3, "StopTrainingJob": 0.3}, seed=1)
    # the second job is stopped; the third too, while the second is stopping (its instances are still held)
    held = [f"attendee-01 would hold {n} instances at once: the room allows 3" for n in (4, 6)]
    assert busy == calm == [None, *held, []]
    assert s.throttled >= 3 and len(waits) == s.throttled  # each throttled call was retried after a back-off


def test_a_lost_event_is_caught_by_the_next_sweep(room):
    s, sm = room
    s.create(request("attendee-02-three", 3, who=B))  # EventBridge never delivers its start
    s.create(request("attendee-01-lab01"))
    assert enforcer.handle(SCHEDULED, sm) == ["attendee-02-three"]
    assert statuses(s) == {"attendee-02-three": "Stopping", "attendee-01-lab01": "InProgress"}
    assert enforcer.handle(SCHEDULED, sm) == []  # stopping: not stopped again


def test_a_warm_pool_over_the_limit_is_released_by_the_sweep(room):
    s, sm = room
    assert enforcer.handle(s.create(request("attendee-01-a", 2, BIG)), sm) is None
    pooled = request("attendee-01-b", 2, BIG)
    pooled["ResourceConfig"]["KeepAlivePeriodInSeconds"] = 1800
    assert enforcer.handle(s.create(pooled), sm)  # over the limit: stopped...
    s.end("attendee-01-b")  # ...and, stopped, it keeps its instances in a warm pool
    assert s.holding() == {"attendee-01-a": "InProgress", "attendee-01-b": "warm pool"}
    assert enforcer.handle(SCHEDULED, sm) == ["attendee-01-b"]
    assert s.holding() == {"attendee-01-a": "InProgress"} and s.jobs["attendee-01-b"]["WarmPoolStatus"] == {
        "Status": "Terminated"
    }


@pytest.mark.parametrize(
    "channels, why",
    [
        ([fsx_channel("/abcdef12/attendee-01/inputs")], None),
        ([fsx_channel("/abcdef12/attendee-01/../attendee-02/inputs")], "FSx channel"),
        ([fsx_channel("/abcdef12/attendee-02/inputs")], "FSx channel"),
        ([fsx_channel("/abcdef12/attendee-01/inputs", "rw")], "FSx channel"),
        ([fsx_channel("/abcdef12/attendee-01/a"), fsx_channel("/abcdef12/attendee-02/b")], "2 FSx channels"),
    ],
)
def test_an_fsx_channel_mounts_only_the_attendee_s_own_directory_once(room, channels, why):
    s, sm = room
    channels = [c | {"ChannelName": f"c{i}"} for i, c in enumerate(channels)]
    got = enforcer.handle(s.create(request("attendee-01-lab05-fsx", InputDataConfig=channels)), sm)
    assert (got is None) if why is None else got.startswith(why)


def test_a_type_outside_the_guardrails_is_stopped(room):
    s, sm = room
    why = enforcer.handle(s.create(request("attendee-01-p4d", instance_type="ml.p4d.24xlarge")), sm)
    assert why == "ml.p4d.24xlarge: the room allows ml.g6.xlarge ml.g6.12xlarge"


def test_the_earlier_job_keeps_running_whichever_event_comes_first(room):
    s, sm = room
    first = s.create(request("attendee-01-a", 2, BIG))
    second = s.create(request("attendee-01-b", 2, BIG))
    assert enforcer.handle(second, sm) == "attendee-01 would hold 4 instances at once: the room allows 3"
    assert enforcer.handle(first, sm) is None
    assert statuses(s) == {"attendee-01-a": "InProgress", "attendee-01-b": "Stopping"}


def test_other_attendees_and_the_facilitator_do_not_count_against_a(room):
    s, sm = room
    s.create(request("attendee-02-lab02", 2, BIG, who=B))
    s.create(request("attendee-011-lab02", 2, BIG, who="attendee-11"))  # a name that contains A's prefix
    s.create(request("attendee-01-demo", 2, BIG, who=None))  # named like A's, run as the facilitator's role
    assert enforcer.handle(s.create(request("attendee-01-lab02", 2, BIG)), sm) is None
    # the facilitator's jobs: the per-job limit only, on any type
    assert enforcer.handle(s.create(request("workshop-demo", 2, "ml.p4d.24xlarge", who=None)), sm) is None
    assert enforcer.handle(s.create(request("workshop-big", 3, who=None)), sm)
    assert enforcer.handle(SCHEDULED, sm) == []


def test_a_second_event_of_a_stopped_job_is_quiet_and_other_states_are_ignored(room):
    s, sm = room
    event = s.create(request("attendee-01-three", 3))
    assert enforcer.handle(event, sm)
    assert enforcer.handle(event, sm) is None  # InProgress again (a secondary status change), but it is stopping
    assert [c for c, _ in s.calls].count("StopTrainingJob") == 1
    s.end("attendee-01-three")
    assert statuses(s) == {"attendee-01-three": "Stopped"} and enforcer.handle(event, sm) is None


def test_the_event_sample_is_what_the_stand_in_sends():
    s = SageMakerStandIn()
    sent = s.create(request(EVENT["detail"]["TrainingJobName"], 2, BIG))
    assert set(sent) == set(EVENT) and set(EVENT["detail"]) - set(sent["detail"]) <= {
        "HyperParameters",
        "SecondaryStatusTransitions",
    }
    assert json.loads(json.dumps(sent))["detail"]["Tags"] == {"workshop-attendee": A, "workshop-lab": "lab02"}


def test_what_the_guide_says_the_enforcer_refuses_is_tested_here():
    named = [
        t
        for limit in account_template.attendee_limits()
        if limit.refused_by == "the enforcer"
        for t in limit.tests
        if t.startswith("test_")
    ]
    assert named and all(callable(globals().get(t)) for t in named), named
