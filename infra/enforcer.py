"""The room's limits that IAM cannot express, enforced as each training job starts (infra/workshop-account.yaml's
EventBridge rule on SageMaker's training-job state changes calls this, inline in the template as the JobLimits
function): a job of more than MAX_INSTANCES_PER_JOB instances, or one that takes its attendee over
MAX_INSTANCES_PER_ATTENDEE instances at once (counting their jobs started before it), is stopped and tagged with why."""

import os

TAG = "workshop-attendee"
STOPPED_TAG = "workshop-stopped-by-limit"


def limits():
    return int(os.environ["MAX_INSTANCES_PER_JOB"]), int(os.environ["MAX_INSTANCES_PER_ATTENDEE"])


def attendee_of(detail):
    tags = detail.get("Tags") or {}
    if isinstance(tags, list):
        tags = {t["Key"]: t["Value"] for t in tags}
    return tags.get(TAG)


def verdict(detail, earlier):
    """Why the job of ``detail`` must stop, or None. ``earlier``: the instance counts of its attendee's other
    InProgress jobs created before it."""
    per_job, per_attendee = limits()
    count = int(detail["ResourceConfig"]["InstanceCount"])
    if count > per_job:
        return f"{count} instances in one job: the room allows {per_job} a job"
    held = sum(earlier) + count
    if attendee_of(detail) and held > per_attendee:
        return f"{attendee_of(detail)} would hold {held} instances at once: the room allows {per_attendee} an attendee"
    return None


def earlier_jobs(sm, detail):
    """The instance counts of the same attendee's InProgress jobs created before this one (their names start with
    the attendee's prefix: the attendee policy allows no other)."""
    who, name = attendee_of(detail), detail["TrainingJobName"]
    if not who:
        return []
    pages = sm.get_paginator("list_training_jobs").paginate(NameContains=f"{who}-", StatusEquals="InProgress")
    others = [j for page in pages for j in page["TrainingJobSummaries"] if j["TrainingJobName"] != name]
    mine = detail["CreationTime"]
    out = []
    for job in others:
        described = sm.describe_training_job(TrainingJobName=job["TrainingJobName"])
        if attendee_of({"Tags": sm.list_tags(ResourceArn=job["TrainingJobArn"])["Tags"]}) != who:
            continue
        created = described["CreationTime"]
        created = created.timestamp() * 1000 if hasattr(created, "timestamp") else created
        if (created, job["TrainingJobName"]) < (mine, name):
            out.append(int(described["ResourceConfig"]["InstanceCount"]))
    return out


def handle(event, sm):
    detail = event["detail"]
    if detail.get("TrainingJobStatus") != "InProgress":
        return None
    if "Tags" not in detail:  # an event without the job's tags: read them
        detail = detail | {"Tags": sm.list_tags(ResourceArn=detail["TrainingJobArn"])["Tags"]}
    why = verdict(detail, earlier_jobs(sm, detail))
    if why:
        print(f"stopping {detail['TrainingJobName']}: {why}")
        sm.add_tags(ResourceArn=detail["TrainingJobArn"], Tags=[{"Key": STOPPED_TAG, "Value": why[:256]}])
        try:
            sm.stop_training_job(TrainingJobName=detail["TrainingJobName"])
        except sm.exceptions.ClientError as e:  # already stopping: a second event of the same job
            print(f"not stopped: {e}")
    return why


def handler(event, context):
    import boto3

    return handle(event, boto3.client("sagemaker"))
