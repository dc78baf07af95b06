"""What stops a launch before anything is launched: :class:`AwsSetupError` and its kinds, each with a message that
says how to fix it, and the error code in an answer from AWS."""

from __future__ import annotations

from helpers.errors import WorkshopError


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


def client_error_code(err: Exception) -> str:
    """The code of the error AWS answered with (``"AccessDenied"``, ``"NoSuchBucket"``...); "" for another error."""
    return getattr(err, "response", {}).get("Error", {}).get("Code", "")
