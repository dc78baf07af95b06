"""AWS discovery, quotas and cleanup against the offline session: every call validated by botocore, none sent.

Each test runs inside ``fake_aws``: fake credentials, SDK telemetry off, and a network guard that fails the test if
anything tried to open a connection (even where a library swallowed the error).
"""
from __future__ import annotations

import json
import os

import pytest

from helpers import aws, aws_offline
from helpers.aws_offline import ClientErrorAnswer, ScriptedJob


@pytest.fixture
def no_studio(monkeypatch, tmp_path):
    """This machine is a laptop whatever it is: no Studio metadata, no attendee or role from the environment."""
    monkeypatch.setattr(aws, "STUDIO_METADATA", tmp_path / "no-such-metadata.json")
    for name in (aws.ATTENDEE_ENV, aws.BUCKET_ENV, *aws.ROLE_ENV):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def fake_aws(no_studio):
    with aws_offline.offline_environment(), aws_offline.network_guard() as attempts:
        yield aws_offline.OfflineAWS()
    assert not attempts, f"something tried the network: {attempts}"


@pytest.fixture
def studio(monkeypatch, tmp_path):
    meta = tmp_path / "resource-metadata.json"
    meta.write_text(json.dumps({
        "ExecutionRoleArn": "arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole-studio",
        "UserProfileName": "Alice Smith", "DomainId": "d-offline",
        "ResourceArn": "arn:aws:sagemaker:eu-west-1:111122223333:space/d-offline/alice"}))
    monkeypatch.setattr(aws, "STUDIO_METADATA", meta)
    return meta


# ---------------------------------------------------------------------------------------------------- checks before any call
@pytest.mark.parametrize("role", ["arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole-1",
                                  "arn:aws-cn:iam::111122223333:role/Trainer", " arn:aws:iam::111122223333:role/x "])
def test_role_arns_are_accepted(role):
    assert aws.require_role_arn(role) == role.strip()


def test_a_bare_role_name_gets_its_arn_spelled_out():
    with pytest.raises(aws.RoleError, match=r"role='arn:aws:iam::<account-id>:role/MySageMakerRole'"):
        aws.require_role_arn("MySageMakerRole")


@pytest.mark.parametrize("role, says", [("arn:aws:iam::111122223333:user/alice", "IAM user, not a role"),
                                        ("arn:aws:iam::1234:role/x", "12-digit"), ("", "not an IAM role ARN")])
def test_other_role_mistakes(role, says):
    with pytest.raises(aws.RoleError, match=says):
        aws.require_role_arn(role)


@pytest.mark.parametrize("given, name", [("my-bucket", "my-bucket"), ("s3://my-bucket/some/prefix", "my-bucket"),
                                         ("a.b-c1", "a.b-c1")])
def test_bucket_names(given, name):
    assert aws.require_bucket_name(given) == name


@pytest.mark.parametrize("bad", ["My_Bucket", "ab", "", "-leading", "two..dots", "s3://"])
def test_bad_bucket_names_are_refused_with_an_example(bad):
    with pytest.raises(aws.BucketError, match="bucket='sagemaker-us-east-1-123456789012'"):
        aws.require_bucket_name(bad)


def test_attendee_prefix_order_and_shape(monkeypatch):
    monkeypatch.delenv(aws.ATTENDEE_ENV, raising=False)
    assert aws.resolve_attendee("Alice Smith!", {}) == aws.Attendee("alice-smith", "argument")
    monkeypatch.setenv(aws.ATTENDEE_ENV, "bob")
    assert aws.resolve_attendee(None, {"UserProfileName": "carol"}) == aws.Attendee("bob", aws.ATTENDEE_ENV)
    monkeypatch.delenv(aws.ATTENDEE_ENV)
    assert aws.resolve_attendee(None, {"UserProfileName": "carol"}).source == "Studio user profile"
    assert aws.sanitize_attendee("42 Team") == "a42-team"  # job names start with a letter here
    assert len(aws.sanitize_attendee("a" * 40)) == 16
    with pytest.raises(aws.AwsSetupError, match="no letters or digits"):
        aws.resolve_attendee("!!!", {})


def test_a_shared_login_name_is_flagged(monkeypatch):
    monkeypatch.delenv(aws.ATTENDEE_ENV, raising=False)
    monkeypatch.setattr(aws.getpass, "getuser", lambda: "sagemaker-user")
    who = aws.resolve_attendee(None, {})
    assert who.name == "sagemaker-user" and who.shared
    assert not aws.resolve_attendee("sagemaker-user", {}).shared  # chosen on purpose: the learner's call


