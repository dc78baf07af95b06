"""The generated blocks of infra/workshop-account.yaml: each attendee's job role, Studio profile and private space,
the policies, the enforcer of what IAM cannot express (infra/enforcer.py), and the spaces' sizing; and what the
facilitator guide says an attendee who tries can do (attendee_limits: each statement names the tests that hold it)
and what one attendee can cost at most, in $/h.

CloudFormation has no loops, so the template holds MAX_ATTENDEES job roles (and, with Studio, user profiles and
spaces) in groups of ATTENDEE_STEP, each group behind a condition that holds when the Attendees parameter reaches it.
(Groups, not one condition per count: cfn-lint's time grows steeply with the number of values one parameter is
compared with: 2.7 s for 8, 15 s for 20, over 3 minutes for 40.) The spaces' default storage and instance type are
computed here from measured figures (update the constants, then rewrite the template):

    python infra/workshop_account.py --write    # rewrite the generated blocks of workshop-account.yaml
    python infra/workshop_account.py --check    # exit 1 if they differ from what this writes (the tests check too)

The attendees' IAM policy is written here too, from helpers/guardrails.py (the training types and the longest
runtime), into the template (the attendee role); the Workshop Studio packaging (contentspec.yaml, content/ and
static/) carries a copy of the template, and its participant role a policy of its own.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from infra/: the guardrails' one home is in the helpers
    sys.path.insert(0, str(REPO))

from course import generated  # noqa: E402
from course.manifest import LABS  # noqa: E402
from helpers import guardrails  # noqa: E402
from helpers.planning import instances  # noqa: E402

TEMPLATE = Path(__file__).resolve().with_name("workshop-account.yaml")
CONTENTSPEC = REPO / "contentspec.yaml"
STATIC = REPO / "static"

MAX_ATTENDEES = 40
ATTENDEE_STEP = 5  # Attendees takes multiples of this; spare roles and profiles cost nothing
DEFAULT_ATTENDEES = 10
PROFILE_NAME = "attendee-{:02d}"  # the attendee prefix of their jobs and S3 keys (helpers.aws.account)
SPACE_NAME = "{}-labs"  # each attendee's one private JupyterLab space, made by the template (course.spaces starts it)
ATTENDEE_TAG = "workshop-attendee"  # the tag of an attendee's jobs and of their job role
JOB_ROLE_PATH = "/workshop-jobs/${AWS::StackName}/"  # then the attendee: <path><attendee>/<role name>
SHARED_PREFIX = "shared"  # the bucket's read-only data for everyone (the facilitator writes it)
# What IAM cannot express, enforced by the enforcer (infra/enforcer.py) as each job starts; from the labs' real targets
# (course/manifest.py, tests/test_event_account_policies.py holds them together):
MAX_INSTANCES_PER_JOB = 2  # lab 02's two nodes
MAX_INSTANCES_PER_ATTENDEE = 3  # lab 05's three one-instance jobs at once
# sagemaker:KeepAlivePeriod: lab 08's warm pool, and no longer (helpers/guardrails.py)
MAX_WARM_POOL_S = guardrails.EVENT_MAX_WARM_POOL_S

# --- A space's home directory (its EBS volume): what the workshop puts there, in MB ----------------------------------
# Measured 2026-11-25 on a fresh clone of commit 010941b (`du -sm`).
CLONE_MB = 7  # the clone, .git included (its data/ is 3 MB of that: the catalogue is committed)
SMOKE_RUN_MB = 132  # runs/ after one smoke run of every lab: jobs 60, lab 05's data 44, lab 06's drills 28, labs 2
RERUN_MB = 88  # what each further run of every lab adds: new job and drill folders (lab 05's data is made once)
LAB_PASSES = 5  # runs of every lab kept in a day: a first smoke run, the core path, the exercise, a deep dive, a retry
# What `make studio` adds under the home directory: the `added_mb` of `make studio-twin`'s report
# (docs/studio-twin.json, 2026-11-27: 154.9 MB, py-spy for lab 08 included). When the twin measures a new figure, update
# it here and run --write.
STUDIO_INSTALL_MB = 155
STUDIO_INSTALL_MEASURED = True
# Lab 05 at full size (its `smoke=False` data set, the size its deep dive invites) writes about 11 GB of shards
# (issue 32's audit); the volume holds one such run beside the smoke runs rather than failing midway.
LAB05_FULL_MB = 11 * 1024
FREE_FRACTION = 0.2  # kept free: a full volume stops JupyterLab saving notebooks
MIN_SPACE_GB = 5  # the API's minimum (DefaultEbsStorageSettings)
MAX_SPACE_GB = 100  # what an attendee may grow their space to (the domain's MaximumEbsVolumeSizeInGb)


def space_footprint_mb() -> int:
    return CLONE_MB + STUDIO_INSTALL_MB + SMOKE_RUN_MB + (LAB_PASSES - 1) * RERUN_MB + LAB05_FULL_MB


def space_storage_gb() -> int:
    """The spaces' default EBS size: the footprint with FREE_FRACTION kept free, in whole GB, at least the minimum."""
    return max(MIN_SPACE_GB, math.ceil(space_footprint_mb() / (1 - FREE_FRACTION) / 1024))


def storage_arithmetic() -> str:
    install = f"{STUDIO_INSTALL_MB} MB `make studio`" + ("" if STUDIO_INSTALL_MEASURED else " (provisional)")
    need = space_footprint_mb()
    return (
        f"{CLONE_MB} MB clone + {install} + {SMOKE_RUN_MB} MB first run of the labs + "
        f"{LAB_PASSES - 1} x {RERUN_MB} MB more runs + {LAB05_FULL_MB} MB lab 05 at full size = {need} MB; "
        f"with {FREE_FRACTION:.0%} kept free {need / (1 - FREE_FRACTION) / 1024:.1f} GB, "
        f"at least {MIN_SPACE_GB} (the API's minimum): {space_storage_gb()} GB"
    )


# --- The spaces' JupyterLab instance --------------------------------------------------------------------------------
# Each lab's smoke run on the test machine: its peak memory and training processes at once (course.manifest)
LAB_PEAK_MB = {lab.number: lab.peak_mb for lab in LABS if lab.peak_mb is not None}
LAB_PROCESSES = {lab.number: lab.processes for lab in LABS if lab.processes is not None}
# JupyterLab's server, Studio's extensions and the kernels an attendee leaves open beside the running lab: the guide's
# earlier whole-run measurement put the runner at 2.3 GiB resident and found 8 GiB comfortable, 4 GiB not.
MIN_MEMORY_GIB = 8


@dataclass(frozen=True)
class JupyterLabType:
    name: str
    vcpus: int
    cores: int  # physical cores: 2 vCPUs are one core's two hyperthreads
    memory_gib: int
    burstable: bool = False  # t3: full speed only while CPU credits last (a t3.large's baseline is 30% of a vCPU)


