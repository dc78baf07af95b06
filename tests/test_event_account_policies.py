"""Thirty attendees in one account, checked by AWS's IAM logic (tests/iam_engine.py: @cloud-copilot/iam-simulate):
the template's identity policies, its bucket policy and its roles' trust policies, asked the questions an attendee who
tries would ask, from the attendee's own session and from their job's role. Each attack has a legitimate twin that
must stay allowed. The training-job requests are the helpers' own dry runs (a real CreateTrainingJob request, turned
into what IAM sees: its resource and condition keys), changed only where the attack changes them; Studio's requests
have no dry run in the labs and are written here. The engine also reports any context key a request carries that
does not apply to its action, so a condition on a key AWS never sends cannot pass unnoticed."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from functools import cache

import iam_engine
import pytest
from cfnlint.decode import cfn_yaml
from conftest import REPO
from iam_engine import Question, Request

from course.facilitator import lab_targets
from helpers import guardrails
from helpers.aws import launch, mode_comparison
from helpers.aws.settings import sanitize_attendee
from helpers.checks import findings, target_rules
from helpers.job_spec import Job
from helpers.planning import instances
from helpers.targets import Target
from helpers.targets import resolve as resolve_target

TEMPLATE = REPO / "infra" / "workshop-account.yaml"
TEMPLATE_DOC = cfn_yaml.loads(TEMPLATE.read_text(encoding="utf-8"))
ACCOUNT, REGION, STACK = iam_engine.ACCOUNT, "us-east-1", "event"
BUCKET = "event-workshopbucket-abc123"
A, B = "attendee-01", "attendee-02"
SM = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}"
LOGS = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:/aws/sagemaker/TrainingJobs"
ATTENDEE_ROLE = f"arn:aws:iam::{ACCOUNT}:role/event-AttendeeRole-x"
FACILITATOR_JOB_ROLE = f"arn:aws:iam::{ACCOUNT}:role/event-ExecutionRole-x"
MOUNT = "abcdef12"
OPTIONS = {"WithFsx": "true", "WithStudio": "true", "BudgetEmail": "f@example.com", "Attendees": "30"}
CONDITIONS = {"CreateFsx": True, "CreateStudio": True, "CreateBudget": True, "CreateVpc": True}
NO_VALUE = object()

needs_engine = pytest.mark.skipif(iam_engine.missing() is not None, reason=str(iam_engine.missing()))


def job_role(who: str) -> str:
    n = int(who.rsplit("-", 1)[1])
    return f"arn:aws:iam::{ACCOUNT}:role/workshop-jobs/{STACK}/{who}/{STACK}-JobRole{n:02d}-x"


VALUES = {
    "AWS::Partition": "aws",
    "AWS::Region": REGION,
    "AWS::AccountId": ACCOUNT,
    "AWS::StackName": STACK,
    "WorkshopBucket.Arn": f"arn:aws:s3:::{BUCKET}",
    "ExecutionRole.Arn": FACILITATOR_JOB_ROLE,
    "AttendeeRole.Arn": ATTENDEE_ROLE,
    "Vpc": "vpc-0abc",
    "FileSystem": "fs-0123456789abcdef0",
    "JobsSecurityGroup": "sg-0a1b2c3d",
    "JobLimitsDeadLetters.Arn": f"arn:aws:sqs:{REGION}:{ACCOUNT}:event-JobLimitsDeadLetters-x",
    "StudioInstanceType": "ml.m5.xlarge",
    "FileSystem.LustreMountName": MOUNT,
    "BudgetSpentDeny": f"arn:aws:iam::{ACCOUNT}:policy/event-BudgetSpentDeny-x",
}


def resolve(node):
    """The template's values in a policy, as CloudFormation writes them for OPTIONS (``${!x}`` stays ``${x}``)."""
    if isinstance(node, dict) and len(node) == 1:
        ((fn, arg),) = node.items()
        if fn == "Fn::Sub":
            return re.sub(r"\$\{(!?)([^}]+)\}", lambda m: "${" + m[2] + "}" if m[1] else VALUES[m[2]], arg)
        if fn == "Fn::If":
            return resolve(arg[1] if CONDITIONS[arg[0]] else arg[2])
        if fn == "Ref":
            return NO_VALUE if arg == "AWS::NoValue" else VALUES[arg]
        if fn == "Fn::GetAtt":
            return VALUES[arg if isinstance(arg, str) else ".".join(arg)]
    if isinstance(node, dict):
        return {k: v for k, v in ((k, resolve(v)) for k, v in node.items()) if v is not NO_VALUE}
    if isinstance(node, list):
        return [v for v in map(resolve, node) if v is not NO_VALUE]
    return node


R = TEMPLATE_DOC["Resources"]
ATTENDEE_POLICIES = (
    resolve(R["AttendeeRole"]["Properties"]["Policies"][0]["PolicyDocument"]),
    resolve(R["StudioAttendeePolicy"]["Properties"]["PolicyDocument"]),
)
JOB_POLICIES = (resolve(R["AttendeeJobPolicy"]["Properties"]["PolicyDocument"]),)
FACILITATOR_JOB_POLICIES = (resolve(R["ExecutionRole"]["Properties"]["Policies"][0]["PolicyDocument"]),)
BUCKET_POLICY = resolve(R["WorkshopBucketPolicy"]["Properties"]["PolicyDocument"])
BUDGET_DENY = resolve(R["BudgetSpentDeny"]["Properties"]["PolicyDocument"])  # what the budget action attaches


# ---- who asks


def session(who: str | None) -> tuple[str, dict]:
    """An attendee's session (Studio or laptop) of the attendee role; ``None``: one without a source identity."""
    context = {"aws:PrincipalArn": ATTENDEE_ROLE, "aws:SecureTransport": "true"}
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/event-AttendeeRole-x/{who or 'console'}", context | (
        {"aws:SourceIdentity": who} if who else {}
    )


