"""Thirty attendees in one account: the event template's attendee policy, evaluated offline against concrete requests
(tests/iam_policy.py, the IAM features the template uses, each named by the case that needs it). Attendee A may touch
only A's prefix and A's jobs, may create jobs only tagged as A, on the guardrails' types and runtime, and may pass
only the jobs' role; the preflight refuses what the guardrails would, first, naming the limit."""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from cfnlint.decode import cfn_yaml
from conftest import REPO
from iam_policy import Request, decide

from helpers import guardrails
from helpers.aws import launch
from helpers.aws.settings import sanitize_attendee
from helpers.checks import findings, target_rules
from helpers.facilitator import lab_targets
from helpers.job import Job
from helpers.planning import instances
from helpers.targets import Target

TEMPLATE = REPO / "infra" / "workshop-account.yaml"
ACCOUNT, REGION = "111122223333", "us-east-1"
BUCKET = "event-workshopbucket-abc123"
JOB_ROLE = f"arn:aws:iam::{ACCOUNT}:role/event-ExecutionRole-x"
ATTENDEE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/event-AttendeeRole-x"
VALUES = {
    "AWS::Partition": "aws",
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "WorkshopBucket.Arn": f"arn:aws:s3:::{BUCKET}",
    "ExecutionRole.Arn": JOB_ROLE,
    "Vpc": "vpc-0abc",
    "FileSystem": "fs-0abc",
}


def resolve(node):
    """The template's values in a policy, as CloudFormation's Fn::Sub writes them (``${!x}`` stays ``${x}``)."""
    if isinstance(node, dict) and set(node) == {"Fn::Sub"}:
        return re.sub(r"\$\{(!?)([^}]+)\}", lambda m: "${" + m[2] + "}" if m[1] else VALUES[m[2]], node["Fn::Sub"])
    if isinstance(node, dict):
        return {k: resolve(v) for k, v in node.items()}
    if isinstance(node, list):
        return [resolve(v) for v in node]
    return node


def attendee_statements(template: dict) -> list[dict]:
    r = template["Resources"]
    own = [s for p in r["AttendeeRole"]["Properties"]["Policies"] for s in p["PolicyDocument"]["Statement"]]
    return resolve(own + r["StudioAttendeePolicy"]["Properties"]["PolicyDocument"]["Statement"])


TEMPLATE_DOC = cfn_yaml.loads(TEMPLATE.read_text(encoding="utf-8"))
A, B = "attendee-01", "attendee-02"
SM = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}"
LOGS = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
OK_JOB = {
    "aws:RequestTag/workshop-attendee": A,
    "sagemaker:InstanceTypes": ["ml.g6.xlarge"],
    "sagemaker:MaxRuntimeInSeconds": "7200",
}


def me(**context) -> dict:
    return {"aws:SourceIdentity": A} | context