# Cheapest first, among the Studio JupyterLab types the template offers: those a space's DefaultResourceSpec takes in
# CloudFormation (AWS::SageMaker::Space's schema has no m6i type)
JUPYTERLAB_TYPES = (
    JupyterLabType("ml.t3.large", 2, 1, 8, burstable=True),
    JupyterLabType("ml.m5.large", 2, 1, 8),
    JupyterLabType("ml.m5.xlarge", 4, 2, 16),
    JupyterLabType("ml.m5.2xlarge", 8, 4, 32),
)


def shortfalls(t: JupyterLabType) -> list[str]:
    """Why ``t`` does not run the labs as measured (empty: it does)."""
    why = []
    procs = max(LAB_PROCESSES.values())
    labs = [lab for lab, n in LAB_PROCESSES.items() if n > t.cores]
    if labs:
        why.append(
            f"{t.cores} physical core for the {procs} processes labs {', '.join(labs)} run at once: they would "
            f"share it (the lab times were measured on 2 cores)"
        )
    if t.burstable:
        why.append("burstable: a lab's sustained CPU use spends its credits, then it runs at a fraction of a core")
    if t.memory_gib < MIN_MEMORY_GIB:
        why.append(f"{t.memory_gib} GiB of memory, under {MIN_MEMORY_GIB}")
    return why


def jupyterlab_instance() -> JupyterLabType:
    """The cheapest JupyterLab type with no shortfall."""
    return next(t for t in JUPYTERLAB_TYPES if not shortfalls(t))


# --- The generated blocks -------------------------------------------------------------------------------------------
def _first(n: int) -> int:
    return (n - 1) // ATTENDEE_STEP * ATTENDEE_STEP + 1


def _condition(n: int) -> str | None:
    """The condition of attendee n's job role: Attendees reaches n's group (None: the first group always exists)."""
    first = _first(n)
    return None if first == 1 else f"Attendees{first:02d}To{first + ATTENDEE_STEP - 1:02d}"


def _profile_condition(n: int) -> str:
    """The condition of attendee n's Studio profile: the domain exists and Attendees reaches n's group."""
    group = _condition(n)
    return "CreateStudio" if group is None else f"Studio{group}"


def studio_parameters() -> str:
    chosen = jupyterlab_instance()
    counts = ", ".join(f'"{n}"' for n in range(ATTENDEE_STEP, MAX_ATTENDEES + 1, ATTENDEE_STEP))
    users = (
        f"How many attendees ({PROFILE_NAME.format(1)} ... {PROFILE_NAME.format(MAX_ATTENDEES)}), in steps of "
        f"{ATTENDEE_STEP}: round up (a spare costs nothing). Each gets a job role of their own and, with WithStudio, a "
        f"Studio user profile; the name is the attendee prefix of that person's jobs and S3 keys."
    )
    instance = (
        f"With WithStudio, the spaces' default JupyterLab instance: {chosen.name} has {chosen.cores} physical cores "
        f"({chosen.vcpus} vCPUs) and {chosen.memory_gib} GiB, the cheapest here that runs two training processes "
        f"side by side (docs/facilitator.md, Studio)."
    )
    storage = (
        "With WithStudio, each space's default EBS volume in GB (its home directory): "
        + storage_arithmetic().replace("`", "")
        + "."
    )
    return f"""\
  Attendees:
    Type: String
    Default: "{DEFAULT_ATTENDEES}"
    AllowedValues: [{counts}]
    Description: {json.dumps(users)}
  StudioInstanceType:
    Type: String
    Default: {chosen.name}
    AllowedValues: [{", ".join(t.name for t in JUPYTERLAB_TYPES)}]
    Description: {json.dumps(instance)}
  StudioStorageGb:
    Type: Number
    Default: {space_storage_gb()}
    MinValue: {MIN_SPACE_GB}
    MaxValue: {MAX_SPACE_GB}
    Description: {json.dumps(storage)}
"""


def studio_attendee_conditions() -> str:
    """A chain: group k exists when group k - 1 does and Attendees is not the count that ends group k - 1; its
    profiles exist when the group and the domain do."""
    out = []
    for n in range(ATTENDEE_STEP + 1, MAX_ATTENDEES + 1, ATTENDEE_STEP):
        before = _condition(n - 1)
        reached = f'!Not [!Equals [!Ref Attendees, "{n - 1}"]]'
        out.append(f"  {_condition(n)}: " + (f"!And [!Condition {before}, {reached}]" if before else reached) + "\n")
    for n in range(ATTENDEE_STEP + 1, MAX_ATTENDEES + 1, ATTENDEE_STEP):
        out.append(f"  {_profile_condition(n)}: !And [!Condition CreateStudio, !Condition {_condition(n)}]\n")
    return "".join(out)


def studio_attendee_profiles() -> str:
    """Each attendee's user profile and their one private JupyterLab space (they may create no other)."""
    image = studio_image_spec()  # the domain's pinned image, at the same depth
    blocks = []
    for n in range(1, MAX_ATTENDEES + 1):
        who = PROFILE_NAME.format(n)
        blocks.append(
            f"""\
  StudioAttendee{n:02d}:
    Type: AWS::SageMaker::UserProfile
    Condition: {_profile_condition(n)}
    Properties:
      DomainId: !GetAtt StudioDomain.DomainId
      UserProfileName: {who}
      Tags: [{{Key: workshop, Value: !Ref AWS::StackName}}]

  StudioSpace{n:02d}:
    Type: AWS::SageMaker::Space
    Condition: {_profile_condition(n)}
    DependsOn: StudioAttendee{n:02d}
    Properties:
      DomainId: !GetAtt StudioDomain.DomainId
      SpaceName: {SPACE_NAME.format(who)}
      SpaceDisplayName: {SPACE_NAME.format(who)}
      OwnershipSettings: {{OwnerUserProfileName: {who}}}
      SpaceSharingSettings: {{SharingType: Private}}
      SpaceSettings:
        AppType: JupyterLab
        SpaceStorageSettings: {{EbsStorageSettings: {{EbsVolumeSizeInGb: !Ref StudioStorageGb}}}}
        JupyterLabAppSettings:
          DefaultResourceSpec:
            InstanceType: !Ref StudioInstanceType
{image}\
      Tags: [{{Key: workshop, Value: !Ref AWS::StackName}}]
"""
        )
    return "\n".join(blocks)


