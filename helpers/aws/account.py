"""Who and where on AWS: credentials, region, execution role, bucket and attendee, in SageMaker Studio or on a laptop.

Importing this module calls nothing. :func:`discover` makes a few read-only calls (STS, IAM GetRole to check that
SageMaker can assume the role behind the credentials, S3 HeadBucket) and fails with a message that says what to do.
Credentials are never printed or returned in text. :func:`cleanup` stops this attendee's running jobs;
:func:`check_quota` compares the account's Service Quotas with what a job asks for plus what running jobs hold.

Many learners can share one account: every job name starts with the attendee prefix (``alice-lab02-ddp-...``), taken
from ``attendee=``, then ``WORKSHOP_ATTENDEE``, then the Studio user profile, then the login name, and every job is
tagged ``workshop-attendee=<prefix>``.
"""

from __future__ import annotations

import getpass
import json
import os
import re
import urllib.parse
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from helpers.errors import WorkshopError

STUDIO_METADATA = Path("/opt/ml/metadata/resource-metadata.json")
ROLE_ENV = ("WORKSHOP_ROLE_ARN", "SAGEMAKER_ROLE_ARN")
BUCKET_ENV = "WORKSHOP_BUCKET"
ATTENDEE_ENV = "WORKSHOP_ATTENDEE"
ATTENDEE_TAG = "workshop-attendee"  # the tag every launched job carries: its owner, whatever its name
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
# login names shared by everyone on a platform: useless for telling attendees apart
GENERIC_USERS = frozenset({"sagemaker-user", "root", "ec2-user", "jovyan", "ubuntu", "user", "runner", "admin"})
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_ATTENDEE_MAX = 16  # leaves room for the lab name and the SDK's 15-character timestamp in a 63-character job name


class AwsSetupError(WorkshopError, ValueError):
    """AWS is not set up for a launch; the message says how to fix it. Nothing was launched."""


class NoCredentials(AwsSetupError):
    """No AWS credentials, or credentials AWS rejects."""


class RoleError(AwsSetupError):
    """No execution role, or one given in a form SageMaker cannot use."""


class BucketError(AwsSetupError):
    """No S3 bucket to stage code and data in, or one these credentials cannot use."""


class RegionError(AwsSetupError):
    """No AWS region configured."""


class QuotaError(AwsSetupError):
    """The account's quota for this instance type is below what the job asks for."""


@dataclass(frozen=True)
class Attendee:
    name: str  # the job-name prefix: lower-case letters, digits and dashes
    source: str  # where it came from: "argument", "WORKSHOP_ATTENDEE", "Studio user profile", "login name"

    @property
    def shared(self) -> bool:
        """True when the name is a login every attendee has (``sagemaker-user``): not safe to launch or clean up."""
        return self.source == "login name" and self.name in GENERIC_USERS


