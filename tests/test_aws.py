"""AWS discovery, quotas and cleanup against the offline session: every call validated by botocore, none sent.

Each test runs inside ``fake_aws``: fake credentials, SDK telemetry off, and a network guard that fails the test if
anything tried to open a connection (even where a library swallowed the error).
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse

import pytest

from course.event import studio_apps
from helpers.aws import account as aws
from helpers.aws import leftovers, quotas, settings, setup_errors
from helpers.job_spec import Job
from helpers.jobs import run_job
from helpers.targets import resolve
from sagemaker_standin import offline_account as aws_offline
from sagemaker_standin import sandbox
from sagemaker_standin.api_answers import ClientErrorAnswer, ScriptedJob


@pytest.fixture
def no_studio(monkeypatch, tmp_path):
    """This machine is a laptop whatever it is: no Studio metadata, no attendee or role from the environment."""
    monkeypatch.setattr(settings, "STUDIO_METADATA", tmp_path / "no-such-metadata.json")
    for name in (settings.ATTENDEE_ENV, settings.BUCKET_ENV, *settings.ROLE_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_aws(no_studio, monkeypatch):
    monkeypatch.setattr(aws, "_quota_codes", {})  # each test finds its own quota codes
    monkeypatch.setattr(studio_apps, "_codes", {})  # the Studio app quota's too
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        yield aws_offline.OfflineAWS()
    assert not attempts, f"something tried the network: {attempts}"


@pytest.fixture
def studio(monkeypatch, tmp_path):
    meta = tmp_path / "resource-metadata.json"
    meta.write_text(
        json.dumps(
            {
                "ExecutionRoleArn": "arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole-studio",
                "UserProfileName": "alice-smith",  # Studio profile names: letters, digits and dashes
                "DomainId": "d-offline",
                "ResourceArn": "arn:aws:sagemaker:eu-west-1:111122223333:space/d-offline/alice",
            }
        )
    )
    monkeypatch.setattr(settings, "STUDIO_METADATA", meta)
    return meta


# ------------------------------------------------------------------------------------------ checks before any call
@pytest.mark.parametrize(
    "role",
    [
        "arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole-1",
        "arn:aws-cn:iam::111122223333:role/Trainer",
        " arn:aws:iam::111122223333:role/x ",
    ],
)
def test_role_arns_are_accepted(role):
    assert settings.require_role_arn(role) == role.strip()


def test_a_bare_role_name_gets_its_arn_spelled_out():
    with pytest.raises(setup_errors.RoleError, match=r"role='arn:aws:iam::<account-id>:role/MySageMakerRole'"):
        settings.require_role_arn("MySageMakerRole")


@pytest.mark.parametrize(
    "role, says",
    [
        ("arn:aws:iam::111122223333:user/alice", "IAM user, not a role"),
        ("arn:aws:iam::1234:role/x", "12-digit"),
        ("", "not an IAM role ARN"),
    ],
)
def test_other_role_mistakes(role, says):
    with pytest.raises(setup_errors.RoleError, match=says):
        settings.require_role_arn(role)


@pytest.mark.parametrize(
    "given, name", [("my-bucket", "my-bucket"), ("s3://my-bucket/some/prefix", "my-bucket"), ("a.b-c1", "a.b-c1")]
)
def test_bucket_names(given, name):
    assert settings.require_bucket_name(given) == name


EXAMPLE_BUCKET = "sagemaker-us-east-1-123456789012"


@pytest.mark.parametrize(
    "bad, suggested",
    [
        ("My_Bucket", "my-bucket"),
        ("s3://Team Data/prefix", "team-data"),
        ("-leading", "leading"),
        ("two..dots", "two.dots"),
        ("192.168.5.4", "bucket-192-168-5-4"),  # S3 refuses a name shaped like an IP address
        ("xn--data", "data"),  # and its reserved prefixes and suffixes
        ("amzn-s3-demo-bucket", "bucket"),
        ("data-s3alias", "data"),
        ("logs.mrap", "logs"),
        ("x" * 64, "x" * 63),
        ("ab", EXAMPLE_BUCKET),  # nothing of it left to keep: an example
        ("", EXAMPLE_BUCKET),
        ("s3://", EXAMPLE_BUCKET),
        ("sthree-x", EXAMPLE_BUCKET),
    ],
)
def test_a_refused_bucket_name_comes_with_one_the_same_check_accepts(bad, suggested):
    with pytest.raises(setup_errors.BucketError) as refused:
        settings.require_bucket_name(bad)
    said = re.search(r"bucket='([^']*)'", str(refused.value)).group(1)
    assert said == suggested != bad
    assert settings.require_bucket_name(said) == said


def test_attendee_prefix_order_and_shape(monkeypatch):
    monkeypatch.delenv(settings.ATTENDEE_ENV, raising=False)
    assert settings.resolve_attendee("alice", {}) == settings.Attendee("alice", "argument")  # a prefix as it is
    assert settings.resolve_attendee("Alice Smith!", {}) == settings.Attendee("alice-smith-7b43", "argument")
    monkeypatch.setenv(settings.ATTENDEE_ENV, "bob")
    bob = settings.Attendee("bob", settings.ATTENDEE_ENV)
    assert settings.resolve_attendee(None, {"UserProfileName": "carol"}) == bob
    monkeypatch.delenv(settings.ATTENDEE_ENV)
    assert settings.resolve_attendee(None, {"UserProfileName": "carol"}).source == "Studio user profile"
    assert settings.sanitize_attendee("42 Team") == "a42-team-023b"  # job names start with a letter here
    assert len(settings.sanitize_attendee("a" * 40)) == 16
    with pytest.raises(setup_errors.AwsSetupError, match="no letters or digits"):
        settings.resolve_attendee("!!!", {})


@pytest.mark.parametrize(
    "one, other",
    [
        ("christina.anderson", "christina.andersen"),  # differ past the 16-character limit
        ("alexandra.williams", "alexandra.williamson"),  # one a prefix of the other
        ("alice.smith", "alice-smith"),  # the same once cleaned
        ("Bob", "bob"),
    ],
)
def test_two_attendees_are_two_prefixes_however_alike_their_names(one, other):
    a, b = settings.sanitize_attendee(one), settings.sanitize_attendee(other)
    assert a != b, f"{one!r} and {other!r} would share one prefix, {a!r}"  # cleanup matches the exact tag
    for prefix in (a, b):
        assert re.fullmatch(r"[a-z][a-z0-9-]{0,15}", prefix) and not prefix.endswith("-")
    assert settings.sanitize_attendee(one) == a  # stable: the same name, the same prefix, in every session


def test_a_shared_login_name_is_flagged(monkeypatch):
    monkeypatch.delenv(settings.ATTENDEE_ENV, raising=False)
    monkeypatch.setattr(settings.getpass, "getuser", lambda: "sagemaker-user")
    who = settings.resolve_attendee(None, {})
    assert who.name == "sagemaker-user" and who.shared
    assert not settings.resolve_attendee("sagemaker-user", {}).shared  # chosen on purpose: the learner's call


# ---------------------------------------------------------------------------------------------------- discovery
def test_laptop_with_an_assumed_role(fake_aws):
    ctx = aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert (ctx.where, ctx.region, ctx.account) == ("laptop", "us-east-1", sandbox.ACCOUNT)
    assert ctx.role_arn == fake_aws.role_arn  # found through iam:GetRole from the assumed-role identity
    assert ctx.bucket == f"sagemaker-us-east-1-{sandbox.ACCOUNT}"  # the SDK's default bucket name
    assert ctx.attendee == settings.Attendee("alice", "argument")
    assert list(fake_aws.summary()) == ["sts.GetCallerIdentity", "iam.GetRole", "s3.HeadBucket"]
    assert "AKIA" not in repr(ctx) and "secret" not in repr(ctx)


def test_role_and_bucket_from_the_environment_win_over_discovery(fake_aws, monkeypatch):
    monkeypatch.setenv("WORKSHOP_ROLE_ARN", "arn:aws:iam::111122223333:role/Workshop")
    monkeypatch.setenv(settings.BUCKET_ENV, "s3://workshop-bucket")
    ctx = aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert (ctx.role_arn, ctx.bucket) == ("arn:aws:iam::111122223333:role/Workshop", "workshop-bucket")
    assert "iam.GetRole" not in fake_aws.summary()
    assert fake_aws.request("HeadBucket") == {"Bucket": "workshop-bucket"}


def test_without_iam_get_role_the_service_role_path_is_assumed(fake_aws):
    fake_aws.respond("GetRole", ClientErrorAnswer("AccessDenied", "not allowed", 403))
    fake_aws.respond(
        "GetCallerIdentity",
        {
            "Account": "111122223333",
            "UserId": "x",
            "Arn": "arn:aws:sts::111122223333:assumed-role/AmazonSageMaker-ExecutionRole-2026/SageMaker",
        },
    )
    ctx = aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert ctx.role_arn == "arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole-2026"


SSO_CALLER = "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_AdministratorAccess_0a1b2c/alice@example.com"
TRUST_SAGEMAKER = {
    "Version": "2012-10-17",
    "Statement": [{"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:AssumeRole"}],
}
TRUST_SSO = {
    "Version": "2012-10-17",
    "Statement": [
        {
            "Effect": "Allow",
            "Action": ["sts:AssumeRoleWithSAML", "sts:TagSession"],
            "Principal": {"Federated": "arn:aws:iam::111122223333:saml-provider/AWSSSO_0a1b2c_DO_NOT_DELETE"},
        }
    ],
}


def _caller(fake, arn: str, trust: dict) -> None:
    """Credentials of the assumed role ``arn``, whose trust policy IAM reports as ``trust`` (URL-encoded, as IAM
    sends it)."""
    name = arn.split(":assumed-role/")[1].split("/")[0]
    fake.respond("GetCallerIdentity", {"Account": "111122223333", "UserId": "AROA:alice", "Arn": arn})
    fake.respond(
        "GetRole",
        {
            "Role": {
                "RoleName": name,
                "Arn": f"arn:aws:iam::111122223333:role/{name}",
                "Path": "/",
                "RoleId": "AROAEXAMPLE",
                "CreateDate": "2026-01-01T00:00:00Z",
                "AssumeRolePolicyDocument": urllib.parse.quote(json.dumps(trust)),
            }
        },
    )


def test_an_sso_role_that_sagemaker_cannot_assume_is_refused_before_any_upload(fake_aws):
    _caller(fake_aws, SSO_CALLER, TRUST_SSO)
    with pytest.raises(
        setup_errors.RoleError,
        match="AWSReservedSSO_AdministratorAccess_0a1b2c, which SageMaker cannot "
        "assume.*WORKSHOP_ROLE_ARN to a SageMaker execution role",
    ):
        aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert list(fake_aws.summary()) == ["sts.GetCallerIdentity", "iam.GetRole"]  # refused before the bucket
    # a role given explicitly is the learner's choice: no trust lookup
    ctx = aws.discover(role="arn:aws:iam::111122223333:role/Trainer", boto_session=fake_aws.boto_session)
    assert ctx.role_arn == "arn:aws:iam::111122223333:role/Trainer" and len(fake_aws.calls_to("GetRole")) == 1


def test_an_assumed_role_that_trusts_sagemaker_is_used(fake_aws):
    caller = "arn:aws:sts::111122223333:assumed-role/WorkshopTrainer/i-0123456789"
    services = ["ec2.amazonaws.com", "sagemaker.amazonaws.com"]
    _caller(
        fake_aws,
        caller,
        {
            "Statement": {
                "Effect": "Allow",
                "Principal": {"Service": services},
                "Action": ["sts:AssumeRole", "sts:SetSourceIdentity"],
            }
        },
    )
    assert aws.discover(boto_session=fake_aws.boto_session).role_arn == "arn:aws:iam::111122223333:role/WorkshopTrainer"


def test_an_unreadable_trust_policy_is_refused_unless_sagemaker_made_the_role(fake_aws):
    fake_aws.respond("GetRole", ClientErrorAnswer("AccessDenied", "not allowed", 403))
    fake_aws.respond("GetCallerIdentity", {"Account": "111122223333", "UserId": "x", "Arn": SSO_CALLER})
    with pytest.raises(
        setup_errors.RoleError, match=r"refused to show its trust policy \(AccessDenied\).*its ARN will do"
    ):
        aws.discover(boto_session=fake_aws.boto_session)


@pytest.mark.parametrize(
    "trust, trusted",
    [
        (TRUST_SAGEMAKER, True),
        (urllib.parse.quote(json.dumps(TRUST_SAGEMAKER)), True),  # as IAM sends it
        (
            {
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": ["sagemaker.amazonaws.com"]}, "Action": "sts:*"}
                ]
            },
            True,
        ),
        (TRUST_SSO, False),
        (
            {
                "Statement": [
                    {
                        "Effect": "Allow",
                        "Principal": {"AWS": "arn:aws:iam::111122223333:root"},
                        "Action": "sts:AssumeRole",
                    }
                ]
            },
            False,
        ),
        (
            {
                "Statement": [
                    {"Effect": "Allow", "Principal": {"Service": "sagemaker.amazonaws.com"}, "Action": "sts:TagSession"}
                ]
            },
            False,
        ),
        (
            {"Statement": [TRUST_SAGEMAKER["Statement"][0], {**TRUST_SAGEMAKER["Statement"][0], "Effect": "Deny"}]},
            False,
        ),
        ({}, False),
    ],
    ids=["dict", "url-encoded", "service-list", "sso", "account", "other-action", "denied", "empty"],
)
def test_which_trust_policies_let_sagemaker_assume_the_role(trust, trusted):
    assert settings.trusts_sagemaker(trust) is trusted


@pytest.mark.slow
def test_an_offline_dry_run_does_no_role_discovery(no_studio, tmp_path, monkeypatch):
    for name in ("train", "validation"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "part-00000.csv").write_text("id,title,category\n0,a title,c\n")
    job = Job("lab-x", {}, {"train": tmp_path / "train", "validation": tmp_path / "validation"})

    def no_lookup(*args, **kwargs):
        raise AssertionError("the offline dry run looked up the caller's role")

    monkeypatch.setattr(aws, "_role_from_caller", no_lookup)
    with aws_offline.offline() as off:
        run_job(job, resolve("ml.g5.2xlarge"), echo=False, attendee="alice")
    assert off.request("CreateTrainingJob")["RoleArn"] == sandbox.ROLE_ARN  # the placeholder, as is


def test_studio_gives_role_region_and_attendee(fake_aws, studio):
    ctx = aws.discover(boto_session=fake_aws.boto_session)
    assert ctx.where == "SageMaker Studio"
    assert ctx.role_arn.endswith("AmazonSageMaker-ExecutionRole-studio")
    assert ctx.attendee == settings.Attendee("alice-smith", "Studio user profile")
    assert "iam.GetRole" not in fake_aws.summary()


def test_region_comes_from_the_studio_space_when_the_session_has_none(no_studio, studio):
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        os.environ.pop("AWS_DEFAULT_REGION"), os.environ.pop("AWS_REGION")  # put back on leaving the block
        off = aws_offline.OfflineAWS(region=None)
        ctx = aws.discover(boto_session=off.boto_session)
        assert ctx.region == "eu-west-1" and ctx.bucket == f"sagemaker-eu-west-1-{sandbox.ACCOUNT}"
        assert off.calls, "calls go through the same recording session after the region is set"
    assert not attempts


def test_an_explicit_region_overrides_the_sessions(fake_aws):
    ctx = aws.discover(boto_session=fake_aws.boto_session, region="eu-central-1", attendee="alice")
    assert ctx.region == ctx.boto_session.region_name == "eu-central-1"
    assert ctx.bucket == f"sagemaker-eu-central-1-{sandbox.ACCOUNT}"
    assert fake_aws.calls_to("HeadBucket"), "the S3 client of the re-regioned session is still recorded"


@pytest.mark.parametrize(
    "unset, offline, error, says",
    [
        (("AWS_DEFAULT_REGION", "AWS_REGION"), {"region": None}, setup_errors.RegionError, "AWS_DEFAULT_REGION"),
        (tuple(sandbox.FAKE_CREDENTIALS), {"credentials": False}, setup_errors.NoCredentials, "aws configure"),
    ],
    ids=["no-region", "no-credentials"],
)
def test_no_region_or_no_credentials_is_an_error_before_any_call(no_studio, unset, offline, error, says):
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        for key in unset:  # offline_environment set each of them, and puts them back afterwards
            os.environ.pop(key)
        off = aws_offline.OfflineAWS(**offline)
        with pytest.raises(error, match=says):
            aws.discover(boto_session=off.boto_session)
        assert off.calls == []
    assert not attempts


def test_expired_credentials_say_so(fake_aws):
    fake_aws.respond("GetCallerIdentity", ClientErrorAnswer("ExpiredToken", "expired", 403))
    with pytest.raises(setup_errors.NoCredentials, match="ExpiredToken.*expired"):
        aws.discover(boto_session=fake_aws.boto_session)
    assert list(fake_aws.summary()) == ["sts.GetCallerIdentity"]


def test_an_iam_user_is_not_an_execution_role(fake_aws):
    fake_aws.respond(
        "GetCallerIdentity",
        {"Account": "111122223333", "UserId": "AIDA", "Arn": "arn:aws:iam::111122223333:user/alice"},
    )
    with pytest.raises(setup_errors.RoleError, match="WORKSHOP_ROLE_ARN"):
        aws.discover(boto_session=fake_aws.boto_session)


def test_a_bare_role_name_fails_before_any_call(fake_aws):
    with pytest.raises(setup_errors.RoleError, match="bare role name"):
        aws.discover(role="SageMakerRole", boto_session=fake_aws.boto_session)
    assert fake_aws.calls == []


@pytest.mark.parametrize("code, status, says", [("404", 404, "does not exist"), ("403", 403, "no access")])
def test_a_missing_or_forbidden_bucket(fake_aws, code, status, says):
    fake_aws.respond("HeadBucket", ClientErrorAnswer(code, "nope", status))
    fake_aws.respond("ListObjectsV2", ClientErrorAnswer(code, "nope", status))  # nor the attendee's own prefix
    with pytest.raises(setup_errors.BucketError, match=says):
        aws.discover(boto_session=fake_aws.boto_session, bucket="someone-elses-bucket")
    # only read-only lookups were made: nothing written, nothing created
    assert set(fake_aws.summary()) <= {"sts.GetCallerIdentity", "iam.GetRole", "s3.HeadBucket", "s3.ListObjectsV2"}


def test_an_event_account_s_bucket_is_checked_through_the_attendee_s_own_prefix(fake_aws):
    # the event's attendee role may list only its own prefix, so HeadBucket (the whole listing) is refused
    fake_aws.respond("HeadBucket", ClientErrorAnswer("403", "nope", 403))
    ctx = aws.discover(boto_session=fake_aws.boto_session, bucket="event-bucket", attendee="attendee-07")
    assert ctx.bucket == "event-bucket"
    assert fake_aws.request("ListObjectsV2")["Prefix"] == "attendee-07/"


def test_console_url():
    assert (
        aws.console_url("eu-west-1", "alice-lab01-x")
        == "https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1#/jobs/alice-lab01-x"
    )


# ---------------------------------------------------------------------------------------------------- quotas
P4D, P4D_SPOT = "ml.p4d.24xlarge for training job usage", "ml.p4d.24xlarge for spot training job usage"


def _script_quotas(fake, defaults: dict[str, float], applied: dict[str, float] | None = None) -> dict[str, str]:
    """Service Quotas as AWS answers: every quota in the defaults list (two per page here, after some others), an
    applied value only for quotas that were raised. Returns name -> quota code."""
    names = [f"ml.c5.{i}xlarge for processing job usage" for i in range(3)] + list(defaults)
    quotas = [
        {"ServiceCode": "sagemaker", "QuotaName": n, "QuotaCode": f"L-{i:08X}", "Value": defaults.get(n, 4.0)}
        for i, n in enumerate(names)
    ]
    by_code, applied = {q["QuotaCode"]: q for q in quotas}, applied or {}

    def list_defaults(params):
        start = int(params.get("NextToken") or 0)
        page = {"Quotas": quotas[start : start + 2]}
        return {**page, "NextToken": str(start + 2)} if start + 2 < len(quotas) else page

    def get(values):
        def answer(params):
            q = by_code.get(params["QuotaCode"])
            if q is None or q["QuotaName"] not in values:
                return ClientErrorAnswer("NoSuchResourceException", "no such quota value", 400)
            return {"Quota": {**q, "Value": values[q["QuotaName"]]}}

        return answer

    fake.respond("ListAWSDefaultServiceQuotas", list_defaults)
    fake.respond("GetServiceQuota", get(applied))
    fake.respond("GetAWSDefaultServiceQuota", get({q["QuotaName"]: q["Value"] for q in quotas}))
    return {q["QuotaName"]: q["QuotaCode"] for q in quotas}


def test_a_quota_still_at_its_aws_default_is_checked(fake_aws):
    # ListServiceQuotas would not list it at all: only quotas with an applied value are there
    codes = _script_quotas(fake_aws, {P4D: 0.0, P4D_SPOT: 0.0})
    with pytest.raises(setup_errors.QuotaError) as err:
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 1)
    msg = str(err.value)
    assert f"quota '{P4D}' is 0 and this job asks for 1 (AWS's default" in msg
    assert (
        f"Request an increase to at least 1 (Service Quotas console > AWS services > Amazon SageMaker > '{P4D}', "
        f"code {codes[P4D]})" in msg
    )
    assert len(fake_aws.calls_to("ListAWSDefaultServiceQuotas")) == 2  # paged until found (page 2 of 3), then stopped
    assert fake_aws.request("GetServiceQuota") == {"ServiceCode": "sagemaker", "QuotaCode": codes[P4D]}
    assert not fake_aws.calls_to("ListTrainingJobs")  # too low for an idle account: running jobs do not matter


def test_an_applied_quota_wins_over_the_default_and_codes_are_found_once(fake_aws):
    codes = _script_quotas(fake_aws, {P4D: 0.0, P4D_SPOT: 0.0}, applied={P4D: 2.0})
    check = aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 2)
    assert (check.ok, check.limit, check.default, check.quota_code, check.in_use) == (True, 2, False, codes[P4D], 0)
    listed = len(fake_aws.calls_to("ListAWSDefaultServiceQuotas"))
    with pytest.raises(setup_errors.QuotaError, match=f"quota '{P4D}' is 2 and this job asks for 3.*at least 3"):
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 3)
    with pytest.raises(
        setup_errors.QuotaError, match=f"quota '{P4D_SPOT}' is 0 and this job asks for 1 \\(AWS's default"
    ):
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 1, spot=True)
    assert len(fake_aws.calls_to("ListAWSDefaultServiceQuotas")) == listed + 3  # only the spot code was looked up
    # a known code whose value was never raised: GetServiceQuota has none, the default comes from its own call
    with pytest.raises(setup_errors.QuotaError, match="AWS's default"):
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 1, spot=True)
    assert fake_aws.request("GetAWSDefaultServiceQuota") == {"ServiceCode": "sagemaker", "QuotaCode": codes[P4D_SPOT]}
    assert aws.check_quota(fake_aws.boto_session, "ml.g5.2xlarge", 1) is None  # no such quota: the launch will say


def test_instances_held_by_running_jobs_count_against_the_quota(fake_aws):
    codes = _script_quotas(fake_aws, {P4D: 0.0, P4D_SPOT: 0.0}, applied={P4D: 4.0, P4D_SPOT: 8.0})
    _create(fake_aws.boto_session, "bob-lab02-ddp", "ml.p4d.24xlarge", 2)
    _create(fake_aws.boto_session, "carol-lab03-smddp", "ml.p4d.24xlarge", 1)
    _create(fake_aws.boto_session, "dave-lab06-spot", "ml.p4d.24xlarge", 4, spot=True)  # the spot quota's
    _create(fake_aws.boto_session, "erin-lab01-single", "ml.g5.2xlarge", 1)  # another type
    fake_aws.script_job(ScriptedJob(statuses=[("Completed", "Completed")]), "frank-lab02-done")
    _create(fake_aws.boto_session, "frank-lab02-done", "ml.p4d.24xlarge", 2)  # finished: holds nothing
    with pytest.raises(setup_errors.QuotaError) as err:
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 2)
    msg = str(err.value)
    assert (
        f"quota '{P4D}' is 4, 3 of them held by running training jobs in this account, and this job asks for 2." in msg
    )
    assert "at least 5" in msg and codes[P4D] in msg and "helpers.aws.leftovers.cleanup()" in msg
    assert fake_aws.request("ListTrainingJobs") == {"StatusEquals": "InProgress", "MaxResults": 100}
    assert {c.params["TrainingJobName"] for c in fake_aws.calls_to("DescribeTrainingJob")} == {
        "bob-lab02-ddp",
        "carol-lab03-smddp",
        "dave-lab06-spot",
        "erin-lab01-single",
    }
    check = aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 1)
    assert check.ok and check.in_use == 3 and check.unscanned_jobs == 0
    assert aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 4, spot=True).in_use == 4


def test_the_studio_app_quota_counts_the_jupyterlab_apps_already_running(fake_aws):
    """Each attendee's space runs one JupyterLab app on the space type: the guide's T-1 check asks for one each."""
    name = studio_apps.app_quota_name("ml.m5.xlarge")
    assert name == "Studio JupyterLab Apps running on ml.m5.xlarge instance"
    codes = _script_quotas(fake_aws, {name: 2.0}, applied={name: 30.0})

    def app(n: int, status: str, kind: str = "JupyterLab", instance_type: str = "ml.m5.xlarge") -> dict:
        spec = {"InstanceType": instance_type}
        return {
            "DomainId": "d-1",
            "SpaceName": f"s{n}",
            "AppType": kind,
            "AppName": "default",
            "Status": status,
            "ResourceSpec": spec,
        }

    running = [
        app(1, "InService"),
        app(2, "Pending"),
        app(3, "Deleted"),
        app(4, "InService", "CodeEditor"),
        app(5, "InService", instance_type="ml.t3.medium"),
    ]
    fake_aws.respond("ListApps", lambda params: {"Apps": running})
    check = studio_apps.check_app_quota(fake_aws.boto_session, "ml.m5.xlarge", 28)
    assert (check.ok, check.limit, check.in_use, check.quota_code) == (True, 30, 2, codes[name])
    with pytest.raises(setup_errors.QuotaError) as err:
        studio_apps.check_app_quota(fake_aws.boto_session, "ml.m5.xlarge", 29)
    msg = str(err.value)
    assert f"quota '{name}' is 30, 2 of them running in this account's spaces, and the event needs 29 more" in msg
    assert "at least 31" in msg and codes[name] in msg and "StudioInstanceType" in msg
    assert studio_apps.check_app_quota(fake_aws.boto_session, "ml.g5.2xlarge", 1) is None  # a name Service Quotas lacks


def test_the_account_wide_instance_quota_counts_every_type_of_running_job(fake_aws):
    """Lab 05 alone asks for 3 instances per attendee: at an event the account-wide quota is hit first."""
    every = quotas.ACCOUNT_WIDE[False]
    codes = _script_quotas(fake_aws, {P4D: 0.0, every: 4.0}, applied={P4D: 8.0})
    _create(fake_aws.boto_session, "bob-lab05-file", "ml.g5.2xlarge", 1)
    _create(fake_aws.boto_session, "carol-lab05-fsx", "ml.g5.xlarge", 2)
    with pytest.raises(setup_errors.QuotaError) as err:
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 2)  # the type's quota (8) has room
    msg = str(err.value)
    assert f"quota '{every}' is 4, 3 of them held by running training jobs" in msg and codes[every] in msg
    assert aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 1).ok  # 3 held + 1 fits in 4


def test_running_jobs_past_the_scan_limit_are_counted_and_said(fake_aws, monkeypatch):
    monkeypatch.setattr(aws, "USAGE_SCAN_LIMIT", 2)
    _script_quotas(fake_aws, {P4D: 0.0}, applied={P4D: 3.0})
    for name in ("a-lab02-x", "b-lab02-x", "c-lab02-x"):
        _create(fake_aws.boto_session, name, "ml.p4d.24xlarge", 1)
    with pytest.raises(setup_errors.QuotaError, match=r"held by running.*1 more running job\(s\) were not inspected"):
        aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 2)
    assert len(fake_aws.calls_to("DescribeTrainingJob")) == 2


@pytest.mark.parametrize("denied", ["ListAWSDefaultServiceQuotas", "GetServiceQuota"])
def test_quota_check_without_permission_stays_silent(fake_aws, denied):
    _script_quotas(fake_aws, {P4D: 0.0})
    fake_aws.respond(denied, ClientErrorAnswer("AccessDeniedException", "no", 400))
    assert aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 64) is None


# ---------------------------------------------------------------------------------------------------- cleanup
def _create(
    session,
    name: str,
    instance_type: str = "ml.g5.2xlarge",
    count: int = 1,
    spot: bool = False,
    attendee: str | None = None,
) -> None:
    """A training job as the helpers launch it: tagged with its attendee (the name's first word unless given)."""
    session.client("sagemaker").create_training_job(
        TrainingJobName=name,
        RoleArn=sandbox.ROLE_ARN,
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": instance_type, "InstanceCount": count, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 60, **({"MaxWaitTimeInSeconds": 120} if spot else {})},
        EnableManagedSpotTraining=spot,
        Tags=[{"Key": aws.ATTENDEE_TAG, "Value": attendee or name.split("-")[0]}] if attendee != "" else [],
    )


def _tags_from_created_jobs(fake) -> None:
    """ListTags answers with the tags each job was created with."""
    fake.respond("ListTags", lambda params: {"Tags": fake.jobs[params["ResourceArn"].rsplit("/", 1)[-1]]["Tags"]})


def test_cleanup_stops_only_this_attendees_running_jobs(fake_aws):
    _tags_from_created_jobs(fake_aws)
    running = ScriptedJob(statuses=[("InProgress", "Training")])
    for name, owner in (
        ("alice-lab02-a", None),
        ("alice-lab03-b", None),
        ("bob-lab02-a", None),
        ("malice-lab02-a", None),
        ("alice-smith-lab02-a", "alice-smith"),
        ("alice-manual-x", ""),
    ):
        fake_aws.script_job(running, name)
        _create(fake_aws.boto_session, name, attendee=owner)
    fake_aws.script_job(ScriptedJob(statuses=[("Completed", "Completed")]), "alice-lab01-done")
    _create(fake_aws.boto_session, "alice-lab01-done")

    listed = leftovers.cleanup("alice", boto_session=fake_aws.boto_session, stop=False)
    # "malice-" contains "alice-", "alice-smith-" starts with it, an untagged job may be anyone's: none are alice's
    assert listed == ["alice-lab02-a", "alice-lab03-b"]
    assert not fake_aws.calls_to("StopTrainingJob")
    assert {c.params["ResourceArn"].rsplit("/", 1)[-1] for c in fake_aws.calls_to("ListTags")} == {
        "alice-lab02-a",
        "alice-lab03-b",
        "alice-smith-lab02-a",
        "alice-manual-x",
    }  # only names that could be hers

    stopped = leftovers.cleanup("alice", boto_session=fake_aws.boto_session)
    assert stopped == listed
    assert [c.params["TrainingJobName"] for c in fake_aws.calls_to("StopTrainingJob")] == listed
    assert fake_aws.request("ListTrainingJobs") == {"NameContains": "alice-", "StatusEquals": "InProgress"}
    assert leftovers.cleanup("alice", boto_session=fake_aws.boto_session) == []  # stopped jobs are left alone


def test_cleanup_stops_nothing_when_owners_cannot_be_confirmed(fake_aws):
    fake_aws.script_job(ScriptedJob(statuses=[("InProgress", "Training")]))
    _create(fake_aws.boto_session, "alice-lab02-a")
    fake_aws.respond("ListTags", ClientErrorAnswer("AccessDeniedException", "no", 400))
    with pytest.raises(
        setup_errors.AwsSetupError,
        match="cannot read the tags of alice-lab02-a.*nothing was stopped.*sagemaker:ListTags",
    ):
        leftovers.cleanup("alice", boto_session=fake_aws.boto_session)
    assert not fake_aws.calls_to("StopTrainingJob")


def test_cleanup_refuses_a_shared_login_name(fake_aws, monkeypatch):
    monkeypatch.setattr(settings.getpass, "getuser", lambda: "sagemaker-user")
    with pytest.raises(setup_errors.AwsSetupError, match="attendee='yourname'"):
        leftovers.cleanup(boto_session=fake_aws.boto_session)
    assert fake_aws.calls == []