# (what the request is, the IAM feature it turns on, the request, the answer)
CASES = [
    (
        "A reads A's object",
        "Resource policy variable",
        Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{A}/code.tar.gz", me()),
        "allowed",
    ),
    (
        "A reads B's object",
        "Resource policy variable",
        Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{B}/code.tar.gz", me()),
        "implicitly denied",
    ),
    (
        "A overwrites B's source tarball",
        "Resource policy variable",
        Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{B}/src/sourcedir.tar.gz", me()),
        "implicitly denied",
    ),
    (
        "A deletes B's output",
        "Resource policy variable",
        Request("s3:DeleteObject", f"arn:aws:s3:::{BUCKET}/{B}/out/model.tar.gz", me()),
        "implicitly denied",
    ),
    (
        "A lists A's prefix",
        "StringLike s3:prefix",
        Request("s3:ListBucket", f"arn:aws:s3:::{BUCKET}", me(**{"s3:prefix": f"{A}/"})),
        "allowed",
    ),
    (
        "A lists B's prefix",
        "StringLike s3:prefix",
        Request("s3:ListBucket", f"arn:aws:s3:::{BUCKET}", me(**{"s3:prefix": f"{B}/"})),
        "implicitly denied",
    ),
    (
        "A lists the whole bucket",
        "StringLike s3:prefix",
        Request("s3:ListBucket", f"arn:aws:s3:::{BUCKET}", me()),
        "implicitly denied",
    ),
    (
        "a session without a source identity reads A's object",
        "missing policy variable",
        Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{A}/x", {}),
        "implicitly denied",
    ),
    (
        "A creates a job tagged A on ml.g6.xlarge for 2 h",
        "StringEquals aws:RequestTag",
        Request("sagemaker:CreateTrainingJob", f"{SM}:training-job/{A}-lab01-x", me(**OK_JOB)),
        "allowed",
    ),
    (
        "A creates an untagged job",
        "StringEquals aws:RequestTag",
        Request(
            "sagemaker:CreateTrainingJob",
            f"{SM}:training-job/{A}-lab01-x",
            me(**{k: v for k, v in OK_JOB.items() if "RequestTag" not in k}),
        ),
        "implicitly denied",
    ),
    (
        "A creates a job tagged B",
        "StringEquals aws:RequestTag",
        Request(
            "sagemaker:CreateTrainingJob",
            f"{SM}:training-job/{A}-lab01-x",
            me(**OK_JOB | {"aws:RequestTag/workshop-attendee": B}),
        ),
        "implicitly denied",
    ),
    (
        "A creates a job named as B's",
        "Resource policy variable",
        Request("sagemaker:CreateTrainingJob", f"{SM}:training-job/{B}-lab01-x", me(**OK_JOB)),
        "implicitly denied",
    ),
    (
        "A creates a job on ml.p4d.24xlarge",
        "ForAllValues:StringEquals sagemaker:InstanceTypes",
        Request(
            "sagemaker:CreateTrainingJob",
            f"{SM}:training-job/{A}-lab03-x",
            me(**OK_JOB | {"sagemaker:InstanceTypes": ["ml.p4d.24xlarge"]}),
        ),
        "implicitly denied",
    ),
    (
        "A creates a job with no instance type key",
        "Null sagemaker:InstanceTypes",
        Request(
            "sagemaker:CreateTrainingJob",
            f"{SM}:training-job/{A}-lab01-x",
            me(**{k: v for k, v in OK_JOB.items() if k != "sagemaker:InstanceTypes"}),
        ),
        "implicitly denied",
    ),
    (
        "A creates a job for 3 h",
        "NumericLessThanEquals sagemaker:MaxRuntimeInSeconds",
        Request(
            "sagemaker:CreateTrainingJob",
            f"{SM}:training-job/{A}-lab01-x",
            me(**OK_JOB | {"sagemaker:MaxRuntimeInSeconds": "10800"}),
        ),
        "implicitly denied",
    ),
    (
        "A tags A's job as it is created",
        "Null sagemaker:TaggingAction",
        Request(
            "sagemaker:AddTags",
            f"{SM}:training-job/{A}-lab01-x",
            me(**{"sagemaker:TaggingAction": "CreateTrainingJob"}),
        ),
        "allowed",
    ),
    (
        "A tags a job after its creation",
        "Null sagemaker:TaggingAction",
        Request("sagemaker:AddTags", f"{SM}:training-job/{A}-lab01-x", me()),
        "implicitly denied",
    ),
    (
        "A stops A's job",
        "StringEquals aws:ResourceTag",
        Request(
            "sagemaker:StopTrainingJob",
            f"{SM}:training-job/{A}-lab01-x",
            me(**{"aws:ResourceTag/workshop-attendee": A}),
        ),
        "allowed",
    ),
    (
        "A stops B's job",
        "StringEquals aws:ResourceTag",
        Request(
            "sagemaker:StopTrainingJob",
            f"{SM}:training-job/{B}-lab01-x",
            me(**{"aws:ResourceTag/workshop-attendee": B}),
        ),
        "implicitly denied",
    ),
    (
        "A describes B's job",
        "StringEquals aws:ResourceTag",
        Request(
            "sagemaker:DescribeTrainingJob",
            f"{SM}:training-job/{B}-lab01-x",
            me(**{"aws:ResourceTag/workshop-attendee": B}),
        ),
        "implicitly denied",
    ),
    (
        "A reads A's job log",
        "Resource policy variable",
        Request("logs:GetLogEvents", f"{LOGS}:log-stream:{A}-lab01-x/algo-1-1", me()),
        "allowed",
    ),
    (
        "A reads B's job log",
        "Resource policy variable",
        Request("logs:GetLogEvents", f"{LOGS}:log-stream:{B}-lab01-x/algo-1-1", me()),
        "implicitly denied",
    ),
    (
        "A passes the jobs' role to SageMaker",
        "StringEquals iam:PassedToService",
        Request("iam:PassRole", JOB_ROLE, me(**{"iam:PassedToService": "sagemaker.amazonaws.com"})),
        "allowed",
    ),
    (
        "A passes the jobs' role to EC2",
        "StringEquals iam:PassedToService",
        Request("iam:PassRole", JOB_ROLE, me(**{"iam:PassedToService": "ec2.amazonaws.com"})),
        "implicitly denied",
    ),
    (
        "A passes the attendee role to a job",
        "Resource ARN",
        Request("iam:PassRole", ATTENDEE_ROLE, me(**{"iam:PassedToService": "sagemaker.amazonaws.com"})),
        "implicitly denied",
    ),
    (
        "A starts A's space on ml.m5.xlarge",
        "ArnLike sagemaker:OwnerUserProfileArn",
        Request(
            "sagemaker:CreateApp",
            f"{SM}:app/d-1/{A}-space/jupyterlab/default",
            me(
                **{
                    "sagemaker:DomainId": "d-1",
                    "sagemaker:UserProfileName": A,
                    "sagemaker:OwnerUserProfileArn": f"{SM}:user-profile/d-1/{A}",
                    "sagemaker:SpaceSharingType": "Private",
                    "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
                }
            ),
        ),
        "allowed",
    ),
    (
        "A starts A's space on ml.g5.48xlarge",
        "ForAllValues:StringEquals sagemaker:InstanceTypes",
        Request(
            "sagemaker:CreateApp",
            f"{SM}:app/d-1/{A}-space/jupyterlab/default",
            me(
                **{
                    "sagemaker:DomainId": "d-1",
                    "sagemaker:UserProfileName": A,
                    "sagemaker:OwnerUserProfileArn": f"{SM}:user-profile/d-1/{A}",
                    "sagemaker:SpaceSharingType": "Private",
                    "sagemaker:InstanceTypes": ["ml.g5.48xlarge"],
                }
            ),
        ),
        "implicitly denied",
    ),
    (
        "A starts B's space",
        "ArnLike sagemaker:OwnerUserProfileArn",
        Request(
            "sagemaker:CreateApp",
            f"{SM}:app/d-1/{B}-space/jupyterlab/default",
            me(
                **{
                    "sagemaker:DomainId": "d-1",
                    "sagemaker:UserProfileName": A,
                    "sagemaker:OwnerUserProfileArn": f"{SM}:user-profile/d-1/{B}",
                    "sagemaker:SpaceSharingType": "Private",
                    "sagemaker:InstanceTypes": ["ml.m5.xlarge"],
                }
            ),
        ),
        "implicitly denied",
    ),
]