def studio_metadata(path: Path | None = None) -> dict[str, Any] | None:
    """SageMaker Studio's and notebook instances' ``resource-metadata.json``; None elsewhere."""
    try:
        return json.loads(Path(path or STUDIO_METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def sanitize_attendee(raw: str) -> str:
    """``"Alice Smith"`` -> ``"alice-smith"``: what SageMaker job names allow, short enough to leave room."""
    name = re.sub(r"[^a-z0-9]+", "-", raw.strip().lower()).strip("-")[:_ATTENDEE_MAX].strip("-")
    if name and not name[0].isalpha():
        name = f"a{name}"[:_ATTENDEE_MAX]
    return name


def resolve_attendee(explicit: str | None = None, metadata: dict | None = None) -> Attendee:
    """The attendee prefix and where it came from (see the module docstring for the order)."""
    if metadata is None:
        metadata = studio_metadata() or {}
    candidates = [
        (explicit, "argument"),
        (os.environ.get(ATTENDEE_ENV), ATTENDEE_ENV),
        (metadata.get("UserProfileName"), "Studio user profile"),
    ]
    try:
        candidates.append((getpass.getuser(), "login name"))
    except (KeyError, OSError):  # no passwd entry (some containers)
        pass
    for raw, source in candidates:
        if raw and sanitize_attendee(raw):
            return Attendee(sanitize_attendee(raw), source)
        if raw and source in ("argument", ATTENDEE_ENV):
            raise AwsSetupError(
                f"attendee {raw!r} ({source}) has no letters or digits to make a job-name prefix "
                f"from: use something like 'alice'."
            )
    return Attendee("attendee", "login name")


def require_role_arn(role: str) -> str:
    """``role`` if it is a full IAM role ARN; :class:`RoleError` naming the fix otherwise (checked before any call)."""
    role = (role or "").strip()
    if ROLE_ARN.match(role):
        return role
    if role.startswith("arn:") and ":user/" in role:
        raise RoleError(
            f"{role} is an IAM user, not a role: SageMaker needs an execution role it can assume, "
            f"e.g. role='arn:aws:iam::<account-id>:role/service-role/AmazonSageMaker-ExecutionRole-...'."
        )
    if "/" not in role and ":" not in role and role:
        raise RoleError(
            f"role {role!r} is a bare role name; give its full ARN, "
            f"role='arn:aws:iam::<account-id>:role/{role}' (IAM console > Roles > {role} shows it; "
            f"roles created by SageMaker live under 'role/service-role/')."
        )
    raise RoleError(f"role {role!r} is not an IAM role ARN; expected 'arn:aws:iam::<12-digit account>:role/<name>'.")


BUCKET_NAME = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
# S3's reserved prefixes and suffixes (access point aliases, Multi-Region Access Points, directory and table buckets)
RESERVED_BUCKET_PREFIXES = ("xn--", "sthree-", "amzn-s3-demo-")
RESERVED_BUCKET_SUFFIXES = ("-s3alias", "--ol-s3", ".mrap", "--x-s3", "--table-s3")
EXAMPLE_BUCKET = "sagemaker-us-east-1-123456789012"


def bucket_name_problem(name: str) -> str | None:
    """What S3's naming rules for general purpose buckets refuse in ``name``; None if it may be a bucket's name."""
    if not BUCKET_NAME.fullmatch(name):
        return "3-63 lower-case letters, digits, dots and dashes, beginning and ending with a letter or digit"
    if ".." in name:
        return "no two dots in a row"
    if re.fullmatch(r"\d+\.\d+\.\d+\.\d+", name):
        return "not an IP address"
    reserved = [p for p in RESERVED_BUCKET_PREFIXES if name.startswith(p)]
    reserved += [s for s in RESERVED_BUCKET_SUFFIXES if name.endswith(s)]
    return f"{reserved[0]!r} is reserved by S3" if reserved else None


def suggest_bucket_name(name: str) -> str:
    """A name close to ``name`` that S3's rules allow (lower case, dashes for other characters, reserved affixes
    dropped), or the SDK's default bucket name as an example when nothing of ``name`` is left to keep."""
    fixed = re.sub(r"[^a-z0-9.-]+", "-", name.lower())
    fixed = re.sub(r"\.{2,}", ".", fixed)
    for prefix in RESERVED_BUCKET_PREFIXES:
        fixed = fixed.removeprefix(prefix)
    for suffix in RESERVED_BUCKET_SUFFIXES:
        fixed = fixed.removesuffix(suffix)
    fixed = fixed[:63].strip(".-")
    if re.fullmatch(r"[\d.]+", fixed):  # an IP address, or digits alone: give it a word
        fixed = f"bucket-{fixed.replace('.', '-')}"
    if len(fixed) < 3 or bucket_name_problem(fixed):
        return EXAMPLE_BUCKET
    return fixed


def require_bucket_name(bucket: str) -> str:
    """A bucket name (``s3://name`` accepted) checked against S3's naming rules before any call."""
    name = (bucket or "").strip()
    if name.startswith("s3://"):
        name = name[len("s3://") :].split("/")[0]
    if problem := bucket_name_problem(name):
        close = suggest_bucket_name(name)
        raise BucketError(
            f"{bucket!r} is not an S3 bucket name ({problem}): pass the name of a bucket you can write, "
            + (f"e.g. bucket={close!r}." if close == EXAMPLE_BUCKET else f"perhaps bucket={close!r}?")
        )
    return name


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


def _client_error_code(err: Exception) -> str:
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")


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
            "helpers.aws.offline.offline()."
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
            f"AWS rejected these credentials ({_client_error_code(err) or type(err).__name__}): "
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
    if check_bucket:
        _check_bucket(session, bucket, region)
    return AwsContext(
        session,
        region,
        account,
        role,
        bucket,
        resolve_attendee(attendee, metadata or {}),
        "SageMaker Studio" if metadata else "laptop",
    )


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
            f"({_client_error_code(err) or 'GetRole'}), so whether SageMaker can assume it is unknown: "
            f"{fix}; if {name} is one, its ARN will do."
        ) from None
    if not trusts_sagemaker(role.get("AssumeRolePolicyDocument") or {}):
        raise RoleError(
            f"these credentials come from role {name}, which SageMaker cannot assume (its trust policy "
            f"does not name {SAGEMAKER_PRINCIPAL}), so a launch would fail: {fix}."
        )
    return role["Arn"]


def trusts_sagemaker(policy: dict | str) -> bool:
    """Whether a role's trust policy (a dict, or the URL-encoded JSON IAM sends) lets SageMaker assume the role."""
    document: dict = json.loads(urllib.parse.unquote(policy)) if isinstance(policy, str) else policy
    statements = document.get("Statement") or []
    statements = [statements] if isinstance(statements, dict) else statements
    allowed = [s.get("Effect") == "Allow" and _names_sagemaker(s) for s in statements]
    denied = [s.get("Effect") == "Deny" and _names_sagemaker(s) for s in statements]
    return any(allowed) and not any(denied)


def _names_sagemaker(statement: dict) -> bool:
    """The statement is about SageMaker calling sts:AssumeRole."""

    def as_list(value):
        return [value] if isinstance(value, str) else list(value or [])

    actions = [a.lower() for a in as_list(statement.get("Action"))]
    if not {"sts:assumerole", "sts:*", "*"} & set(actions):
        return False
    principal = statement.get("Principal") or {}
    if principal == "*":
        return True
    return isinstance(principal, dict) and SAGEMAKER_PRINCIPAL in as_list(principal.get("Service"))


def _check_bucket(session, bucket: str, region: str) -> None:
    from botocore.exceptions import ClientError

    try:
        session.client("s3", region_name=region).head_bucket(Bucket=bucket)
    except ClientError as err:
        code = _client_error_code(err)
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


QUOTA_SERVICE = "sagemaker"
USAGE_SCAN_LIMIT = 100  # running jobs described to count the instances they hold; more are counted, not described
_quota_codes: dict[str, str] = {}  # quota name -> Service Quotas code: the same in every account and region


@dataclass(frozen=True)
class QuotaCheck:
    quota_name: str
    limit: float
    requested: int
    quota_code: str = ""
    default: bool = False  # the limit is AWS's default: no increase was ever applied to this account
    in_use: int = 0  # instances of the type held by this account's running training jobs (same purchase option)
    unscanned_jobs: int = 0  # running jobs past USAGE_SCAN_LIMIT whose instances are not in ``in_use``

    @property
    def ok(self) -> bool:
        return self.in_use + self.requested <= self.limit


def quota_name(instance_type: str, spot: bool = False) -> str:
    """The Service Quotas name SageMaker uses: ``ml.p4d.24xlarge for spot training job usage``."""
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


# Besides each type's quota, an account-wide one caps the instances of all training jobs together (on-demand:
# L-00C91CB5; spot has its own). At an event, many attendees' small jobs reach it before any type's quota.
ACCOUNT_WIDE = {
    False: "Number of instances across all training jobs",
    True: "Number of instances across all spot training jobs",
}


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
        check = _check(quotas, quota_name(instance_type, spot), instance_count)
        overall = _check(quotas, ACCOUNT_WIDE[spot], instance_count) if check and check.ok else None
    except (ClientError, BotoCoreError):
        return None
    if check is None:
        return None
    if check.ok:  # too low even for an idle account: no need to look at running jobs
        try:
            held, unscanned = _instances_in_use(boto_session.client("sagemaker", region_name=region), spot)
            check = replace(check, in_use=held.get(instance_type, 0), unscanned_jobs=unscanned)
            if overall is not None:
                overall = replace(overall, in_use=sum(held.values()), unscanned_jobs=unscanned)
        except (ClientError, BotoCoreError):
            pass  # cannot list jobs: the quotas alone are still a useful check
    for c in (check, overall):
        if c is not None and not c.ok:
            raise QuotaError(_quota_message(c))
    return check


def _check(client, wanted: str, requested: int) -> QuotaCheck | None:
    found = _quota_value(client, wanted)
    if found is None:
        return None
    limit, code, default = found
    return QuotaCheck(wanted, limit, requested, quota_code=code, default=default)


def _quota_value(client, wanted: str) -> tuple[float, str, bool] | None:
    """(value, code, is AWS's default) of the SageMaker quota named ``wanted``; None when there is no such quota.

    ListServiceQuotas leaves out quotas still at their default, so the code comes from the defaults list (once per
    process) and the value from GetServiceQuota, or the default when no value was ever applied.
    """
    from botocore.exceptions import ClientError

    code, default = _quota_codes.get(wanted), None
    if code is None:
        pages = client.get_paginator("list_aws_default_service_quotas").paginate(
            ServiceCode=QUOTA_SERVICE, PaginationConfig={"PageSize": 100}
        )
        for page in pages:
            hit = next((q for q in page.get("Quotas", []) if q.get("QuotaName") == wanted), None)
            if hit:
                code, default = hit["QuotaCode"], float(hit.get("Value", 0))
                break
        _quota_codes[wanted] = code or ""  # a name Service Quotas does not list is not looked for again
    if not code:
        return None
    try:
        return float(client.get_service_quota(ServiceCode=QUOTA_SERVICE, QuotaCode=code)["Quota"]["Value"]), code, False
    except ClientError as err:
        if _client_error_code(err) != "NoSuchResourceException":  # the answer when no value was ever applied
            raise
    if default is None:
        default = float(
            client.get_aws_default_service_quota(ServiceCode=QUOTA_SERVICE, QuotaCode=code)["Quota"]["Value"]
        )
    return default, code, True


def _instances_in_use(client, spot: bool) -> tuple[Counter, int]:
    """Instances held by this account's running training jobs of one purchase option (spot and on-demand have separate
    quotas), by type, and how many running jobs were past ``USAGE_SCAN_LIMIT`` and not counted."""
    from botocore.exceptions import ClientError

    pages = client.get_paginator("list_training_jobs").paginate(
        StatusEquals="InProgress", PaginationConfig={"PageSize": 100, "MaxItems": 10 * USAGE_SCAN_LIMIT}
    )
    running = [s["TrainingJobName"] for page in pages for s in page["TrainingJobSummaries"]]

    def held(name: str) -> Counter | None:
        try:
            desc = client.describe_training_job(TrainingJobName=name)
        except ClientError:
            return None
        if desc.get("TrainingJobStatus") != "InProgress" or bool(desc.get("EnableManagedSpotTraining")) != spot:
            return Counter()
        config = desc.get("ResourceConfig") or {}
        groups = config.get("InstanceGroups") or [
            {
                "InstanceType": config.get("SelectedInstanceType") or config.get("InstanceType"),
                "InstanceCount": config.get("SelectedInstanceCount") or config.get("InstanceCount"),
            }
        ]
        return Counter({g.get("InstanceType"): int(g.get("InstanceCount") or 0) for g in groups})

    with ThreadPoolExecutor(max_workers=8) as pool:  # boto3 clients are thread-safe; describes are independent
        counts = list(pool.map(held, running[:USAGE_SCAN_LIMIT]))
    return sum((c for c in counts if c), Counter()), len(running) - len(counts) + counts.count(None)


def _quota_message(check: QuotaCheck) -> str:
    held = f", {check.in_use} of them held by running training jobs in this account," if check.in_use else ""
    default = " (AWS's default: no increase was ever applied here)" if check.default else ""
    unscanned = (
        f" {check.unscanned_jobs} more running job(s) were not inspected, so even more may be in use."
        if check.unscanned_jobs
        else ""
    )
    code = f", code {check.quota_code}" if check.quota_code else ""
    wait = (
        " wait for running jobs to finish (helpers.aws.account.cleanup() stops yours; ask the others about theirs),"
        if check.in_use
        else ""
    )
    return (
        f"the account's quota '{check.quota_name}' is {check.limit:g}{held} and this job asks for "
        f"{check.requested}{default}.{unscanned} Request an increase to at least {check.in_use + check.requested} "
        f"(Service Quotas console > AWS services > Amazon SageMaker > '{check.quota_name}'{code}),{wait} or use "
        f"fewer instances or another type."
    )


def cleanup(attendee: str | None = None, boto_session=None, region: str | None = None, stop: bool = True) -> list[str]:
    """Stop this attendee's training jobs that are still running; returns their names.

    Only jobs named ``<attendee>-...`` AND tagged ``workshop-attendee=<attendee>`` are touched: a name prefix alone
    would let ``alice`` stop ``alice-smith``'s jobs. ``stop=False`` lists them without stopping.
    """
    import boto3
    from botocore.exceptions import ClientError

    who = resolve_attendee(attendee)
    if who.shared:
        raise AwsSetupError(
            f"the attendee prefix would be the shared login name {who.name!r}, which could match "
            f"other learners' jobs: pass attendee='yourname' or set {ATTENDEE_ENV}."
        )
    session = boto_session or boto3.Session(region_name=region)
    client = session.client("sagemaker", region_name=region or session.region_name)
    prefix = f"{who.name}-"
    candidates = []
    for page in client.get_paginator("list_training_jobs").paginate(NameContains=prefix, StatusEquals="InProgress"):
        # NameContains matches anywhere in the name: keep only jobs that start with the prefix
        candidates += [s for s in page["TrainingJobSummaries"] if s["TrainingJobName"].startswith(prefix)]
    names = []
    for summary in candidates:  # every owner is confirmed before anything is stopped
        try:
            tags = [
                t
                for page in client.get_paginator("list_tags").paginate(ResourceArn=summary["TrainingJobArn"])
                for t in page.get("Tags", [])
            ]
        except ClientError as err:
            raise AwsSetupError(
                f"cannot read the tags of {summary['TrainingJobName']} "
                f"({_client_error_code(err) or 'ListTags'}) to confirm it is yours, so nothing was "
                f"stopped: these credentials need sagemaker:ListTags, or stop your jobs in the "
                f"SageMaker console (Training > Training jobs)."
            ) from None
        if {"Key": ATTENDEE_TAG, "Value": who.name} in tags:
            names.append(summary["TrainingJobName"])
    if stop:
        for name in names:
            client.stop_training_job(TrainingJobName=name)
    return names


@dataclass(frozen=True)
class Stored:
    """What an attendee keeps in the workshop bucket: everything under ``s3://<bucket>/<attendee>/``."""

    bucket: str
    prefix: str
    keys: tuple[str, ...]
    bytes: int
    deleted: bool = False

    def __repr__(self) -> str:
        where = f"s3://{self.bucket}/{self.prefix}"
        if self.deleted:
            return f"deleted {len(self.keys)} object(s), {self.bytes / 1e6:.1f} MB, under {where}"
        if not self.keys:
            return f"nothing stored under {where}"
        return (
            f"{len(self.keys)} object(s), {self.bytes / 1e6:.1f} MB, under {where}: "
            "account.stored_objects(delete=True) removes them (the bucket's lifecycle rule would, in time)"
        )


def stored_objects(
    attendee: str | None = None,
    bucket: str | None = None,
    boto_session=None,
    region: str | None = None,
    delete: bool = False,
) -> Stored:
    """This attendee's objects in the workshop bucket (code, inputs, outputs, checkpoints), listed; deleted only
    with ``delete=True``. Only keys under ``<attendee>/`` are touched, and a shared login name is refused."""
    import boto3

    who = resolve_attendee(attendee)
    if who.shared:
        raise AwsSetupError(
            f"the attendee prefix would be the shared login name {who.name!r}, which holds other learners' data "
            f"too: pass attendee='yourname' or set {ATTENDEE_ENV}."
        )
    bucket = require_bucket_name(bucket or os.environ.get(BUCKET_ENV, ""))
    session = boto_session or boto3.Session(region_name=region)
    s3 = session.client("s3", region_name=region or session.region_name)
    prefix = f"{who.name}/"
    found = [
        (o["Key"], o.get("Size", 0))
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        for o in page.get("Contents", [])
        if o["Key"].startswith(prefix)
    ]
    keys = tuple(k for k, _ in found)
    if delete:
        for i in range(0, len(keys), 1000):  # DeleteObjects takes at most 1,000 keys
            s3.delete_objects(
                Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys[i : i + 1000]], "Quiet": True}
            )
    return Stored(bucket, prefix, keys, sum(s for _, s in found), deleted=delete and bool(keys))