def job(who: str) -> tuple[str, dict]:
    """A job of ``who``'s, as SageMaker runs it: a session of their job role, which carries the role's tag."""
    name = job_role(who).rsplit("/", 1)[1]
    context = {"aws:PrincipalArn": job_role(who), "aws:PrincipalTag/workshop-attendee": who}
    return f"arn:aws:sts::{ACCOUNT}:assumed-role/{name}/SageMaker", context | {"aws:SecureTransport": "true"}


def ask(asker: tuple[str, dict], action: str, resource: str, policies, resource_policy=None, **context) -> Question:
    principal, base = asker
    return Question(Request(principal, action, resource, base | context), tuple(policies), resource_policy)


def as_attendee(who: str | None, action: str, resource: str, **context) -> Question:
    s3 = action.startswith("s3:")
    return ask(session(who), action, resource, ATTENDEE_POLICIES, BUCKET_POLICY if s3 else None, **context)


def as_job(who: str, action: str, resource: str, policies=JOB_POLICIES, **context) -> Question:
    s3 = action.startswith("s3:")
    return ask(job(who), action, resource, policies, BUCKET_POLICY if s3 else None, **context)


# ---- the requests the labs' dry runs make


DATA = REPO / "data" / "catalog"  # the committed catalogue: the dry runs stage it under the attendee's prefix
FSX = {
    "file_system_id": "fs-0123456789abcdef0",
    "mount_name": MOUNT,
    "subnets": ["subnet-0a1b2c3d"],
    "security_group_ids": ["sg-0a1b2c3d"],
}


@cache
def dry_requests() -> dict[str, dict]:
    """Real CreateTrainingJob requests from the helpers' dry runs (nothing is sent): lab 01's job, lab 08's job
    with its warm pool, lab 06's with checkpoints, and lab 05's FSx job. The offline sandbox's placeholder bucket and
    role are the event's (the helpers take the attendee's own role from the space's settings)."""
    from helpers import jobs

    with pytest.MonkeyPatch.context() as env:
        env.setenv("WORKSHOP_ATTENDEE", A)
        built = _dry_runs(jobs)
    out = {}
    for name, request in built.items():
        placeholder = request["OutputDataConfig"]["S3OutputPath"].removeprefix("s3://").split("/")[0]
        text = json.dumps(request).replace(f"s3://{placeholder}/", f"s3://{BUCKET}/")
        out[name] = json.loads(text) | {"RoleArn": job_role(A)}
    return out


def _dry_runs(jobs) -> dict[str, dict]:
    base = Job("lab01", {"epochs": 1}, {"train": str(DATA)})
    built = {
        "lab01": jobs.on_sagemaker(base, resolve_target("ml.g6.xlarge"), echo=False).request,
        "lab08": jobs.on_sagemaker(
            replace(base, name="lab08", warm_pool_s=1800), resolve_target("ml.g6.xlarge"), echo=False
        ).request,
        "lab06": jobs.on_sagemaker(
            replace(base, name="lab06", checkpoints=True), resolve_target("ml.g6.xlarge"), echo=False
        ).request,
    }
    fsx_job = mode_comparison.sagemaker_jobs_per_mode(Job("lab05", {"epochs": 1}), {"train": str(DATA)}, FSX)["FSx"]
    built["lab05-fsx"] = jobs.on_sagemaker(fsx_job, resolve_target("ml.g6.xlarge"), echo=False).request
    return built


def as_b(request: dict, *fields: str) -> dict:
    """``request`` with B's prefix in ``fields`` (top-level names): what A would write to reach B's data."""
    return {k: json.loads(json.dumps(v).replace(f"/{A}/", f"/{B}/")) if k in fields else v for k, v in request.items()}


def create_job(request: dict) -> tuple[str, dict]:
    """What IAM sees of a CreateTrainingJob request: the job's ARN and the condition keys SageMaker sets from it."""
    rc, tags = request["ResourceConfig"], {t["Key"]: t["Value"] for t in request.get("Tags", [])}
    context = {f"aws:RequestTag/{k}": v for k, v in tags.items()} | {"aws:TagKeys": list(tags)}
    context["sagemaker:InstanceTypes"] = [rc["InstanceType"]]
    context["sagemaker:MaxRuntimeInSeconds"] = str(request["StoppingCondition"]["MaxRuntimeInSeconds"])
    if "KeepAlivePeriodInSeconds" in rc:
        context["sagemaker:KeepAlivePeriod"] = str(rc["KeepAlivePeriodInSeconds"])
    if "VpcConfig" in request:
        context["sagemaker:VpcSubnets"] = request["VpcConfig"]["Subnets"]
        context["sagemaker:VpcSecurityGroupIds"] = request["VpcConfig"]["SecurityGroupIds"]
    for channel in request.get("InputDataConfig", []):
        fs = channel["DataSource"].get("FileSystemDataSource")
        # each key holds one value: with two FSx channels, which one SageMaker sends is undocumented (here the first)
        if fs and "sagemaker:FileSystemId" not in context:
            context["sagemaker:FileSystemId"] = fs["FileSystemId"]
            context["sagemaker:FileSystemAccessMode"] = fs["FileSystemAccessMode"]
            context["sagemaker:FileSystemDirectoryPath"] = fs["DirectoryPath"]
            context["sagemaker:FileSystemType"] = fs["FileSystemType"]
    return f"{SM}:training-job/{request['TrainingJobName']}", context


EC2 = f"arn:aws:ec2:{REGION}:{ACCOUNT}"
VPC = f"{EC2}:vpc/{VALUES['Vpc']}"


def release(who: str, owner: str, keep_alive_s: int, **context) -> Question:
    """``who``'s UpdateTrainingJob on ``owner``'s job, setting its warm pool's keep-alive period."""
    job = f"{SM}:training-job/{owner}-lab08-x"
    keys = {"aws:ResourceTag/workshop-attendee": owner, "sagemaker:KeepAlivePeriod": str(keep_alive_s)}
    return as_attendee(who, "sagemaker:UpdateTrainingJob", job, **keys, **context)


def launches(who: str, request: dict) -> Question:
    resource, context = create_job(request)
    return as_attendee(who, "sagemaker:CreateTrainingJob", resource, **context)