# ---------------------------------------------------------------------------------------------------- discovery
def test_laptop_with_an_assumed_role(fake_aws):
    ctx = aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert (ctx.where, ctx.region, ctx.account) == ("laptop", "us-east-1", aws_offline.ACCOUNT)
    assert ctx.role_arn == fake_aws.role_arn  # found through iam:GetRole from the assumed-role identity
    assert ctx.bucket == f"sagemaker-us-east-1-{aws_offline.ACCOUNT}"  # the SDK's default bucket name
    assert ctx.attendee == aws.Attendee("alice", "argument")
    assert list(fake_aws.summary()) == ["sts.GetCallerIdentity", "iam.GetRole", "s3.HeadBucket"]
    assert "AKIA" not in repr(ctx) and "secret" not in repr(ctx)


def test_role_and_bucket_from_the_environment_win_over_discovery(fake_aws, monkeypatch):
    monkeypatch.setenv("WORKSHOP_ROLE_ARN", "arn:aws:iam::111122223333:role/Workshop")
    monkeypatch.setenv(aws.BUCKET_ENV, "s3://workshop-bucket")
    ctx = aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert (ctx.role_arn, ctx.bucket) == ("arn:aws:iam::111122223333:role/Workshop", "workshop-bucket")
    assert "iam.GetRole" not in fake_aws.summary()
    assert fake_aws.request("HeadBucket") == {"Bucket": "workshop-bucket"}


def test_without_iam_get_role_the_service_role_path_is_assumed(fake_aws):
    fake_aws.respond("GetRole", ClientErrorAnswer("AccessDenied", "not allowed", 403))
    fake_aws.respond("GetCallerIdentity", {"Account": "111122223333", "UserId": "x",
                                           "Arn": "arn:aws:sts::111122223333:assumed-role/"
                                                  "AmazonSageMaker-ExecutionRole-2026/SageMaker"})
    ctx = aws.discover(boto_session=fake_aws.boto_session, attendee="alice")
    assert ctx.role_arn == "arn:aws:iam::111122223333:role/service-role/AmazonSageMaker-ExecutionRole-2026"


def test_studio_gives_role_region_and_attendee(fake_aws, studio):
    ctx = aws.discover(boto_session=fake_aws.boto_session)
    assert ctx.where == "SageMaker Studio"
    assert ctx.role_arn.endswith("AmazonSageMaker-ExecutionRole-studio")
    assert ctx.attendee == aws.Attendee("alice-smith", "Studio user profile")
    assert "iam.GetRole" not in fake_aws.summary()


def test_region_comes_from_the_studio_space_when_the_session_has_none(no_studio, studio):
    with aws_offline.offline_environment(), aws_offline.network_guard() as attempts:
        os.environ.pop("AWS_DEFAULT_REGION"), os.environ.pop("AWS_REGION")  # put back on leaving the block
        off = aws_offline.OfflineAWS(region=None)
        ctx = aws.discover(boto_session=off.boto_session)
        assert ctx.region == "eu-west-1" and ctx.bucket == f"sagemaker-eu-west-1-{aws_offline.ACCOUNT}"
        assert off.calls, "calls go through the same recording session after the region is set"
    assert not attempts


def test_an_explicit_region_overrides_the_sessions(fake_aws):
    ctx = aws.discover(boto_session=fake_aws.boto_session, region="eu-central-1", attendee="alice")
    assert ctx.region == ctx.boto_session.region_name == "eu-central-1"
    assert ctx.bucket == f"sagemaker-eu-central-1-{aws_offline.ACCOUNT}"
    assert fake_aws.calls_to("HeadBucket"), "the S3 client of the re-regioned session is still recorded"


@pytest.mark.parametrize("unset, offline, error, says", [
    (("AWS_DEFAULT_REGION", "AWS_REGION"), {"region": None}, aws.RegionError, "AWS_DEFAULT_REGION"),
    (tuple(aws_offline.FAKE_CREDENTIALS), {"credentials": False}, aws.NoCredentials, "aws configure"),
], ids=["no-region", "no-credentials"])
def test_no_region_or_no_credentials_is_an_error_before_any_call(no_studio, unset, offline, error, says):
    with aws_offline.offline_environment(), aws_offline.network_guard() as attempts:
        for key in unset:  # offline_environment set each of them, and puts them back afterwards
            os.environ.pop(key)
        off = aws_offline.OfflineAWS(**offline)
        with pytest.raises(error, match=says):
            aws.discover(boto_session=off.boto_session)
        assert off.calls == []
    assert not attempts


def test_expired_credentials_say_so(fake_aws):
    fake_aws.respond("GetCallerIdentity", ClientErrorAnswer("ExpiredToken", "expired", 403))
    with pytest.raises(aws.NoCredentials, match="ExpiredToken.*expired"):
        aws.discover(boto_session=fake_aws.boto_session)
    assert list(fake_aws.summary()) == ["sts.GetCallerIdentity"]


