"""The settings a launch takes: the attendee prefix, the execution role and the bucket, each checked against AWS's
rules before any call (a refusal names the fix), and whether a role's trust policy lets SageMaker assume it.
:mod:`helpers.aws.account` finds their values (arguments, environment, Studio); an event stack's outputs set them
(``python -m course.event.stack env --stack workshop``)."""

from __future__ import annotations

import getpass
import hashlib
import json
import os
import re
import urllib.parse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.aws.setup_errors import AwsSetupError, BucketError, RoleError

ROLE_ENV = ("WORKSHOP_ROLE_ARN", "SAGEMAKER_ROLE_ARN")
BUCKET_ENV = "WORKSHOP_BUCKET"
ATTENDEE_ENV = "WORKSHOP_ATTENDEE"
SAGEMAKER_PRINCIPAL = "sagemaker.amazonaws.com"
# login names shared by everyone on a platform: useless for telling attendees apart
GENERIC_USERS = frozenset({"sagemaker-user", "root", "ec2-user", "jovyan", "ubuntu", "user", "runner", "admin"})
ROLE_ARN_PATTERN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/[\w+=,.@/-]+$")
_ATTENDEE_MAX = 16  # leaves room for the lab name and the SDK's 15-character timestamp in a 63-character job name


@dataclass(frozen=True)
class Attendee:
    name: str  # the job-name prefix: lower-case letters, digits and dashes
    source: str  # where it came from: "argument", "WORKSHOP_ATTENDEE", "Studio user profile", "login name"

    @property
    def shared(self) -> bool:
        """True when the name is a login every attendee has (``sagemaker-user``): not safe to launch or clean up."""
        return self.source == "login name" and self.name in GENERIC_USERS


def sanitize_attendee(raw: str) -> str:
    """The attendee's prefix: what SageMaker job names allow, at most 16 characters, and one identity per name.

    A name that is already a prefix stays as it is (``alice``, ``bob-2``, a Studio user profile). Any other (one that
    had to be cleaned, or cut to the limit) keeps as much of itself as fits beside four characters of a hash of the
    whole name, so two names that clean or cut to the same text stay two identities: ``christina.anderson`` and
    ``christina.andersen`` become ``christina-a-882a`` and ``christina-a-ede2``, not one ``christina-anders``
    that ``cleanup()`` and ``stored_objects()`` would treat as one learner."""
    given = raw.strip()
    name = re.sub(r"[^a-z0-9]+", "-", given.lower()).strip("-")
    if name and not name[0].isalpha():
        name = f"a{name}"
    if name == given and len(name) <= _ATTENDEE_MAX:
        return name
    if not name:
        return ""
    digest = hashlib.sha256(given.encode("utf-8")).hexdigest()[:4]
    return f"{name[: _ATTENDEE_MAX - 5].rstrip('-')}-{digest}"


STUDIO_METADATA = Path("/opt/ml/metadata/resource-metadata.json")


def studio_metadata(path: Path | None = None) -> dict[str, Any] | None:
    """SageMaker Studio's and notebook instances' ``resource-metadata.json``; None elsewhere."""
    try:
        return json.loads(Path(path or STUDIO_METADATA).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


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
    if ROLE_ARN_PATTERN.match(role):
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