def passes(who: str, request: dict) -> Question:
    return as_attendee(who, "iam:PassRole", request["RoleArn"], **{"iam:PassedToService": "sagemaker.amazonaws.com"})


def s3_uri(request: dict, what: str) -> str:
    if what == "output":
        return request["OutputDataConfig"]["S3OutputPath"]
    if what == "checkpoint":
        return request["CheckpointConfig"]["S3Uri"]
    channel = next(c for c in request["InputDataConfig"] if c["ChannelName"] == what)
    return channel["DataSource"]["S3DataSource"]["S3Uri"]


def object_arn(uri: str, key: str = "part-0") -> str:
    return "arn:aws:s3:::" + uri.removeprefix("s3://").rstrip("/") + "/" + key


def lists(uri: str) -> tuple[str, dict]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return f"arn:aws:s3:::{bucket}", {"s3:prefix": prefix}


def stream(request: dict) -> str:
    return f"{LOGS}:log-stream:{request['TrainingJobName']}/algo-1-1700000000"


# ---- the attack table: (attack, its legitimate twin), each a question to the engine


def studio_context(owner: str | None, types: list[str] | None) -> dict:
    context = {"sagemaker:SpaceSharingType": "Private"} if owner else {}
    if owner:
        context["sagemaker:OwnerUserProfileArn"] = f"{SM}:user-profile/d-1/{owner}"
    if types is not None:
        context["sagemaker:InstanceTypes"] = types
    return context


def studio(who: str, action: str, resource: str, owner: str | None, types: list[str] | None) -> Question:
    return as_attendee(who, action, resource, **studio_context(owner, types))