# --- The Studio image: SageMaker Distribution, pinned ---------------------------------------------------------------
# The version `make studio` and the Studio twin are tested against (tools/studio/sagemaker-distribution-<v>.txt,
# docs/studio-twin.json); a space gets it whatever the default is on the day.
STUDIO_IMAGE_VERSION = "4.5.0"
# The account that publishes the sagemaker-distribution-cpu image in each region (the SageMaker developer guide's
# table of Code Editor and JupyterLab images, checked 2026-11-25). A region not here is refused by the template's rules.
STUDIO_IMAGE_ACCOUNTS = {
    "us-east-1": "885854791233",
    "us-east-2": "037914896644",
    "us-west-1": "053634841547",
    "us-west-2": "542918446943",
    "ap-northeast-1": "010972774902",
    "ap-northeast-2": "064688005998",
    "ap-south-1": "245090515133",
    "ap-southeast-1": "022667117163",
    "ap-southeast-2": "648430277019",
    "ca-central-1": "481561238223",
    "eu-central-1": "545423591354",
    "eu-north-1": "175620155138",
    "eu-west-1": "819792524951",
    "eu-west-2": "021081402939",
    "eu-west-3": "856416204555",
    "sa-east-1": "567556641782",
}


def studio_image_mapping() -> str:
    rows = "".join(f'    {r}: {{Account: "{a}"}}\n' for r, a in STUDIO_IMAGE_ACCOUNTS.items())
    return f"  StudioImage:\n{rows}"


def studio_image_rule() -> str:
    regions = ", ".join(STUDIO_IMAGE_ACCOUNTS)
    why = (
        f"WithStudio=true pins the SageMaker Distribution image (tested: {STUDIO_IMAGE_VERSION}), whose ARN is known "
        f"here for {regions}: deploy in one of them, or add the region to STUDIO_IMAGE_ACCOUNTS in "
        f"infra/workshop_account.py."
    )
    return f"""\
  StudioImageInThisRegion:
    RuleCondition: !Equals [!Ref WithStudio, "true"]
    Assertions:
      - Assert: !Contains [[{regions}], !Ref AWS::Region]
        AssertDescription: "{why}"
"""


def studio_image_spec() -> str:
    # CloudFormation's ResourceSpec has no SageMakerImageVersionAlias (the API has): the image is pinned here, its
    # version by the facilitator's T-1 check (docs/facilitator.md) until CloudFormation takes the alias
    return """\
            SageMakerImageArn: !Sub
              - "arn:${AWS::Partition}:sagemaker:${AWS::Region}:${Account}:image/sagemaker-distribution-cpu"
              - Account: !FindInMap [StudioImage, !Ref AWS::Region, Account]
"""


# --- The guardrails (helpers/guardrails.py) and the attendees' policy ------------------------------------------------
def guardrails_setting() -> str:
    """The lifecycle script's line that tells the preflight this account has the guardrails."""
    return f'            echo "export {guardrails.GUARDRAILS_ENV}={guardrails.stack_value()}"\n'


def guardrails_output() -> str:
    return f"""\
  Guardrails:
    Description: {guardrails.GUARDRAILS_ENV} (the training types and the longest runtime the attendee role may launch)
    Value: "{guardrails.stack_value()}"
"""


ARN = "arn:${AWS::Partition}"
SM = f"{ARN}:sagemaker:${{AWS::Region}}:${{AWS::AccountId}}"
ME = "${!aws:SourceIdentity}"  # the attendee: their Studio user profile name, or their laptop session's source identity
LOG_GROUP = f"{ARN}:logs:${{AWS::Region}}:${{AWS::AccountId}}:log-group:/aws/sagemaker/TrainingJobs"


def sub(text: str) -> dict | str:
    """``text`` as CloudFormation needs it: through Fn::Sub when it names a template value; the policy variables it
    escapes (``${!aws:SourceIdentity}``) as IAM reads them."""
    plain = text.replace("${!", "${")
    return {"Fn::Sub": text} if re.search(r"\$\{(?!!)", text) else plain


def statement(sid: str, actions: list[str], resource, condition: dict | None = None, effect: str = "Allow") -> dict:
    out = {"Sid": sid, "Effect": effect, "Action": actions if len(actions) > 1 else actions[0], "Resource": resource}
    return out | ({"Condition": condition} if condition else {})


def deny(sid: str, actions: list[str], not_resource, condition: dict) -> dict:
    """A Deny of ``actions`` for anyone (a bucket policy's statement) outside ``not_resource``, when ``condition``."""
    return {"Sid": sid, "Effect": "Deny", "Principal": "*", "Action": actions, "NotResource": not_resource} | {
        "Condition": condition
    }


BUCKET = "${WorkshopBucket.Arn}"
JOB = f"${{!aws:PrincipalTag/{ATTENDEE_TAG}}}"  # a job's attendee: its job role's tag (set by the template)
READ = ["s3:GetObject"]
WRITE = ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
FSX_DIRECTORY = {"Fn::If": ["CreateFsx", {"Fn::Sub": "/${FileSystem.LustreMountName}/${!aws:SourceIdentity}/*"}, ""]}
FSX_ID = {"Fn::If": ["CreateFsx", {"Ref": "FileSystem"}, ""]}
# A job in the VPC: only in the attendees' jobs' security group, which has no rule among its members (no job reaches
# another's hosts); without WithFsx no VPC job at all (no group is named "none")
JOBS_SECURITY_GROUPS = {"Fn::If": ["CreateFsx", [{"Ref": "JobsSecurityGroup"}], ["none"]]}
# The tags an attendee's job may carry: the helpers' two (helpers.aws.build), and the ones Studio adds to what a space
# launches. A request with any other key is refused, so a job holds at most these five and the enforcer's tag fits
# under SageMaker's 50.
JOB_TAG_KEYS = [
    ATTENDEE_TAG,
    "workshop-lab",
    "sagemaker:domain-arn",
    "sagemaker:user-profile-arn",
    "sagemaker:space-arn",
]


def job_role_arn(who: str = ME) -> dict | str:
    return sub(f"{ARN}:iam::${{AWS::AccountId}}:role{JOB_ROLE_PATH}{who}/*")


def prefix_statements(sid: str, who: str) -> list[dict]:
    """``who``'s own prefix (read, write, list), and the shared data (read, list)."""
    return [
        statement(f"{sid}OwnPrefixObjects", READ + WRITE, sub(f"{BUCKET}/{who}/*")),
        statement(f"{sid}SharedData", READ, sub(f"{BUCKET}/{SHARED_PREFIX}/*")),
        statement(
            f"{sid}OwnPrefixListing",
            ["s3:ListBucket"],
            sub(BUCKET),
            {"StringLike": {"s3:prefix": [sub(who), sub(f"{who}/*"), f"{SHARED_PREFIX}/*"]}},
        ),
    ]


