"""What an attendee leaves behind on the account, and how to end it: their running training jobs
(:func:`cleanup`), the warm pools that keep billing after a job (:func:`release_warm_pools`) and their objects in the
workshop bucket (:func:`stored_objects`). Only what is named and tagged theirs is touched; a shared login name is
refused. Each lab's clean-up cell calls these."""

from __future__ import annotations

import os
from dataclasses import dataclass

from helpers.aws.account import ATTENDEE_TAG
from helpers.aws.settings import ATTENDEE_ENV, BUCKET_ENV, require_bucket_name, resolve_attendee, sanitize_attendee
from helpers.aws.setup_errors import AwsSetupError, client_error_code


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
                f"({client_error_code(err) or 'ListTags'}) to confirm it is yours, so nothing was "
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
            "leftovers.stored_objects(delete=True) removes them (the bucket's lifecycle rule would, in time)"
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


def release_warm_pools(
    attendee: str | None = None, boto_session=None, region: str | None = None, release: bool = True
) -> list[str]:
    """The training jobs whose warm pool still holds (and bills) instances, released: a warm pool outlives its job by
    its KeepAlivePeriodInSeconds, and only UpdateTrainingJob with 0 ends it early. ``attendee``: only that
    attendee's jobs (named and tagged theirs); None: every job of the account (the facilitator's clean-up)."""
    import boto3

    session = boto_session or boto3.Session(region_name=region)
    client = session.client("sagemaker", region_name=region or session.region_name)
    prefix = f"{sanitize_attendee(attendee)}-" if attendee else ""
    filters = {"WarmPoolStatusEquals": "Available"} | ({"NameContains": prefix} if prefix else {})
    names = []
    for page in client.get_paginator("list_training_jobs").paginate(**filters):
        for job in page["TrainingJobSummaries"]:
            if prefix and not job["TrainingJobName"].startswith(prefix):
                continue
            if prefix:
                tags = client.list_tags(ResourceArn=job["TrainingJobArn"]).get("Tags", [])
                if {"Key": ATTENDEE_TAG, "Value": prefix[:-1]} not in tags:
                    continue
            names.append(job["TrainingJobName"])
    if release:
        for name in names:
            client.update_training_job(TrainingJobName=name, ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    return names