@pytest.mark.parametrize("what, feature, request_, expected", CASES, ids=[f"{c[0]} [{c[1]}]" for c in CASES])
def test_the_attendee_policy_answers_each_request(what, feature, request_, expected):
    assert decide(attendee_statements(TEMPLATE_DOC), request_) == expected, what


def test_these_cases_fail_on_the_shared_role_the_template_had():
    # the template before attendees had identities: one role, every prefix and job open to everyone
    shared = [
        {
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:PutObject", "s3:DeleteObject"],
            "Resource": f"arn:aws:s3:::{BUCKET}/*",
        },
        {
            "Effect": "Allow",
            "Action": ["sagemaker:CreateTrainingJob", "sagemaker:StopTrainingJob"],
            "Resource": f"{SM}:training-job/*",
        },
    ]
    leaks = [c[0] for c in CASES if c[3] != "allowed" and decide(shared, c[2]) == "allowed"]
    assert {"A reads B's object", "A stops B's job", "A creates an untagged job"} <= set(leaks)


def test_the_evaluator_refuses_what_it_does_not_know():
    with pytest.raises(NotImplementedError):
        decide(
            [
                {
                    "Effect": "Allow",
                    "Action": "*",
                    "Resource": "*",
                    "Condition": {"DateLessThan": {"aws:CurrentTime": "x"}},
                }
            ],
            Request("s3:GetObject", "arn:aws:s3:::b/k"),
        )
    deny = [
        {"Effect": "Allow", "Action": "s3:*", "Resource": "*"},
        {"Effect": "Deny", "Action": "s3:Get*", "Resource": "*"},
    ]
    assert decide(deny, Request("s3:GetObject", "arn:aws:s3:::b/k")) == "denied"