def attendee_statements() -> list[dict]:
    """What an attendee may do, wherever they work: their own prefix and jobs, within the guardrails."""
    mine = {"StringEquals": {f"aws:ResourceTag/{ATTENDEE_TAG}": sub(ME)}}
    return [
        *prefix_statements("", ME),
        statement("BucketLookup", ["s3:ListAllMyBuckets"], "*"),
        statement(
            "CreateOwnJobsWithinTheGuardrails",
            ["sagemaker:CreateTrainingJob"],
            sub(f"{SM}:training-job/{ME}-*"),
            {
                "StringEquals": {f"aws:RequestTag/{ATTENDEE_TAG}": sub(ME)},
                "ForAllValues:StringEquals": {
                    "sagemaker:InstanceTypes": list(guardrails.TRAINING_INSTANCE_TYPES),
                    "aws:TagKeys": JOB_TAG_KEYS,
                    "sagemaker:VpcSecurityGroupIds": JOBS_SECURITY_GROUPS,
                },
                "Null": {"sagemaker:InstanceTypes": "false", "sagemaker:MaxRuntimeInSeconds": "false"},
                "NumericLessThanEquals": {"sagemaker:MaxRuntimeInSeconds": str(guardrails.EVENT_MAX_RUNTIME_S)},
                # a warm pool bills after the job, outside MaxRuntime: lab 08's, and no longer
                "NumericLessThanEqualsIfExists": {"sagemaker:KeepAlivePeriod": str(MAX_WARM_POOL_S)},
                # an FSx channel: read-only, only the attendee's own directory of the template's file system, and no
                # way out of it (the key holds one channel's path: the enforcer checks every channel)
                "StringEqualsIfExists": {"sagemaker:FileSystemAccessMode": "ro", "sagemaker:FileSystemId": FSX_ID},
                "StringLikeIfExists": {"sagemaker:FileSystemDirectoryPath": FSX_DIRECTORY},
                "StringNotLikeIfExists": {"sagemaker:FileSystemDirectoryPath": "*..*"},
            },
        ),
        statement(
            "TagOwnJobsOnCreate",
            ["sagemaker:AddTags"],
            sub(f"{SM}:training-job/{ME}-*"),
            {"Null": {"sagemaker:TaggingAction": "false"}, "ForAllValues:StringEquals": {"aws:TagKeys": JOB_TAG_KEYS}},
        ),
        statement(
            "FollowAndStopOwnJobs",
            ["sagemaker:DescribeTrainingJob", "sagemaker:StopTrainingJob"],
            sub(f"{SM}:training-job/*"),
            mine,
        ),
        # leftovers.release_warm_pools(): a keep-alive period of 0 ends the attendee's own warm pool, and nothing else
        statement(
            "ReleaseOwnWarmPools",
            ["sagemaker:UpdateTrainingJob"],
            sub(f"{SM}:training-job/*"),
            mine
            | {
                "NumericEquals": {"sagemaker:KeepAlivePeriod": "0"},
                "Null": {
                    "sagemaker:KeepAlivePeriod": "false",
                    "sagemaker:InstanceTypes": "true",
                    "sagemaker:EnableRemoteDebug": "true",
                },
            },
        ),
        statement("ListJobs", ["sagemaker:ListTrainingJobs"], "*"),
        statement("OwnJobTags", ["sagemaker:ListTags"], sub(f"{SM}:training-job/{ME}-*")),
        statement(
            "PassOnlyTheirOwnJobRole",
            ["iam:PassRole"],
            job_role_arn(),
            {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}},
        ),
        statement("SdkChecks", ["iam:GetRole", "iam:SimulatePrincipalPolicy"], job_role_arn()),
        # how a space's set-up and the helpers find the attendee's role: its path holds the attendee's name
        statement("FindTheirJobRole", ["iam:ListRoles"], "*"),
        statement("OwnJobLogs", ["logs:GetLogEvents"], sub(f"{LOG_GROUP}:log-stream:{ME}-*")),
        statement("JobLogStreams", ["logs:DescribeLogStreams"], sub(f"{LOG_GROUP}:*")),
        statement(
            "MetricsAndQuotas",
            [
                "cloudwatch:GetMetricData",
                "cloudwatch:ListMetrics",
                "servicequotas:GetServiceQuota",
                "servicequotas:GetAWSDefaultServiceQuota",
                "servicequotas:ListAWSDefaultServiceQuotas",
                "servicequotas:ListServiceQuotas",
            ],
            "*",
        ),
    ]


def job_statements() -> list[dict]:
    """What an attendee's jobs run as (one role per attendee, tagged with the attendee's name): that attendee's prefix
    (read-only on the shared data), their own jobs' log streams, the images, and with WithFsx the VPC's interfaces and
    the file system's description. Nothing that creates jobs or passes roles."""
    return [
        *prefix_statements("Jobs", JOB),
        statement("JobsBucketLocation", ["s3:GetBucketLocation"], sub(BUCKET)),
        statement(
            "TrainingImages",
            ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
            sub(f"{ARN}:ecr:*:*:repository/*"),
        ),
        statement("TrainingImagesLogin", ["ecr:GetAuthorizationToken"], "*"),
        statement("JobLogGroup", ["logs:CreateLogGroup", "logs:DescribeLogStreams"], sub(f"{LOG_GROUP}:*")),
        statement(
            "OwnJobLogStreams",
            ["logs:CreateLogStream", "logs:PutLogEvents"],
            sub(f"{LOG_GROUP}:log-stream:{JOB}-*"),
        ),
        # SageMaker publishes a job's instance metrics as its role, into this namespace (lab 07 reads them);
        # CloudWatch has no condition key for a metric's dimensions
        statement(
            "JobMetrics",
            ["cloudwatch:PutMetricData"],
            "*",
            {"StringEquals": {"cloudwatch:namespace": "/aws/sagemaker/TrainingJobs"}},
        ),
        *vpc_statements(),
    ]


def vpc_statements() -> list[dict]:
    """With WithFsx, a job's interfaces in the template's VPC, and the file system's description (fsx:Describe*
    takes no resource: "*")."""
    ec2 = f"{ARN}:ec2:${{AWS::Region}}:${{AWS::AccountId}}"
    vpc = sub(f"{ec2}:vpc/${{Vpc}}")
    parts = [
        statement(
            "JobsDescribeTheVpc",
            [
                "ec2:DescribeNetworkInterfaces",
                "ec2:DescribeVpcs",
                "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets",
                "ec2:DescribeSecurityGroups",
            ],
            "*",
        ),
        statement(
            "JobsInTheVpc",
            [
                "ec2:CreateNetworkInterfacePermission",
                "ec2:DeleteNetworkInterface",
                "ec2:DeleteNetworkInterfacePermission",
            ],
            "*",
            {"ArnEquals": {"ec2:Vpc": vpc}},
        ),
        # a job's interface: in a subnet of the template's VPC, and only in the jobs' security group (the interface
        # being made carries no ec2:Vpc key, hence IfExists: the subnet and the group carry it)
        statement(
            "JobInterfaces",
            ["ec2:CreateNetworkInterface"],
            [
                sub(f"{ec2}:network-interface/*"),
                sub(f"{ec2}:subnet/*"),
                sub(f"{ec2}:security-group/${{JobsSecurityGroup}}"),
            ],
            {"ArnEqualsIfExists": {"ec2:Vpc": vpc}},
        ),
        statement("FsxChannel", ["fsx:DescribeFileSystems"], "*"),
    ]
    return [{"Fn::If": ["CreateFsx", s, {"Ref": "AWS::NoValue"}]} for s in parts]