def _table() -> dict[str, tuple[Question, Question]]:
    d = dry_requests()
    lab01, lab08, lab06, fsx = d["lab01"], d["lab08"], d["lab06"], d["lab05-fsx"]
    b_input, b_out, b_ckpt = (
        as_b(lab01, "InputDataConfig"),
        as_b(lab01, "OutputDataConfig"),
        as_b(lab06, "CheckpointConfig"),
    )
    rows = {
        "A's job reads B's input data": (
            as_job(A, "s3:GetObject", object_arn(s3_uri(b_input, "train"))),
            as_job(A, "s3:GetObject", object_arn(s3_uri(lab01, "train"))),
        ),
        "A's job lists B's input prefix": (
            as_job(A, "s3:ListBucket", lists(s3_uri(b_input, "train"))[0], **lists(s3_uri(b_input, "train"))[1]),
            as_job(A, "s3:ListBucket", lists(s3_uri(lab01, "train"))[0], **lists(s3_uri(lab01, "train"))[1]),
        ),
        "A's job writes its output over B's": (
            as_job(A, "s3:PutObject", object_arn(s3_uri(b_out, "output"), "model.tar.gz")),
            as_job(A, "s3:PutObject", object_arn(s3_uri(lab01, "output"), "model.tar.gz")),
        ),
        "A's job writes checkpoints into B's": (
            as_job(A, "s3:PutObject", object_arn(s3_uri(b_ckpt, "checkpoint"), "step-10.pt")),
            as_job(A, "s3:PutObject", object_arn(s3_uri(lab06, "checkpoint"), "step-10.pt")),
        ),
        "A's job script deletes B's code": (
            as_job(A, "s3:DeleteObject", object_arn(s3_uri(as_b(lab01, "InputDataConfig"), "code"), "source.tar.gz")),
            as_job(A, "s3:DeleteObject", object_arn(s3_uri(lab01, "code"), "source.tar.gz")),
        ),
        "A's job script reads B's code": (
            as_job(A, "s3:GetObject", object_arn(s3_uri(as_b(lab01, "InputDataConfig"), "code"), "source.tar.gz")),
            as_job(A, "s3:GetObject", object_arn(s3_uri(lab01, "code"), "source.tar.gz")),
        ),
        "A's job writes the shared data": (
            as_job(A, "s3:PutObject", f"arn:aws:s3:::{BUCKET}/shared/catalog/train.parquet"),
            as_job(A, "s3:GetObject", f"arn:aws:s3:::{BUCKET}/shared/catalog/train.parquet"),
        ),
        "A's job writes B's log stream": (
            as_job(A, "logs:PutLogEvents", stream(json.loads(json.dumps(lab01).replace(A, B)))),
            as_job(A, "logs:PutLogEvents", stream(lab01)),
        ),
        "A's job creates a job (it holds no SageMaker rights)": (
            as_job(A, "sagemaker:CreateTrainingJob", create_job(lab01)[0], **create_job(lab01)[1]),
            as_job(A, "s3:GetObject", object_arn(s3_uri(lab01, "train"))),
        ),
        "A passes B's job role": (passes(A, lab01 | {"RoleArn": job_role(B)}), passes(A, lab01)),
        "A passes the facilitator's job role": (passes(A, lab01 | {"RoleArn": FACILITATOR_JOB_ROLE}), passes(A, lab01)),
        "A reads B's job role (the SDK's GetRole check)": (
            as_attendee(A, "iam:GetRole", job_role(B)),
            as_attendee(A, "iam:GetRole", job_role(A)),
        ),
        "A launches after the budget is spent (BudgetSpentDeny attached)": (
            ask(
                session(A),
                "sagemaker:CreateTrainingJob",
                create_job(lab01)[0],
                (*ATTENDEE_POLICIES, BUDGET_DENY),
                **create_job(lab01)[1],
            ),
            launches(A, lab01),
        ),
        "A starts a space's app after the budget is spent": (
            ask(
                session(A),
                "sagemaker:CreateApp",
                f"{SM}:app/d-1/{A}-labs/jupyterlab/default",
                (*ATTENDEE_POLICIES, BUDGET_DENY),
                **studio_context(A, ["ml.m5.xlarge"]),
            ),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A passes their job role to EC2": (
            as_attendee(A, "iam:PassRole", job_role(A), **{"iam:PassedToService": "ec2.amazonaws.com"}),
            passes(A, lab01),
        ),
        "A launches with a warm pool of 3600 s": (
            launches(A, lab08 | {"ResourceConfig": lab08["ResourceConfig"] | {"KeepAlivePeriodInSeconds": 3600}}),
            launches(A, lab08),
        ),
        "A launches on ml.p4d.24xlarge": (
            launches(A, lab01 | {"ResourceConfig": lab01["ResourceConfig"] | {"InstanceType": "ml.p4d.24xlarge"}}),
            launches(A, lab01),
        ),
        "A launches for 3 h": (
            launches(A, lab01 | {"StoppingCondition": {"MaxRuntimeInSeconds": 3 * 3600}}),
            launches(A, lab01),
        ),
        "A launches a job tagged B": (
            launches(A, lab01 | {"Tags": [{"Key": "workshop-attendee", "Value": B}]}),
            launches(A, lab01),
        ),
        "A launches an untagged job": (launches(A, lab01 | {"Tags": []}), launches(A, lab01)),
        "A launches a job named as B's": (
            launches(A, lab01 | {"TrainingJobName": lab01["TrainingJobName"].replace(A, B)}),
            launches(A, lab01),
        ),
        "A's FSx channel mounts B's directory": (launches(A, as_b(fsx, "InputDataConfig")), launches(A, fsx)),
        "A's FSx channel mounts read-write": (
            launches(
                A, json.loads(json.dumps(fsx).replace('"FileSystemAccessMode": "ro"', '"FileSystemAccessMode": "rw"'))
            ),
            launches(A, fsx),
        ),
        "A launches with 51 tags": (
            launches(A, lab01 | {"Tags": lab01["Tags"] + [{"Key": f"pad-{i}", "Value": "x"} for i in range(49)]}),
            launches(A, lab01),
        ),
        "A's FSx channel climbs out of their directory (..)": (
            launches(A, json.loads(json.dumps(fsx).replace(f"/{A}/", f"/{A}/../{B}/"))),
            launches(A, fsx),
        ),
        "A's FSx channel mounts another file system": (
            launches(A, json.loads(json.dumps(fsx).replace(VALUES["FileSystem"], "fs-0fedcba9876543210"))),
            launches(A, fsx),
        ),
        "A launches in another security group": (
            launches(A, fsx | {"VpcConfig": fsx["VpcConfig"] | {"SecurityGroupIds": ["sg-0other"]}}),
            launches(A, fsx),
        ),
        "A's job makes its interface in another security group": (
            as_job(A, "ec2:CreateNetworkInterface", f"{EC2}:security-group/sg-0other", **{"ec2:Vpc": VPC}),
            as_job(
                A,
                "ec2:CreateNetworkInterface",
                f"{EC2}:security-group/{VALUES['JobsSecurityGroup']}",
                **{"ec2:Vpc": VPC},
            ),
        ),
        "A's job makes its interface in another VPC's subnet": (
            as_job(
                A, "ec2:CreateNetworkInterface", f"{EC2}:subnet/subnet-0other", **{"ec2:Vpc": f"{EC2}:vpc/vpc-0other"}
            ),
            as_job(A, "ec2:CreateNetworkInterface", f"{EC2}:subnet/subnet-0a1b2c3d", **{"ec2:Vpc": VPC}),
        ),
        "A's job writes metrics outside the training jobs' namespace": (
            as_job(A, "cloudwatch:PutMetricData", "*", **{"cloudwatch:namespace": "/aws/sagemaker/Endpoints"}),
            as_job(A, "cloudwatch:PutMetricData", "*", **{"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}),
        ),
        "A describes B's job": (
            as_attendee(
                A,
                "sagemaker:DescribeTrainingJob",
                create_job(lab01)[0].replace(A, B),
                **{"aws:ResourceTag/workshop-attendee": B},
            ),
            as_attendee(
                A, "sagemaker:DescribeTrainingJob", create_job(lab01)[0], **{"aws:ResourceTag/workshop-attendee": A}
            ),
        ),
        "A reads B's job tags": (
            as_attendee(A, "sagemaker:ListTags", create_job(lab01)[0].replace(A, B)),
            as_attendee(A, "sagemaker:ListTags", create_job(lab01)[0]),
        ),
        "A releases B's warm pool": (
            release(A, B, 0),
            release(A, A, 0),
        ),
        "A keeps their warm pool longer (UpdateTrainingJob)": (release(A, A, 3600), release(A, A, 0)),
        "A adds rule evaluators to their running job (UpdateTrainingJob)": (
            release(A, A, 0, **{"sagemaker:InstanceTypes": ["ml.g6.xlarge"]}),
            release(A, A, 0),
        ),
        "A stops B's job": (
            as_attendee(
                A,
                "sagemaker:StopTrainingJob",
                create_job(lab01)[0].replace(A, B),
                **{"aws:ResourceTag/workshop-attendee": B},
            ),
            as_attendee(
                A, "sagemaker:StopTrainingJob", create_job(lab01)[0], **{"aws:ResourceTag/workshop-attendee": A}
            ),
        ),
        "A reads B's job log": (
            as_attendee(A, "logs:GetLogEvents", stream(json.loads(json.dumps(lab01).replace(A, B)))),
            as_attendee(A, "logs:GetLogEvents", stream(lab01)),
        ),
        "A reads B's object from their session": (
            as_attendee(A, "s3:GetObject", object_arn(s3_uri(b_input, "train"))),
            as_attendee(A, "s3:GetObject", object_arn(s3_uri(lab01, "train"))),
        ),
        "A lists the whole bucket": (
            as_attendee(A, "s3:ListBucket", f"arn:aws:s3:::{BUCKET}"),
            as_attendee(A, "s3:ListBucket", f"arn:aws:s3:::{BUCKET}", **{"s3:prefix": f"{A}/"}),
        ),
        "a session without a source identity reads an attendee's object": (
            as_attendee(None, "s3:GetObject", object_arn(s3_uri(lab01, "train"))),
            as_attendee(A, "s3:GetObject", object_arn(s3_uri(lab01, "train"))),
        ),
        "A creates an app without a ResourceSpec": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, None),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A creates an app on ml.g5.48xlarge": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.g5.48xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A creates a second private space": (
            studio(A, "sagemaker:CreateSpace", f"{SM}:space/d-1/{A}-second", A, ["ml.m5.xlarge"]),
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, ["ml.m5.xlarge"]),
        ),
        "A creates a private space with no default type": (
            studio(A, "sagemaker:CreateSpace", f"{SM}:space/d-1/{A}-second", A, None),
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, None),
        ),
        "A deletes their space, to make another": (
            studio(A, "sagemaker:DeleteSpace", f"{SM}:space/d-1/{A}-labs", A, None),
            studio(A, "sagemaker:DeleteApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, None),
        ),
        "A updates their space to ml.p5.48xlarge": (
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, ["ml.p5.48xlarge"]),
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, ["ml.m5.xlarge"]),
        ),
        "A updates their space to a larger type (ml.m5.2xlarge)": (
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, ["ml.m5.2xlarge"]),
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, ["ml.m5.xlarge"]),
        ),
        "A creates an app on a larger type (ml.m5.2xlarge)": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.2xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A creates an app in a second space of their own": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-second/jupyterlab/default", A, ["ml.m5.xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A creates a JupyterLab app under their profile, outside their space": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}/jupyterlab/default", None, ["ml.m5.xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A creates an app under B's profile": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{B}/jupyterlab/default", None, ["ml.m5.xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A changes their space after the budget is spent": (
            ask(
                session(A),
                "sagemaker:UpdateSpace",
                f"{SM}:space/d-1/{A}-labs",
                (*ATTENDEE_POLICIES, BUDGET_DENY),
                **studio_context(A, ["ml.m5.xlarge"]),
            ),
            studio(A, "sagemaker:UpdateSpace", f"{SM}:space/d-1/{A}-labs", A, ["ml.m5.xlarge"]),
        ),
        "A deletes an app under B's profile": (
            studio(A, "sagemaker:DeleteApp", f"{SM}:app/d-1/{B}/jupyterlab/default", None, None),
            studio(A, "sagemaker:DeleteApp", f"{SM}:app/d-1/{A}/jupyterlab/default", None, None),
        ),
        "A creates an app in B's space": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{B}-labs/jupyterlab/default", B, ["ml.m5.xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
        "A creates a CodeEditor app (no idle shutdown)": (
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/codeeditor/default", A, ["ml.m5.xlarge"]),
            studio(A, "sagemaker:CreateApp", f"{SM}:app/d-1/{A}-labs/jupyterlab/default", A, ["ml.m5.xlarge"]),
        ),
    }
    return rows