def test_an_iam_user_is_not_an_execution_role(fake_aws):
    fake_aws.respond("GetCallerIdentity", {"Account": "111122223333", "UserId": "AIDA",
                                           "Arn": "arn:aws:iam::111122223333:user/alice"})
    with pytest.raises(aws.RoleError, match="WORKSHOP_ROLE_ARN"):
        aws.discover(boto_session=fake_aws.boto_session)


def test_a_bare_role_name_fails_before_any_call(fake_aws):
    with pytest.raises(aws.RoleError, match="bare role name"):
        aws.discover(role="SageMakerRole", boto_session=fake_aws.boto_session)
    assert fake_aws.calls == []


@pytest.mark.parametrize("code, status, says", [("404", 404, "does not exist"), ("403", 403, "no access")])
def test_a_missing_or_forbidden_bucket(fake_aws, code, status, says):
    fake_aws.respond("HeadBucket", ClientErrorAnswer(code, "nope", status))
    with pytest.raises(aws.BucketError, match=says):
        aws.discover(boto_session=fake_aws.boto_session, bucket="someone-elses-bucket")
    # only read-only lookups were made: nothing written, nothing created
    assert set(fake_aws.summary()) <= {"sts.GetCallerIdentity", "iam.GetRole", "s3.HeadBucket"}


def test_console_url():
    assert aws.console_url("eu-west-1", "alice-lab01-x") == \
        "https://eu-west-1.console.aws.amazon.com/sagemaker/home?region=eu-west-1#/jobs/alice-lab01-x"


# ---------------------------------------------------------------------------------------------------- quotas
def _quotas(*pairs):
    return {"Quotas": [{"ServiceCode": "sagemaker", "QuotaName": name, "Value": value, "QuotaCode": f"L-{i}"}
                       for i, (name, value) in enumerate(pairs)]}


def test_quota_check(fake_aws):
    fake_aws.respond("ListServiceQuotas", _quotas(("ml.p4d.24xlarge for training job usage", 2),
                                                  ("ml.p4d.24xlarge for spot training job usage", 0)))
    session = fake_aws.boto_session
    ok = aws.check_quota(session, "ml.p4d.24xlarge", 2)
    assert ok.ok and ok.limit == 2
    with pytest.raises(aws.QuotaError, match="quota 'ml.p4d.24xlarge for spot training job usage' is 0.*asks for 1"):
        aws.check_quota(session, "ml.p4d.24xlarge", 1, spot=True)
    with pytest.raises(aws.QuotaError, match="request an increase"):
        aws.check_quota(session, "ml.p4d.24xlarge", 3)
    assert aws.check_quota(session, "ml.g5.2xlarge", 1) is None  # not listed: the launch itself will say
    assert fake_aws.request("ListServiceQuotas") == {"ServiceCode": "sagemaker"}


def test_quota_check_without_permission_stays_silent(fake_aws):
    fake_aws.respond("ListServiceQuotas", ClientErrorAnswer("AccessDeniedException", "no", 400))
    assert aws.check_quota(fake_aws.boto_session, "ml.p4d.24xlarge", 64) is None


# ---------------------------------------------------------------------------------------------------- cleanup
def _create(session, name: str) -> None:
    session.client("sagemaker").create_training_job(
        TrainingJobName=name, RoleArn=aws_offline.ROLE_ARN,
        AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
        OutputDataConfig={"S3OutputPath": "s3://b/out"},
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 60})


def test_cleanup_stops_only_this_attendees_running_jobs(fake_aws):
    running = ScriptedJob(statuses=[("InProgress", "Training")])
    for name in ("alice-lab02-a", "alice-lab03-b", "bob-lab02-a", "malice-lab02-a"):
        fake_aws.script_job(running, name)
        _create(fake_aws.boto_session, name)
    fake_aws.script_job(ScriptedJob(statuses=[("Completed", "Completed")]), "alice-lab01-done")
    _create(fake_aws.boto_session, "alice-lab01-done")

    listed = aws.cleanup("alice", boto_session=fake_aws.boto_session, stop=False)
    assert listed == ["alice-lab02-a", "alice-lab03-b"]  # "malice-" contains "alice-" but is not alice's
    assert not fake_aws.calls_to("StopTrainingJob")

    stopped = aws.cleanup("alice", boto_session=fake_aws.boto_session)
    assert stopped == listed
    assert [c.params["TrainingJobName"] for c in fake_aws.calls_to("StopTrainingJob")] == listed
    assert fake_aws.request("ListTrainingJobs") == {"NameContains": "alice-", "StatusEquals": "InProgress"}
    assert aws.cleanup("alice", boto_session=fake_aws.boto_session) == []  # stopped jobs are left alone


def test_cleanup_refuses_a_shared_login_name(fake_aws, monkeypatch):
    monkeypatch.setattr(aws.getpass, "getuser", lambda: "sagemaker-user")
    with pytest.raises(aws.AwsSetupError, match="attendee='yourname'"):
        aws.cleanup(boto_session=fake_aws.boto_session)
    assert fake_aws.calls == []