def test_the_identity_is_the_helpers_attendee_prefix():
    # Studio's source identity is the user profile's name: it must be the prefix, tag and job-name start the helpers use
    profiles = [
        r["Properties"]["UserProfileName"]
        for r in TEMPLATE_DOC["Resources"].values()
        if r["Type"] == "AWS::SageMaker::UserProfile"
    ]
    assert profiles and all(sanitize_attendee(p) == p for p in profiles)
    domain = TEMPLATE_DOC["Resources"]["StudioDomain"]["Properties"]
    assert domain["DomainSettings"]["ExecutionRoleIdentityConfig"] == "USER_PROFILE_NAME"
    assert domain["DefaultUserSettings"]["ExecutionRole"] == {"Fn::GetAtt": ["AttendeeRole", "Arn"]}
    trust = TEMPLATE_DOC["Resources"]["AttendeeRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert all("sts:SetSourceIdentity" in s["Action"] for s in trust)
    laptop = next(s for s in trust if "AWS" in s["Principal"])
    assert laptop["Condition"]["StringLike"]["sts:SourceIdentity"] == "attendee-*"  # only the profiles' names


def test_jobs_run_as_their_own_role_that_creates_nothing():
    job_role = resolve(
        TEMPLATE_DOC["Resources"]["ExecutionRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    )
    flat = [s for s in job_role if "Fn::If" not in s] + [s["Fn::If"][1] for s in job_role if "Fn::If" in s]
    actions = {a for s in flat for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])}
    assert not {a for a in actions if a.startswith(("sagemaker:", "iam:", "sts:"))}, actions
    request = Request("sagemaker:CreateTrainingJob", f"{SM}:training-job/x", {})
    assert decide(flat, request) == "implicitly denied"


# ---- the guardrails' one home, and the preflight that applies it


def test_the_guardrails_are_the_event_s_real_targets():
    launched = {t.instance_type for t in lab_targets.TARGETS if t.launch}
    assert set(guardrails.TRAINING_INSTANCE_TYPES) == launched
    assert all(t.minutes * 60 <= guardrails.EVENT_MAX_RUNTIME_S for t in lab_targets.TARGETS)
    assert guardrails.EVENT_MAX_RUNTIME_S == Job("x", {}, {}).max_runtime_s


@pytest.mark.parametrize(
    "instance_type, runtime, says",
    [
        ("ml.p4d.24xlarge", 3600, "sagemaker:InstanceTypes"),
        ("ml.g6.xlarge", 3 * 3600, "sagemaker:MaxRuntimeInSeconds"),
        ("ml.g6.xlarge", 3600, None),
    ],
)
def test_the_preflight_refuses_a_job_outside_the_guardrails_naming_the_limit(monkeypatch, instance_type, runtime, says):
    job = replace(Job("lab-x", {}, {}), max_runtime_s=runtime)
    where = findings.Where(Target.on(instances.lookup(instance_type)), instances.lookup(instance_type), 1, "script")
    monkeypatch.delenv(guardrails.GUARDRAILS_ENV, raising=False)
    assert not list(target_rules.event_guardrails(job, where))  # not an event account: no guardrails to apply
    monkeypatch.setenv(guardrails.GUARDRAILS_ENV, guardrails.stack_value())
    found = list(target_rules.event_guardrails(job, where))
    if says is None:
        assert not found
        return
    # a dry run stays every lab's to show (labs 03 and 04 build p4d requests): a note; the launch is refused
    assert found[0].error is None and "a launch would be refused" in found[0].message and says in found[0].message
    with pytest.raises(findings.GuardrailError, match=f"not launched: .*{says}"):
        launch.launch(job, Target.on(instances.lookup(instance_type)))


def test_a_lab_s_dry_run_on_a_type_outside_the_guardrails_still_shows_its_request(monkeypatch, small_catalog):
    """Lab 03's SMDDP job on ml.p4d.24xlarge, a dry run in an event account: built, with the note."""
    from helpers import jobs

    monkeypatch.setenv(guardrails.GUARDRAILS_ENV, guardrails.stack_value())
    job = Job("lab03-smddp", {"epochs": 1}, {"train": str(small_catalog / "train")}, instance_count=2)
    dry = jobs.on_sagemaker(job, "ml.p4d.24xlarge", echo=False)
    assert dry.request["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert any("a launch would be refused" in n for n in dry.plan.notes)


# Workshop Studio: a participant's console role, in an account of their own (static/iam_policy.json)
PARTICIPANT = json.loads((REPO / "static" / "iam_policy.json").read_text(encoding="utf-8"))["Statement"]
PARTICIPANT_CASES = [
    (
        "opens Studio as the domain's profile",
        Request("sagemaker:CreatePresignedDomainUrl", f"{SM}:user-profile/d-1/{A}"),
        "allowed",
    ),
    ("lists the domains and profiles", Request("sagemaker:ListUserProfiles", "*"), "allowed"),
    ("follows a job", Request("sagemaker:DescribeTrainingJob", f"{SM}:training-job/{A}-lab01-x"), "allowed"),
    ("reads a job's log", Request("logs:GetLogEvents", f"{LOGS}:log-stream:{A}-lab01-x/algo-1"), "allowed"),
    (
        "creates a job itself, round the guardrails",
        Request("sagemaker:CreateTrainingJob", f"{SM}:training-job/x", OK_JOB),
        "implicitly denied",
    ),
    (
        "passes the jobs' role",
        Request("iam:PassRole", JOB_ROLE, {"iam:PassedToService": "sagemaker.amazonaws.com"}),
        "implicitly denied",
    ),
    ("stops a job", Request("sagemaker:StopTrainingJob", f"{SM}:training-job/{A}-lab01-x"), "implicitly denied"),
    ("writes the bucket", Request("s3:PutObject", f"arn:aws:s3:::{BUCKET}/{A}/code.tar.gz"), "implicitly denied"),
]


@pytest.mark.parametrize("what, request_, expected", PARTICIPANT_CASES, ids=[c[0] for c in PARTICIPANT_CASES])
def test_the_workshop_studio_participant_opens_studio_and_follows_jobs_only(what, request_, expected):
    assert decide(PARTICIPANT, request_) == expected, what


def test_a_console_participant_without_a_source_identity_gets_nothing_from_the_attendee_policy():
    """Why the participant role does not hold the attendee policy: the console sets no source identity, so every
    per-attendee statement fails to apply; in Studio the same person is attendee-01 and gets their jobs."""
    statements = attendee_statements(TEMPLATE_DOC)
    create = Request("sagemaker:CreateTrainingJob", f"{SM}:training-job/{A}-lab01-x", OK_JOB)
    read = Request("s3:GetObject", f"arn:aws:s3:::{BUCKET}/{A}/code.tar.gz")
    assert decide(statements, create) == decide(statements, read) == "implicitly denied"
    assert decide(statements, replace(create, context=me(**OK_JOB))) == "allowed"
    assert decide(statements, replace(read, context=me())) == "allowed"