@cache
def table() -> dict[str, tuple[iam_engine.Answer, iam_engine.Answer]]:
    rows = _table()
    answers = iam_engine.decide_all([q for pair in rows.values() for q in pair])
    return {name: (answers[2 * i], answers[2 * i + 1]) for i, name in enumerate(rows)}


ROWS = [
    "A's job reads B's input data",
    "A's job lists B's input prefix",
    "A's job writes its output over B's",
    "A's job writes checkpoints into B's",
    "A's job script deletes B's code",
    "A's job script reads B's code",
    "A's job writes the shared data",
    "A's job writes B's log stream",
    "A's job creates a job (it holds no SageMaker rights)",
    "A passes B's job role",
    "A passes the facilitator's job role",
    "A reads B's job role (the SDK's GetRole check)",
    "A launches after the budget is spent (BudgetSpentDeny attached)",
    "A starts a space's app after the budget is spent",
    "A passes their job role to EC2",
    "A launches with a warm pool of 3600 s",
    "A launches on ml.p4d.24xlarge",
    "A launches for 3 h",
    "A launches a job tagged B",
    "A launches an untagged job",
    "A launches a job named as B's",
    "A's FSx channel mounts B's directory",
    "A's FSx channel mounts read-write",
    "A launches with 51 tags",
    "A's FSx channel climbs out of their directory (..)",
    "A's FSx channel mounts another file system",
    "A launches in another security group",
    "A's job makes its interface in another security group",
    "A's job makes its interface in another VPC's subnet",
    "A's job writes metrics outside the training jobs' namespace",
    "A describes B's job",
    "A reads B's job tags",
    "A releases B's warm pool",
    "A keeps their warm pool longer (UpdateTrainingJob)",
    "A adds rule evaluators to their running job (UpdateTrainingJob)",
    "A stops B's job",
    "A reads B's job log",
    "A reads B's object from their session",
    "A lists the whole bucket",
    "a session without a source identity reads an attendee's object",
    "A creates an app without a ResourceSpec",
    "A creates an app on ml.g5.48xlarge",
    "A creates a second private space",
    "A creates a private space with no default type",
    "A deletes their space, to make another",
    "A updates their space to ml.p5.48xlarge",
    "A updates their space to a larger type (ml.m5.2xlarge)",
    "A creates an app on a larger type (ml.m5.2xlarge)",
    "A creates an app in a second space of their own",
    "A creates a JupyterLab app under their profile, outside their space",
    "A creates an app under B's profile",
    "A changes their space after the budget is spent",
    "A deletes an app under B's profile",
    "A creates an app in B's space",
    "A creates a CodeEditor app (no idle shutdown)",
]


@needs_engine
def test_the_table_names_every_row():
    assert list(table()) == ROWS


@needs_engine
@pytest.mark.parametrize("row", ROWS)
def test_each_attack_is_refused_and_its_twin_allowed(row):
    attack, twin = table()[row]
    assert attack.decision != "allowed", row
    assert twin.decision == "allowed", f"{row}: the legitimate twin is {twin.decision}"
    # every key the request carries applies to its action: no condition rests on a key AWS never sends
    assert not attack.ignored and not twin.ignored, (attack.ignored, twin.ignored)


# ---- what IAM cannot refuse: each is allowed, and the guide says so, with what holds it instead (or nothing)


