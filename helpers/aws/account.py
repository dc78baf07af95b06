"""Who and where on AWS: credentials, region, execution role, bucket and attendee, in Studio or on a laptop.

Importing it calls nothing; :func:`discover` makes a few read-only calls and says what to fix, never printing
credentials. :func:`check_quota` compares quotas with a job's ask. Every job is named and tagged with the attendee's
prefix (``attendee=``, ``WORKSHOP_ATTENDEE``, the Studio profile, then the login name); what an attendee leaves
behind is :mod:`helpers.aws.leftovers`'.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from helpers.aws.quotas import (
    ACCOUNT_WIDE,
    QuotaCheck,
    instances_in_use,
    quota_check,
    quota_message,
    quota_name,
)
from helpers.aws.settings import (
    BUCKET_ENV,
    ROLE_ENV,
    SAGEMAKER_PRINCIPAL,
    Attendee,
    require_bucket_name,
    require_role_arn,
    resolve_attendee,
    studio_metadata,
    trusts_sagemaker,
)
from helpers.aws.setup_errors import (
    BucketError,
    NoCredentials,
    QuotaError,
    RegionError,
    RoleError,
    client_error_code,
)

ATTENDEE_TAG = "workshop-attendee"  # the tag every launched job carries: its owner, whatever its name


def console_url(region: str, job_name: str) -> str:
    """The training job's page in the SageMaker console."""
    return f"https://{region}.console.aws.amazon.com/sagemaker/home?region={region}#/jobs/{job_name}"


@dataclass
class AwsContext:
    """Everything a launch needs to know about the account. ``boto_session`` carries the credentials; nothing here
    prints them."""

    boto_session: Any
    region: str
    account: str
    role_arn: str
    bucket: str
    attendee: Attendee
    where: str  # "SageMaker Studio", "laptop" or "offline"

    def sagemaker_session(self, sagemaker_config: dict | None = None):
        from sagemaker.core.helper.session_helper import Session

        return Session(boto_session=self.boto_session, default_bucket=self.bucket, sagemaker_config=sagemaker_config)

    def __repr__(self) -> str:
        return (
            f"AwsContext({self.where}: region={self.region}, account={self.account}, role={self.role_arn}, "
            f"bucket={self.bucket}, attendee={self.attendee.name!r} from {self.attendee.source})"
        )


def discover(
    role: str | None = None,
    bucket: str | None = None,
    region: str | None = None,
    attendee: str | None = None,
    boto_session=None,
    check_bucket: bool = True,
) -> AwsContext:
    """Find credentials, region, account, execution role and bucket; :class:`AwsSetupError` subclasses say what
    is missing and how to fix it.

    Order: arguments, then environment (``WORKSHOP_ROLE_ARN``, ``WORKSHOP_BUCKET``), then what SageMaker Studio
    knows (its execution role), then the SDK's default bucket ``sagemaker-<region>-<account>``.
    """
    import boto3
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    if role:
        role = require_role_arn(role)  # before any call: a bare name would otherwise cost an IAM lookup
    if bucket:
        bucket = require_bucket_name(bucket)
    metadata = studio_metadata()
    session = boto_session or boto3.Session(region_name=region)
    if session.get_credentials() is None:
        raise NoCredentials(
            "no AWS credentials found. In SageMaker Studio they come with the space; on a laptop run "
            "`aws configure` (or `aws sso login --profile NAME` and set AWS_PROFILE=NAME), or set "
            "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. For a dry run without AWS use "
            "sagemaker_standin.offline_account.offline()."
        )
    region = region or session.region_name or _region_from_arn((metadata or {}).get("ResourceArn", ""))
    if not region:
        raise RegionError(
            "no AWS region configured: set AWS_DEFAULT_REGION=us-east-1 (or your region), add "
            "'region = ...' to ~/.aws/config, or pass region=."
        )
    if session.region_name != region:
        # The SDK's Session takes its region from the boto session, so the session gets it. Set in place: a second
        # boto3.Session over the same botocore session registers boto3's S3 handlers twice and S3 clients then fail.
        session._session.set_config_variable("region", region)
    try:
        identity = session.client("sts", region_name=region).get_caller_identity()
    except (ClientError, NoCredentialsError, BotoCoreError) as err:
        raise NoCredentials(
            f"AWS rejected these credentials ({client_error_code(err) or type(err).__name__}): "
            f"they may have expired; refresh them (`aws sso login`, or a new session in Studio) "
            f"and try again."
        ) from None
    account = identity["Account"]

    if not role:
        role = next((os.environ[k] for k in ROLE_ENV if os.environ.get(k)), None)
        if role:
            role = require_role_arn(role)
    if not role and metadata and metadata.get("ExecutionRoleArn"):
        role = metadata["ExecutionRoleArn"]
    if not role:
        role = _role_from_caller(session, identity["Arn"], account)

    bucket = require_bucket_name(bucket or os.environ.get(BUCKET_ENV) or f"sagemaker-{region}-{account}")
    who = resolve_attendee(attendee, metadata or {})
    if check_bucket:
        _check_bucket(session, bucket, region, f"{who.name}/")
    return AwsContext(session, region, account, role, bucket, who, "SageMaker Studio" if metadata else "laptop")