def bucket_statements() -> list[dict]:
    """The bucket's own policy, a second layer under the roles' policies: TLS only; an attendee's session (its source
    identity) and an attendee's job (its role's tag) touch only that attendee's prefix and read the shared data,
    whatever an identity policy grants; the attendee role without a source identity touches nothing."""
    both = [sub(BUCKET), sub(f"{BUCKET}/*")]
    session = {"StringLike": {"aws:SourceIdentity": "attendee-*"}}
    job = {"StringLike": {f"aws:PrincipalTag/{ATTENDEE_TAG}": "attendee-*"}}
    out = [
        {
            "Sid": "TlsOnly",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": both,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    ]
    for sid, who, when in (("Attendee", ME, session), ("Job", JOB, job)):
        own, shared = sub(f"{BUCKET}/{who}/*"), sub(f"{BUCKET}/{SHARED_PREFIX}/*")
        listing = {"StringNotLike": {"s3:prefix": [sub(who), sub(f"{who}/*"), f"{SHARED_PREFIX}/*"]}}
        out += [
            deny(f"{sid}ReadsOnlyOwnAndShared", READ, [own, shared], when),
            deny(f"{sid}WritesOnlyOwn", WRITE, [own], when),
            {
                "Sid": f"{sid}ListsOnlyOwnAndShared",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "s3:ListBucket",
                "Resource": sub(BUCKET),
                "Condition": when | listing,
            },
        ]
    out.append(
        {
            "Sid": "AttendeeRoleNeedsASourceIdentity",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": both,
            "Condition": {
                "ArnLike": {"aws:PrincipalArn": sub("${AttendeeRole.Arn}")},
                "Null": {"aws:SourceIdentity": "true"},
            },
        }
    )
    return out


def studio_reading() -> list[dict]:
    """What Studio's pages list (the List calls take no resource) and describe (the domain, profiles, spaces, apps)."""
    return [
        statement(
            "StudioList",
            ["sagemaker:ListApps", "sagemaker:ListDomains", "sagemaker:ListUserProfiles", "sagemaker:ListSpaces"],
            "*",
        ),
        statement(
            "StudioDescribe",
            [
                "sagemaker:DescribeApp",
                "sagemaker:DescribeDomain",
                "sagemaker:DescribeUserProfile",
                "sagemaker:DescribeSpace",
            ],
            [sub(f"{SM}:{kind}/*") for kind in ("app", "domain", "user-profile", "space")],
        ),
    ]


def studio_statements() -> list[dict]:
    """What Studio needs to let each attendee run the one private space the template made them (AWS's policy for
    private spaces, less CreateSpace and DeleteSpace): that space only (its name and its owner, the session's source
    identity, which is the user profile's name), JupyterLab apps only, on the spaces' type only (StudioInstanceType),
    which CreateApp must name."""
    types = {"ForAllValues:StringEquals": {"sagemaker:InstanceTypes": [{"Ref": "StudioInstanceType"}]}}
    named = {"Null": {"sagemaker:InstanceTypes": "false"}}
    space = SPACE_NAME.format(ME)
    own = {
        "ArnLike": {"sagemaker:OwnerUserProfileArn": sub(f"{SM}:user-profile/*/{ME}")},
        "StringEquals": {"sagemaker:SpaceSharingType": "Private"},
    }
    return [
        *studio_reading(),
        statement(
            "StudioTagOnCreate",
            ["sagemaker:AddTags"],
            sub(f"{SM}:*/*"),
            {"Null": {"sagemaker:TaggingAction": "false"}},
        ),
        statement("StudioOwnSpaceSettings", ["sagemaker:UpdateSpace"], sub(f"{SM}:space/*/{space}"), own | types),
        statement(
            "StudioOwnSpaceApps",
            ["sagemaker:CreateApp"],
            sub(f"{SM}:app/*/{space}/jupyterlab/*"),
            own | types | named,
        ),
        statement(
            "StudioDeleteOwnApps",
            ["sagemaker:DeleteApp"],
            [sub(f"{SM}:app/*/{space}/*"), sub(f"{SM}:app/*/{ME}/*")],
        ),
    ]


class _NoAliases(yaml.SafeDumper):
    def ignore_aliases(self, data) -> bool:  # CloudFormation refuses YAML aliases
        return True


def _yaml(node, indent: int) -> str:
    text = yaml.dump(node, Dumper=_NoAliases, default_flow_style=None, sort_keys=False, width=116)
    return "".join(" " * indent + line + "\n" for line in text.splitlines())


def attendee_policies() -> str:
    document = {"Version": "2012-10-17", "Statement": attendee_statements()}
    studio = {"Version": "2012-10-17", "Statement": studio_statements()}
    return (
        "      Policies:\n        - PolicyName: workshop-attendee\n          PolicyDocument:\n"
        + _yaml(document, 12)
        + "  StudioAttendeePolicy:\n    Type: AWS::IAM::Policy\n    Condition: CreateStudio\n    Properties:\n"
        + "      PolicyName: workshop-studio-attendee\n      Roles: [!Ref AttendeeRole]\n      PolicyDocument:\n"
        + _yaml(studio, 8)
    )


def job_roles() -> str:
    """One job role per attendee, with the one policy that each role's tag makes that attendee's."""
    document = {"Version": "2012-10-17", "Statement": job_statements()}
    out = (
        "  AttendeeJobPolicy:\n    Type: AWS::IAM::ManagedPolicy\n    Properties:\n"
        "      Description: An attendee's training jobs, through the job role tagged with their name\n"
        "      PolicyDocument:\n" + _yaml(document, 8)
    )
    trust = (
        '{Version: "2012-10-17", Statement: [{Effect: Allow, Principal: {Service: sagemaker.amazonaws.com}, '
        "Action: [sts:AssumeRole, sts:SetSourceIdentity], "
        "Condition: {StringEquals: {aws:SourceAccount: !Ref AWS::AccountId}}}]}"
    )
    for n in range(1, MAX_ATTENDEES + 1):
        who, condition = PROFILE_NAME.format(n), _condition(n)
        out += f"""\
  JobRole{n:02d}:
    Type: AWS::IAM::Role
{f"    Condition: {condition}{chr(10)}" if condition else ""}\
    Properties:
      Path: !Sub "{JOB_ROLE_PATH}{who}/"
      AssumeRolePolicyDocument: {trust}
      ManagedPolicyArns: [!Ref AttendeeJobPolicy]
      Tags: [{{Key: {ATTENDEE_TAG}, Value: {who}}}, {{Key: workshop, Value: !Ref AWS::StackName}}]
"""
    return out


def bucket_policy() -> str:
    return _yaml({"Version": "2012-10-17", "Statement": bucket_statements()}, 8)


ENFORCER = Path(__file__).resolve().with_name("enforcer.py")
# AWS's resource schema for a function's inline code (ZipFile) gives 4 MB zipped (cfn-lint's copy of it); guides from
# before said 4096 characters. The guard keeps the enforcer one short read, well inside the schema's figure.
ZIPFILE_LIMIT = 16_384
SWEEP_MINUTES = 5  # how often every running job is judged again: how long a lost event can leave a job running


def enforcer() -> str:
    code = ENFORCER.read_text(encoding="utf-8")
    if len(code.encode()) > ZIPFILE_LIMIT:
        raise ValueError(f"{ENFORCER.name} is {len(code.encode())} bytes: the guard is {ZIPFILE_LIMIT}")
    body = "".join(f"          {line}\n" if line else "\n" for line in code.splitlines())
    types = ",".join(guardrails.TRAINING_INSTANCE_TYPES)
    return f"""\
  JobLimits:
    Type: AWS::Lambda::Function
    Metadata:
      checkov:
        skip:
          - id: CKV_AWS_117
            comment: >-
              Not in a VPC. It calls only SageMaker's public API; in the VPC it would need a NAT gateway or an
              interface endpoint, for nothing it reads.
          - id: CKV_AWS_173
            comment: >-
              The environment holds the limits (numbers, instance types) and the job roles' path, no secret; the
              default encryption at rest by AWS's key applies.
    Properties:
      Description: Stops a training job above the room's limits (infra/enforcer.py), then tags it with why
      Runtime: python3.12
      Handler: index.handler
      Timeout: 300  # a sweep describes every running job, backing off when SageMaker throttles it
      Role: !GetAtt JobLimitsRole.Arn
      # a call that fails after Lambda's two retries lands here, and JobLimitsFailed mails the facilitator
      DeadLetterConfig: {{TargetArn: !GetAtt JobLimitsDeadLetters.Arn}}
      ReservedConcurrentExecutions: !If [ReserveJobLimits, !Ref JobLimitsConcurrency, !Ref AWS::NoValue]
      Environment:
        Variables:
          MAX_INSTANCES_PER_JOB: "{MAX_INSTANCES_PER_JOB}"
          MAX_INSTANCES_PER_ATTENDEE: "{MAX_INSTANCES_PER_ATTENDEE}"
          INSTANCE_TYPES: "{types}"
          JOB_ROLE_PATH: !Sub "{JOB_ROLE_PATH}"
      Code:
        ZipFile: |
{body}
  JobSweep:
    Type: AWS::Events::Rule
    Properties:
      Description: Every running job and warm pool, judged again (JobLimits), so that a lost event is caught
      ScheduleExpression: rate({SWEEP_MINUTES} minutes)
      Targets:
        - Arn: !GetAtt JobLimits.Arn
          Id: job-limits-sweep
          DeadLetterConfig: {{Arn: !GetAtt JobLimitsDeadLetters.Arn}}
"""


# --- What an attendee who tries can and cannot do, and what it costs at most -----------------------------------------
@dataclass(frozen=True)
class Limit:
    """One statement the guide makes about an attendee who tries: what they try, what refuses it ("IAM", "the
    enforcer", or "nothing": it stays possible), and the tests that hold it: rows of the IAM engine's tables
    (tests/test_event_account_policies.py) or the enforcer's tests (tests/test_event_account_enforcer.py)."""

    attempt: str
    refused_by: str
    tests: tuple[str, ...]


def attendee_limits() -> tuple[Limit, ...]:
    types = " and ".join(guardrails.TRAINING_INSTANCE_TYPES)
    hours, minutes = guardrails.EVENT_MAX_RUNTIME_S // 3600, MAX_WARM_POOL_S // 60
    space = jupyterlab_instance().name
    return (
        Limit(f"launch a job on a type other than {types}", "IAM", ("A launches on ml.p4d.24xlarge",)),
        Limit(f"launch a job for more than {hours} hours", "IAM", ("A launches for 3 h",)),
        Limit(
            f"keep a warm pool more than {minutes} minutes, at launch or after",
            "IAM",
            ("A launches with a warm pool of 3600 s", "A keeps their warm pool longer (UpdateTrainingJob)"),
        ),
        Limit(
            "launch a job named or tagged as another attendee's, or with more tags than the labs' (a 51-tag job)",
            "IAM",
            ("A launches a job named as B's", "A launches a job tagged B", "A launches with 51 tags"),
        ),
        Limit(
            "pass another attendee's job role or the facilitator's",
            "IAM",
            ("A passes B's job role", "A passes the facilitator's job role"),
        ),
        Limit(
            "read, write or list another attendee's prefix, from their session or their job, or write the shared data",
            "IAM",
            ("A reads B's object from their session", "A's job reads B's input data", "A's job writes the shared data"),
        ),
        Limit(
            "describe, stop or read the log or tags of another attendee's job, or release its warm pool",
            "IAM",
            (
                "A describes B's job",
                "A stops B's job",
                "A reads B's job log",
                "A reads B's job tags",
                "A releases B's warm pool",
            ),
        ),
        Limit(
            "mount another attendee's FSx directory, climb out of their own (..), mount read-write or another file "
            "system",
            "IAM",
            (
                "A's FSx channel mounts B's directory",
                "A's FSx channel climbs out of their directory (..)",
                "A's FSx channel mounts read-write",
                "A's FSx channel mounts another file system",
            ),
        ),
        Limit(
            "run a job in another security group, whose hosts other jobs could reach (the jobs' group has no rule "
            "among its members)",
            "IAM",
            ("A launches in another security group", "A's job makes its interface in another security group"),
        ),
        Limit(
            "write metrics outside the training jobs' namespace",
            "IAM",
            ("A's job writes metrics outside the training jobs' namespace",),
        ),
        Limit(
            "create a second Studio space, or delete theirs to make another",
            "IAM",
            ("A creates a second private space", "A deletes their space, to make another"),
        ),
        Limit(
            f"run an app, or set their space, on a type other than the spaces' ({space})",
            "IAM",
            (
                "A creates an app on a larger type (ml.m5.2xlarge)",
                "A updates their space to a larger type (ml.m5.2xlarge)",
            ),
        ),
        Limit(
            "run an app outside their space, in another's, or other than JupyterLab",
            "IAM",
            (
                "A creates a JupyterLab app under their profile, outside their space",
                "A creates an app in B's space",
                "A creates a CodeEditor app (no idle shutdown)",
            ),
        ),
        Limit(
            "start a job or an app, or change their space, once the budget is spent",
            "IAM",
            (
                "A launches after the budget is spent (BudgetSpentDeny attached)",
                "A starts a space's app after the budget is spent",
                "A changes their space after the budget is spent",
            ),
        ),
        Limit(
            f"run more than {MAX_INSTANCES_PER_JOB} instances in one job, counted as InstanceCount, InstanceGroups, "
            "the largest of InstancePreferences, and one a debugger or profiler rule evaluator",
            "the enforcer",
            (
                "test_an_instance_groups_job_and_the_same_attendee_s_later_plain_job_are_each_stopped",
                "test_instance_preferences_and_rule_evaluators_are_counted",
            ),
        ),
        Limit(
            f"hold more than {MAX_INSTANCES_PER_ATTENDEE} instances at once, running, stopping or in warm pools",
            "the enforcer",
            (
                "test_lab_08_s_warm_pool_counts_until_released",
                "test_a_warm_pool_over_the_limit_is_released_by_the_sweep",
            ),
        ),
        Limit(
            "keep a job over the limits running by making its stop tag fail (50 tags), by a shape the enforcer cannot "
            "count, or because its start's event was lost",
            "the enforcer",
            (
                "test_a_ten_instance_job_with_50_tags_is_stopped_though_no_tag_fits",
                "test_a_job_that_cannot_be_counted_is_stopped",
                "test_an_earlier_job_that_cannot_be_described_stops_the_new_one",
                "test_a_lost_event_is_caught_by_the_next_sweep",
            ),
        ),
        Limit(
            "mount a second FSx channel, another attendee's (IAM's FSx keys are single-valued)",
            "the enforcer",
            (
                "test_an_fsx_channel_mounts_only_the_attendee_s_own_directory_once",
                "A launches a second FSx channel, B's",
            ),
        ),
        Limit(
            "see every job's name and every log stream's name (ListTrainingJobs and DescribeLogStreams take no "
            "narrower resource or condition)",
            "nothing",
            ("A lists every job's name", "A lists every job's log stream names"),
        ),
        Limit(
            "write metrics under another job's Host dimension, misleading lab 07's graph of it (CloudWatch has no "
            "condition key for a dimension)",
            "nothing",
            ("A's job writes metrics under B's job's Host dimension",),
        ),
        Limit(
            "read another attendee's job metrics (GetMetricData takes no resource or condition), or describe their "
            "Studio space and app (granted on every space and app on purpose: Studio's pages describe them all; a "
            "description holds settings, no data)",
            "nothing",
            ("A reads B's job's metrics", "A describes B's space", "A describes B's app"),
        ),
    )


def attendee_limits_markdown() -> str:
    rows = [f"| {x.attempt} | {x.refused_by} | {'; '.join(f'`{t}`' for t in x.tests)} |" for x in attendee_limits()]
    return "\n".join(["| An attendee who tries to ... | is refused by | held by |", "|---|---|---|", *rows])


def hourly(name: str) -> float:
    return instances.lookup(name).price_per_hour


def attendee_ceiling_usd_per_h() -> float:
    """The most one attendee holds an hour on demand, once the enforcer has acted: MAX_INSTANCES_PER_ATTENDEE instances
    of the dearest type they may launch (their running, stopping and warm-pooled jobs and rule evaluators together),
    and their one space's app on the spaces' type."""
    dearest = max(guardrails.TRAINING_INSTANCE_TYPES, key=hourly)
    return MAX_INSTANCES_PER_ATTENDEE * hourly(dearest) + hourly(jupyterlab_instance().name)


def attendee_ceiling_sentence() -> str:
    dearest = max(guardrails.TRAINING_INSTANCE_TYPES, key=hourly)
    space = jupyterlab_instance().name
    return (
        f"One attendee's ceiling: {MAX_INSTANCES_PER_ATTENDEE} instances x ${hourly(dearest):.2f}/h ({dearest}, the "
        f"dearest they may launch; their running, stopping and warm-pooled jobs and rule evaluators together) + 1 "
        f"JupyterLab app x ${hourly(space):.2f}/h ({space}, in their one space) = "
        f"${attendee_ceiling_usd_per_h():.2f}/h on demand (spot bills less). A job above the limits runs until the "
        f"enforcer stops it: seconds after it starts, or at the next sweep (every {SWEEP_MINUTES} minutes) if its "
        f"start's event is lost, and SageMaker then takes up to 2 minutes to stop it."
    )


# --- AWS Workshop Studio: the same account, provisioned per participant ---------------------------------------------
# Workshop Studio gives each participant an account of their own and deploys the template in it: the account is the
# isolation. Its participant role signs in to the console with no source identity, so the attendee policy (keyed on
# it) would refuse it everything; instead the participant opens Studio as a profile of the domain and works there, as
# the attendee role with that profile's source identity, within the guardrails. The participant role itself only
# opens Studio and follows jobs and logs: it creates no job and passes no role, so nothing gets round the guardrails.
# Its policy file cannot name the stack's resources, so they are matched by the names CloudFormation gives them.
WS_NAMES = {
    "${AWS::Partition}": "aws",
    "${AWS::Region}": "*",
    "${AWS::AccountId}": "*",
    "${WorkshopBucket.Arn}": "arn:aws:s3:::*-workshopbucket-*",
    "${ExecutionRole.Arn}": "arn:aws:iam::*:role/*-ExecutionRole-*",
    "${AWS::StackName}": "*",
}
WS_DAY_H = 8  # a full day's agenda: the participant's space runs that long
# A participant's budget: the labs' real jobs for one attendee, on demand, and their space for the day, twice over
# (a retry of each), rounded up to $10
WS_BUDGET_USD = (
    math.ceil(
        2
        * (
            sum(t.count * hourly(t.instance_type) * t.minutes / 60 for lab in LABS for t in lab.targets if t.launch)
            + WS_DAY_H * hourly(jupyterlab_instance().name)
        )
        / 10
    )
    * 10
)
WS_PARAMETERS = {
    "WithStudio": "true",
    "Attendees": "5",
    "WithFsx": "false",
    "BudgetUsd": str(WS_BUDGET_USD),
    # a participant's new account may have a Lambda concurrency of 10, which must all stay unreserved
    "JobLimitsConcurrency": "0",
}
WS_REGION = "us-east-1"


def _resolve(node):
    if isinstance(node, dict) and set(node) == {"Fn::Sub"}:
        text = node["Fn::Sub"]
        for name, value in WS_NAMES.items():
            text = text.replace(name, value)
        text = text.replace("${!", "${")  # an escaped policy variable
        assert "${" not in text.replace("${aws:", "").replace("${sagemaker:", ""), text
        return text
    if isinstance(node, dict):
        return {k: _resolve(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v) for v in node]
    return node


def participant_statements() -> list[dict]:
    """What a Workshop Studio participant's console role needs: open Studio as a profile, follow jobs and logs."""
    return [
        *studio_reading(),  # the console's Studio pages list and describe the domain, profiles, spaces and apps
        statement("OpenStudioAsAProfile", ["sagemaker:CreatePresignedDomainUrl"], sub(f"{SM}:user-profile/*/*")),
        statement("FollowJobs", ["sagemaker:DescribeTrainingJob", "sagemaker:ListTags"], sub(f"{SM}:training-job/*")),
        statement("ListJobs", ["sagemaker:ListTrainingJobs"], "*"),
        statement(
            "JobLogs", ["logs:GetLogEvents", "logs:DescribeLogStreams", "logs:FilterLogEvents"], sub(f"{LOG_GROUP}:*")
        ),
        # the console's log pages list the groups first (DescribeLogGroups takes no resource)
        statement("FindLogGroups", ["logs:DescribeLogGroups"], "*"),
    ]


def participant_policy() -> str:
    document = {"Version": "2012-10-17", "Statement": _resolve(participant_statements())}
    return json.dumps(document, indent=2) + "\n"


def contentspec() -> str:
    params = "".join(
        f'        - templateParameter: {k}\n          defaultValue: "{v}"\n' for k, v in WS_PARAMETERS.items()
    )
    return f"""\
# AWS Workshop Studio's packaging of the event account: written by `python infra/workshop_account.py --write` from
# infra/workshop-account.yaml (a copy in static/) and helpers/guardrails.py; tests/test_event_account.py holds it.
version: 2.0
defaultLocaleCode: en-US
localeCodes:
  - en-US
awsAccountConfig:
  accountSources:
    - WorkshopStudio
  participantRole:
    iamPolicies:
      - static/iam_policy.json
  regionConfiguration:
    minAccessibleRegions: 1
    maxAccessibleRegions: 1
    accessibleRegions:
      required:
        - {WS_REGION}
    deployableRegions:
      required:
        - {WS_REGION}
infrastructure:
  cloudformationTemplates:
    - templateLocation: static/workshop-account.yaml
      label: The distributed-training workshop's event account
      parameters:
{params}"""


CONTENT = REPO / "content"


def participant_page() -> str:
    """Workshop Studio's opening page (content/index.en.md): what a participant does in their own account."""
    types = ", ".join(guardrails.TRAINING_INSTANCE_TYPES)
    return f"""\
---
title: "Distributed training on Amazon SageMaker"
weight: 0
---

<!-- Written by `python infra/workshop_account.py --write`: edit the generator, not this page. -->

This event gives you an AWS account of your own, with the workshop's stack already deployed in {WS_REGION}: a
SageMaker Studio domain whose profiles are the attendees of the labs, a bucket, and the roles the labs' jobs run as.

1. **Open Studio as a profile.** In the console: SageMaker AI, Domains, the stack's domain, User profiles,
   `{PROFILE_NAME.format(1)}`, Launch, Studio. You now work as that attendee: your S3 prefix, your jobs and your
   logs are `{PROFILE_NAME.format(1)}`'s, and your jobs run as `{PROFILE_NAME.format(1)}`'s own job role.
2. **Run your space.** JupyterLab, `{SPACE_NAME.format(PROFILE_NAME.format(1))}` (the stack made it, private: one
   space each), Run space: its type and storage are already chosen. Its set-up runs in the background and logs to
   `~/workshop-setup.log`.
3. **Get the workshop.** The event's stack has no repository to clone: in the space's terminal, clone the workshop
   repository your facilitator gives you into your home directory, then `cd` into it and run `make studio` (it adds
   only what the image lacks). Open `labs/` and the first notebook with the Python 3 kernel.
4. **What the account allows.** IAM refuses a training job on other types than {types}, longer than
   {guardrails.EVENT_MAX_RUNTIME_S // 3600} hours, with a warm pool longer than {MAX_WARM_POOL_S // 60} minutes, or
   with tags other than the labs'; and a JupyterLab app outside your space or on another type than
   {jupyterlab_instance().name}. The stack's enforcer stops, seconds after it starts (or within
   {SWEEP_MINUTES} minutes), a job of more than {MAX_INSTANCES_PER_JOB} instances, or one that takes you over
   {MAX_INSTANCES_PER_ATTENDEE} at once (running, stopping and warm-pooled jobs count), and tags it with why. The
   account's budget (${WS_BUDGET_USD}) stops new jobs and apps when it is spent. Each lab's last core cell lists your
   running jobs (`leftovers.cleanup()` stops them); `leftovers.release_warm_pools()` ends your warm pool early.

The console role you signed in with only opens Studio and follows jobs and logs: it creates no job itself.
"""


def packaging() -> dict[Path, str]:
    """Workshop Studio's files and what they hold."""
    return {
        CONTENT / "index.en.md": participant_page(),
        CONTENTSPEC: contentspec(),
        STATIC / "iam_policy.json": participant_policy(),
        STATIC / "workshop-account.yaml": render(TEMPLATE.read_text(encoding="utf-8")),
    }


BLOCKS = {
    "studio-parameters": studio_parameters,
    "studio-attendee-conditions": studio_attendee_conditions,
    "studio-attendee-profiles": studio_attendee_profiles,
    "studio-image-mapping": studio_image_mapping,
    "studio-image-rule": studio_image_rule,
    "studio-image-spec": studio_image_spec,
    "guardrails-setting": guardrails_setting,
    "guardrails-output": guardrails_output,
    "attendee-policies": attendee_policies,
    "attendee-job-roles": job_roles,
    "bucket-policy": bucket_policy,
    "enforcer": enforcer,
}


def render(text: str) -> str:
    """``text`` with every ``# generated:NAME`` ... ``# /generated:NAME`` block rewritten."""
    return generated.rewrite(text, BLOCKS, generated.YAML, "the template")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python infra/workshop_account.py", description=__doc__.split("\n\n")[0])
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--write", action="store_true", help=f"rewrite the generated blocks of {TEMPLATE.name}")
    what.add_argument("--check", action="store_true", help="exit 1 if the template's generated blocks are stale")
    a = ap.parse_args(argv)
    text = TEMPLATE.read_text(encoding="utf-8")
    if a.check:
        stale = [TEMPLATE] if render(text) != text else []
        stale += [p for p, body in packaging().items() if not p.exists() or p.read_text(encoding="utf-8") != body]
        for path in stale:
            print(f"{path.relative_to(REPO)} is stale: run python infra/workshop_account.py --write", file=sys.stderr)
        return 1 if stale else 0
    TEMPLATE.write_text(render(text), encoding="utf-8")
    STATIC.mkdir(exist_ok=True)
    CONTENT.mkdir(exist_ok=True)
    for path, body in packaging().items():
        path.write_text(body, encoding="utf-8")
    print(f"wrote {TEMPLATE.relative_to(REPO)}, {CONTENTSPEC.name}, {CONTENT.name}/ and {STATIC.name}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