def _open_table() -> dict[str, Question]:
    d = dry_requests()
    fsx = d["lab05-fsx"]
    theirs = as_b(fsx, "InputDataConfig")["InputDataConfig"][0] | {"ChannelName": "theirs"}
    host = {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs", "cloudwatch:dimension/Host": f"{B}-lab01-x/algo-1"}
    return {
        # the key holds one channel's path (here the first, A's own): the enforcer reads every channel
        "A launches a second FSx channel, B's": launches(
            A, fsx | {"InputDataConfig": [*fsx["InputDataConfig"], theirs]}
        ),
        "A lists every job's name": as_attendee(A, "sagemaker:ListTrainingJobs", "*"),
        "A lists every job's log stream names": as_attendee(A, "logs:DescribeLogStreams", f"{LOGS}:*"),
        "A's job writes metrics under B's job's Host dimension": as_job(A, "cloudwatch:PutMetricData", "*", **host),
        "A reads B's job's metrics": as_attendee(A, "cloudwatch:GetMetricData", "*"),
        "A describes B's space": as_attendee(A, "sagemaker:DescribeSpace", f"{SM}:space/d-1/{B}-labs"),
        "A describes B's app": as_attendee(A, "sagemaker:DescribeApp", f"{SM}:app/d-1/{B}-labs/jupyterlab/default"),
    }


@cache
def open_table() -> dict[str, iam_engine.Answer]:
    rows = _open_table()
    return dict(zip(rows, iam_engine.decide_all(list(rows.values())), strict=True))


@needs_engine
def test_what_iam_cannot_refuse_is_allowed_and_no_key_would_refuse_it():
    got = open_table()
    assert {name: a.decision for name, a in got.items()} == dict.fromkeys(got, "allowed")
    # a metric's dimension is no condition key: the engine reports the one the request carried as not applying
    assert got["A's job writes metrics under B's job's Host dimension"].ignored == ("cloudwatch:dimension/Host",)
    assert not [a.ignored for name, a in got.items() if "dimension" not in name and a.ignored]


def test_every_statement_of_the_guide_about_an_attendee_is_held_by_a_test():
    """The guide's and the Workshop Studio page's table of what an attendee who tries can do (the template's
    generator writes it): what IAM refuses names rows of the attack table, what nothing refuses rows of the open
    table, and what the enforcer refuses its tests (tests/test_event_account_enforcer.py checks those names)."""
    from test_event_account import account_template

    limits = account_template.attendee_limits()
    for limit in limits:
        rows = [t for t in limit.tests if not t.startswith("test_")]
        if limit.refused_by == "IAM":
            assert rows == list(limit.tests) and set(rows) <= set(ROWS), limit
        elif limit.refused_by == "nothing":
            assert rows == list(limit.tests) and set(rows) <= set(_OPEN_ROWS), limit
        else:
            assert limit.refused_by == "the enforcer" and set(rows) <= set(_OPEN_ROWS), limit
    said = (REPO / "docs" / "facilitator.md").read_text(encoding="utf-8")
    assert account_template.attendee_limits_markdown() in said


_OPEN_ROWS = [
    "A launches a second FSx channel, B's",
    "A lists every job's name",
    "A lists every job's log stream names",
    "A's job writes metrics under B's job's Host dimension",
    "A reads B's job's metrics",
    "A describes B's space",
    "A describes B's app",
]


@needs_engine
def test_the_open_table_names_every_row():
    assert list(open_table()) == _OPEN_ROWS


@needs_engine
def test_the_bucket_policy_alone_holds_jobs_and_sessions_to_their_prefix():
    """The second layer: with an identity policy that grants the whole bucket (the facilitator's job role's), the
    bucket policy still refuses A's job and A's session B's prefix, and a session of the attendee role without a
    source identity anything; the facilitator's own jobs keep the whole bucket."""
    d = dry_requests()["lab01"]
    theirs, mine = object_arn(s3_uri(as_b(d, "InputDataConfig"), "train")), object_arn(s3_uri(d, "train"))
    wide = FACILITATOR_JOB_POLICIES
    facilitator = (
        f"arn:aws:sts::{ACCOUNT}:assumed-role/event-ExecutionRole-x/SageMaker",
        {"aws:PrincipalArn": FACILITATOR_JOB_ROLE},
    )
    questions = [
        as_job(A, "s3:GetObject", theirs, policies=wide),
        as_job(A, "s3:PutObject", theirs, policies=wide),
        as_job(A, "s3:GetObject", mine, policies=wide),
        ask(session(A), "s3:GetObject", theirs, wide, BUCKET_POLICY),
        ask(session(None), "s3:GetObject", mine, wide, BUCKET_POLICY),
        ask(facilitator, "s3:GetObject", theirs, wide, BUCKET_POLICY),
        ask(facilitator, "s3:GetObject", theirs, wide, None),
    ]
    got = [a.decision for a in iam_engine.decide_all(questions)]
    assert got == ["denied", "denied", "allowed", "denied", "denied", "allowed", "allowed"]
    # and without the bucket policy, the wide grant is what the old shared job role gave every job: the leak
    leak = iam_engine.decide(replace(questions[0], resource_policy=None))
    assert leak.decision == "allowed"


@needs_engine
def test_each_attendee_s_job_role_trusts_sagemaker_with_their_source_identity():
    """A job launched from a session with a source identity: SageMaker assumes the job role and carries the source
    identity, which the trust policy must allow (sts:SetSourceIdentity) or the launch fails. SageMaker acting for
    another account (aws:SourceAccount, the confused deputy) is refused."""
    roles = {k: v["Properties"] for k, v in R.items() if k.startswith("JobRole")}
    assert len(roles) == 40
    trust = resolve(roles["JobRole01"]["AssumeRolePolicyDocument"])
    mine, theirs = {"aws:SourceAccount": ACCOUNT}, {"aws:SourceAccount": "444455556666"}
    questions = [
        Question(Request("sagemaker.amazonaws.com", "sts:AssumeRole", job_role(A), mine), (), trust),
        Question(
            Request("sagemaker.amazonaws.com", "sts:SetSourceIdentity", job_role(A), mine | {"sts:SourceIdentity": A}),
            (),
            trust,
        ),
        Question(Request("sagemaker.amazonaws.com", "sts:AssumeRole", job_role(A), theirs), (), trust),
        Question(Request("ec2.amazonaws.com", "sts:AssumeRole", job_role(A), mine), (), trust),
        Question(Request(session(A)[0], "sts:AssumeRole", job_role(A), session(A)[1]), (), trust),
    ]
    got = [a.decision for a in iam_engine.decide_all(questions)]
    assert got == ["allowed", "allowed", "implicitly denied", "implicitly denied", "implicitly denied"]
    assert all(resolve(p["AssumeRolePolicyDocument"]) == trust for p in roles.values())


@needs_engine
def test_every_role_sagemaker_assumes_refuses_another_account_s_sagemaker():
    trusts = {
        name: resolve(R[name]["Properties"]["AssumeRolePolicyDocument"])
        for name in ("ExecutionRole", "AttendeeRole", "JobRole01")
    }
    questions = [
        Question(Request("sagemaker.amazonaws.com", "sts:AssumeRole", arn, {"aws:SourceAccount": account}), (), trust)
        for trust, arn in zip(trusts.values(), (FACILITATOR_JOB_ROLE, ATTENDEE_ROLE, job_role(A)), strict=True)
        for account in (ACCOUNT, "444455556666")
    ]
    got = [a.decision for a in iam_engine.decide_all(questions)]
    assert got == ["allowed", "implicitly denied"] * len(trusts)
    statements = [s for t in trusts.values() for s in t["Statement"] if s["Principal"].get("Service")]
    assert all(s["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT for s in statements)


def test_jobs_run_as_roles_that_create_nothing():
    for policies in (JOB_POLICIES, FACILITATOR_JOB_POLICIES):
        actions = {
            a
            for p in policies
            for s in p["Statement"]
            for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
        }
        assert not {a for a in actions if a.startswith(("sagemaker:", "iam:", "sts:"))}, actions


def test_the_warm_pool_limit_is_lab_08_s():
    """The attendee policy's sagemaker:KeepAlivePeriod is the longest warm pool a lab asks for (lab 08's)."""
    lab08 = (REPO / "labs" / "08_failures_at_scale.ipynb").read_text(encoding="utf-8")
    asked = {int(s) for s in re.findall(r"warm_pool_s=(\d+)", lab08)}
    create = next(s for s in ATTENDEE_POLICIES[0]["Statement"] if s["Sid"] == "CreateOwnJobsWithinTheGuardrails")
    assert asked and {str(max(asked))} == {
        create["Condition"]["NumericLessThanEqualsIfExists"]["sagemaker:KeepAlivePeriod"]
    }


def test_the_identity_is_the_helpers_attendee_prefix():
    # Studio's source identity is the user profile's name: it must be the prefix, tag and job-name start the helpers use
    profiles = [r["Properties"]["UserProfileName"] for r in R.values() if r["Type"] == "AWS::SageMaker::UserProfile"]
    assert profiles and all(sanitize_attendee(p) == p for p in profiles)
    domain = R["StudioDomain"]["Properties"]
    assert domain["DomainSettings"]["ExecutionRoleIdentityConfig"] == "USER_PROFILE_NAME"
    assert domain["DefaultUserSettings"]["ExecutionRole"] == {"Fn::GetAtt": ["AttendeeRole", "Arn"]}
    trust = R["AttendeeRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert all("sts:SetSourceIdentity" in s["Action"] for s in trust)
    laptop = next(s for s in trust if "AWS" in s["Principal"])
    assert laptop["Condition"]["StringLike"]["sts:SourceIdentity"] == "attendee-*"  # only the profiles' names


# ---- the guardrails' one home, and the preflight that applies it


def test_the_guardrails_are_the_event_s_real_targets():
    launched = {t.instance_type for t in lab_targets.TARGETS if t.launch}
    assert set(guardrails.TRAINING_INSTANCE_TYPES) == launched
    assert all(t.minutes * 60 <= guardrails.EVENT_MAX_RUNTIME_S for t in lab_targets.TARGETS)
    assert guardrails.EVENT_MAX_RUNTIME_S == Job("x", {}, {}).max_runtime_s


@pytest.mark.parametrize(
    "instance_type, runtime, warm_pool_s, says",
    [
        ("ml.p4d.24xlarge", 3600, None, "sagemaker:InstanceTypes"),
        ("ml.g6.xlarge", 3 * 3600, None, "sagemaker:MaxRuntimeInSeconds"),
        ("ml.g6.xlarge", 3600, 3600, "sagemaker:KeepAlivePeriod"),
        ("ml.g6.xlarge", 3600, 1800, None),  # lab 08's warm pool
        ("ml.g6.xlarge", 3600, None, None),
    ],
)
def test_the_preflight_refuses_a_job_outside_the_guardrails_naming_the_limit(
    monkeypatch, instance_type, runtime, warm_pool_s, says
):
    job = replace(Job("lab-x", {}, {}), max_runtime_s=runtime, warm_pool_s=warm_pool_s)
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
    dry = jobs.on_sagemaker(job, resolve_target("ml.p4d.24xlarge"), echo=False)
    assert dry.request["ResourceConfig"]["InstanceType"] == "ml.p4d.24xlarge"
    assert any("a launch would be refused" in n for n in dry.plan.notes)


# Workshop Studio: a participant's console role, in an account of their own (static/iam_policy.json)
PARTICIPANT = (json.loads((REPO / "static" / "iam_policy.json").read_text(encoding="utf-8")),)
CONSOLE = (f"arn:aws:sts::{ACCOUNT}:assumed-role/WSParticipantRole/Participant", {})
PARTICIPANT_CASES = [
    (
        "opens Studio as the domain's profile",
        "sagemaker:CreatePresignedDomainUrl",
        f"{SM}:user-profile/d-1/{A}",
        "allowed",
    ),
    ("lists the domains and profiles", "sagemaker:ListUserProfiles", "*", "allowed"),
    ("follows a job", "sagemaker:DescribeTrainingJob", f"{SM}:training-job/{A}-lab01-x", "allowed"),
    ("reads a job's log", "logs:GetLogEvents", f"{LOGS}:log-stream:{A}-lab01-x/algo-1", "allowed"),
    ("finds the jobs' log group", "logs:DescribeLogGroups", "*", "allowed"),
    ("searches a job's log", "logs:FilterLogEvents", f"{LOGS}:*", "allowed"),
    (
        "creates a job itself, round the guardrails",
        "sagemaker:CreateTrainingJob",
        f"{SM}:training-job/x",
        "implicitly denied",
    ),
    ("passes a job role", "iam:PassRole", job_role(A), "implicitly denied"),
    ("stops a job", "sagemaker:StopTrainingJob", f"{SM}:training-job/{A}-lab01-x", "implicitly denied"),
    ("writes the bucket", "s3:PutObject", f"arn:aws:s3:::{BUCKET}/{A}/code.tar.gz", "implicitly denied"),
]


@needs_engine
def test_the_workshop_studio_participant_opens_studio_and_follows_jobs_only():
    questions = [ask(CONSOLE, action, resource, PARTICIPANT) for _, action, resource, _ in PARTICIPANT_CASES]
    got = {c[0]: a.decision for c, a in zip(PARTICIPANT_CASES, iam_engine.decide_all(questions), strict=True)}
    assert got == {c[0]: c[3] for c in PARTICIPANT_CASES}


@needs_engine
def test_a_console_participant_without_a_source_identity_gets_nothing_from_the_attendee_policy():
    """Why the participant role does not hold the attendee policy: the console sets no source identity, so every
    per-attendee statement fails to apply; in Studio the same person is attendee-01 and gets their jobs."""
    lab01 = dry_requests()["lab01"]
    create, read = launches(None, lab01), as_attendee(None, "s3:GetObject", object_arn(s3_uri(lab01, "train")))
    got = [a.decision for a in iam_engine.decide_all([create, read, launches(A, lab01)])]
    assert got[0] == "implicitly denied" and got[1] != "allowed" and got[2] == "allowed"


def test_one_attendee_s_ceiling_in_the_guide_is_the_template_s_limits_priced():
    """From the template as deployed: the enforcer's instances at once, the dearest type the attendee policy lets a
    job run on, and one app (the one space each, on the one type CreateApp may name), at the helpers' prices."""
    variables = R["JobLimits"]["Properties"]["Environment"]["Variables"]
    at_once = int(variables["MAX_INSTANCES_PER_ATTENDEE"])
    create = next(s for s in ATTENDEE_POLICIES[0]["Statement"] if s["Sid"] == "CreateOwnJobsWithinTheGuardrails")
    job_types = create["Condition"]["ForAllValues:StringEquals"]["sagemaker:InstanceTypes"]
    assert variables["INSTANCE_TYPES"].split(",") == job_types  # the enforcer holds rule evaluators to them too
    app = next(s for s in ATTENDEE_POLICIES[1]["Statement"] if s["Sid"] == "StudioOwnSpaceApps")
    (space_type,) = app["Condition"]["ForAllValues:StringEquals"]["sagemaker:InstanceTypes"]
    assert space_type == TEMPLATE_DOC["Parameters"]["StudioInstanceType"]["Default"]
    spaces = [r for r in R.values() if r["Type"] == "AWS::SageMaker::Space"]
    profiles = [r for r in R.values() if r["Type"] == "AWS::SageMaker::UserProfile"]
    assert len(spaces) == len(profiles)  # one space each, and the attendee policy creates none
    price = {t: instances.lookup(t).price_per_hour for t in [*job_types, space_type]}
    ceiling = at_once * max(price[t] for t in job_types) + price[space_type]
    guide = (REPO / "docs" / "facilitator.md").read_text(encoding="utf-8")
    assert f"= ${ceiling:.2f}/h on demand" in guide
    assert round(ceiling, 2) == 17.49  # 3 x ml.g6.12xlarge ($5.752) + ml.m5.xlarge ($0.23), as of the price list


def test_the_attendee_role_s_inline_policies_fit_iam_s_limits():
    """IAM's quotas (whitespace not counted): a role's inline policies 10,240 characters together, a managed policy
    6,144; as deployed with every option on."""

    def size(document) -> int:
        return len(json.dumps(document, separators=(",", ":")))

    assert sum(size(p) for p in ATTENDEE_POLICIES) <= 10_240, [size(p) for p in ATTENDEE_POLICIES]
    assert size(JOB_POLICIES[0]) <= 6_144 and size(BUDGET_DENY) <= 6_144


@needs_engine
def test_an_fsx_job_makes_its_interface_as_its_role_for_attendees_and_the_facilitator():
    """CreateNetworkInterface authorizes the interface being made (which carries no ec2:Vpc key), its subnet and its
    security group: each is allowed for lab 05's FSx job, run as A's job role or the facilitator's."""
    facilitator = (
        f"arn:aws:sts::{ACCOUNT}:assumed-role/event-ExecutionRole-x/SageMaker",
        {"aws:PrincipalArn": FACILITATOR_JOB_ROLE},
    )
    parts = [
        (f"{EC2}:network-interface/*", {}),
        (f"{EC2}:subnet/subnet-0a1b2c3d", {"ec2:Vpc": VPC}),
        (f"{EC2}:security-group/{VALUES['JobsSecurityGroup']}", {"ec2:Vpc": VPC}),
    ]
    questions = [as_job(A, "ec2:CreateNetworkInterface", arn, **keys) for arn, keys in parts]
    questions += [
        ask(facilitator, "ec2:CreateNetworkInterface", arn, FACILITATOR_JOB_POLICIES, **keys) for arn, keys in parts
    ]
    answers = iam_engine.decide_all(questions)
    assert [a.decision for a in answers] == ["allowed"] * len(questions)
    assert not [a.ignored for a in answers if a.ignored]