# The event stack's outputs (infra/workshop-account.yaml) and what each one sets for the helpers and the labs
STACK_OUTPUTS = {
    "RoleArn": ROLE_ENV[0],
    "BucketName": BUCKET_ENV,
    "SubnetIds": "lab 05: subnets",
    "SecurityGroupIds": "lab 05: security_groups",
    "FileSystemId": "lab 05: fsx_id",
    "FileSystemMountName": "lab 05: fsx_mount_name",
    "StudioDomainId": "Studio: domain id",
}


def settings_from_stack(outputs: list[dict]) -> dict[str, str]:
    """The settings an event stack's outputs (DescribeStacks' ``Outputs``) give: checked as the helpers check them."""
    given = {o["OutputKey"]: o["OutputValue"] for o in outputs}
    missing = [k for k in ("RoleArn", "BucketName") if k not in given]
    if missing:
        raise AwsSetupError(
            f"the stack has no {', '.join(missing)} output: deploy infra/workshop-account.yaml, not another template."
        )
    require_role_arn(given["RoleArn"])
    require_bucket_name(given["BucketName"])
    return {STACK_OUTPUTS[k]: v for k, v in given.items() if k in STACK_OUTPUTS}


def stack_exports(stack: str, boto_session=None, region: str | None = None) -> str:
    """``export`` lines for a shell (or Studio's terminal) from a deployed event stack, plus lab 05's values."""
    import boto3

    session = boto_session or boto3.Session(region_name=region)
    cfn = session.client("cloudformation", region_name=region or session.region_name)
    outputs = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    lines = []
    for name, value in settings_from_stack(outputs).items():
        lines.append(f"export {name}={value}" if name.startswith("WORKSHOP_") else f"# {name} = {value!r}")
    return "\n".join(lines)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(prog="python -m helpers.aws.account", description="The event account's settings.")
    ap.add_argument("command", choices=["env"], help="env: print export lines from the event stack's outputs")
    ap.add_argument("--stack", required=True, help="the CloudFormation stack made from infra/workshop-account.yaml")
    ap.add_argument("--region", default=None)
    a = ap.parse_args()
    print(stack_exports(a.stack, region=a.region))