def _region_from_arn(arn: str) -> str | None:
    parts = arn.split(":")
    return parts[3] if len(parts) > 3 and parts[3] else None


def _role_from_caller(session, caller_arn: str, account: str) -> str:
    """The execution role behind an assumed-role identity (a notebook instance, an EC2 role), once its trust policy
    shows SageMaker can assume it: an SSO or admin role usually cannot, and a launch with it would fail."""
    from botocore.exceptions import ClientError

    fix = (
        f"pass role='arn:aws:iam::{account}:role/<execution role>' or set WORKSHOP_ROLE_ARN to a SageMaker "
        f"execution role (IAM console > Roles: one whose trust relationships name {SAGEMAKER_PRINCIPAL}, such as "
        f"the 'AmazonSageMaker-ExecutionRole-...' that Studio creates)"
    )
    if ":assumed-role/" not in caller_arn:
        raise RoleError(f"these credentials belong to {caller_arn}, which is not a role SageMaker can assume: {fix}.")
    name = caller_arn.split(":assumed-role/")[1].split("/")[0]
    try:
        role = session.client("iam").get_role(RoleName=name)["Role"]
    except ClientError as err:
        if name.startswith("AmazonSageMaker-ExecutionRole"):
            # created by SageMaker, so it trusts SageMaker; it lives under service-role/, as the SDK itself assumes
            return f"arn:aws:iam::{account}:role/service-role/{name}"
        raise RoleError(
            f"these credentials come from role {name}, and IAM refused to show its trust policy "
            f"({client_error_code(err) or 'GetRole'}), so whether SageMaker can assume it is unknown: "
            f"{fix}; if {name} is one, its ARN will do."
        ) from None
    if not trusts_sagemaker(role.get("AssumeRolePolicyDocument") or {}):
        raise RoleError(
            f"these credentials come from role {name}, which SageMaker cannot assume (its trust policy "
            f"does not name {SAGEMAKER_PRINCIPAL}), so a launch would fail: {fix}."
        )
    return role["Arn"]


def _check_bucket(session, bucket: str, region: str, prefix: str) -> None:
    from botocore.exceptions import ClientError

    s3 = session.client("s3", region_name=region)
    try:
        try:
            s3.head_bucket(Bucket=bucket)
        except ClientError as err:
            if client_error_code(err) not in ("403", "AccessDenied", "Forbidden"):
                raise
            # an event account lets an attendee list only their own prefix (HeadBucket needs the whole listing)
            s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=1)
    except ClientError as err:
        code = client_error_code(err)
        if code in ("404", "NoSuchBucket", "NotFound"):
            raise BucketError(
                f"S3 bucket {bucket!r} does not exist: create it (`aws s3 mb s3://{bucket} "
                f"--region {region}`), or pass bucket='<a bucket you can write>' "
                f"(or set {BUCKET_ENV})."
            ) from None
        if code in ("403", "AccessDenied", "Forbidden"):
            raise BucketError(
                f"no access to S3 bucket {bucket!r} with these credentials: pass "
                f"bucket='<a bucket you can write>' (or set {BUCKET_ENV})."
            ) from None
        raise


# the quota check's settings, read at every call and passed to helpers.aws.quotas: set here, they take effect
USAGE_SCAN_LIMIT = 100  # running jobs described to count the instances they hold; more are counted, not described
_quota_codes: dict[str, str] = {}  # quota name -> Service Quotas code: the same in every account and region


def check_quota(
    boto_session, instance_type: str, instance_count: int, spot: bool = False, region: str | None = None
) -> QuotaCheck | None:
    """Compare the account's quotas with ``instance_count`` plus what its running training jobs already hold (a
    shared workshop account fills up): the quota for this instance type, then the account-wide one for all training
    instances of the same purchase option.

    A quota is the applied value, or AWS's default when none was applied. :class:`QuotaError` when one is too low;
    None when the type's quota cannot be read (no servicequotas permission, or a name Service Quotas does not
    know), since the launch itself will then say so.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    region = region or boto_session.region_name
    quotas = boto_session.client("service-quotas", region_name=region)
    try:
        check = quota_check(quotas, quota_name(instance_type, spot), instance_count, _quota_codes)
        overall = quota_check(quotas, ACCOUNT_WIDE[spot], instance_count, _quota_codes) if check and check.ok else None
    except (ClientError, BotoCoreError):
        return None
    if check is None:
        return None
    if check.ok:  # too low even for an idle account: no need to look at running jobs
        try:
            held, unscanned = instances_in_use(
                boto_session.client("sagemaker", region_name=region), spot, USAGE_SCAN_LIMIT
            )
            check = replace(check, in_use=held.get(instance_type, 0), unscanned_jobs=unscanned)
            if overall is not None:
                overall = replace(overall, in_use=sum(held.values()), unscanned_jobs=unscanned)
        except (ClientError, BotoCoreError):
            pass  # cannot list jobs: the quotas alone are still a useful check
    for c in (check, overall):
        if c is not None and not c.ok:
            raise QuotaError(quota_message(c))
    return check
