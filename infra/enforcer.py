"""The room's limits that IAM cannot express (infra/workshop-account.yaml's JobLimits function, inline). It judges each
training job as it starts (an EventBridge rule on SageMaker's state changes) and, every few minutes, every running job
and warm pool (a scheduled sweep, which catches an event that was lost), and it fails closed: a job it cannot read or
count is stopped, it stops before it tags, and an error it cannot absorb fails the call, which Lambda retries twice and
then sends to the dead-letter queue, whose alarm mails the facilitator.

A job is stopped (a warm pool released) when it holds more than MAX_INSTANCES_PER_JOB instances, or takes its attendee
over MAX_INSTANCES_PER_ATTENDEE at once (their running jobs and warm pools created before it come first); an
attendee's job also when it holds a type outside INSTANCE_TYPES or mounts FSx other than one channel of their own
directory, read-only. A job's instances: its hosts (InstanceCount, each of its InstanceGroups, the largest of its
InstancePreferences) and one for each debugger or profiler rule evaluator. Its attendee: whose job role it runs as
(the role's path is JOB_ROLE_PATH<attendee>/, the only role an attendee may pass), not its tags."""

import os
import re

from botocore.exceptions import ClientError

STOPPED_TAG = "workshop-stopped-by-limit"
# what holds instances: a running job, one stopping (until it has), a warm pool
HELD = ({"StatusEquals": "InProgress"}, {"StatusEquals": "Stopping"}, {"WarmPoolStatusEquals": "Available"})
RETRIES = {"mode": "standard", "max_attempts": 8}  # throttling backs off and retries before a call fails


def limit(name):
    return int(os.environ[name])


def attendee(job):
    path, role = os.environ["JOB_ROLE_PATH"], job["RoleArn"].partition(":role")[2]
    return role[len(path) :].split("/")[0] if role.startswith(path) else None


def instances(job):
    """[(instance type, count)] that ``job`` holds; an error for a shape it cannot count."""
    rc = job["ResourceConfig"]
    if rc.get("InstanceGroups"):
        hosts = [(g["InstanceType"], int(g["InstanceCount"])) for g in rc["InstanceGroups"]]
    elif rc.get("InstancePreferences"):  # SageMaker runs one of them: count the largest, check every type
        prefs = [(p["InstanceType"], int(p["InstanceCount"])) for p in rc["InstancePreferences"]]
        top = max(prefs, key=lambda h: h[1])
        hosts = [top] + [(t, 0) for t, n in prefs if (t, n) != top]
    else:
        hosts = [(rc["InstanceType"], int(rc["InstanceCount"]))]
    rules = job.get("DebugRuleConfigurations", []) + job.get("ProfilerRuleConfigurations", [])
    return hosts + [(r.get("InstanceType"), 1) for r in rules]


def verdict(job, before):
    """Why ``job`` must stop, or None; ``before``: the (type, count) its attendee holds in jobs created before it."""
    mine = instances(job)
    count = sum(n for _, n in mine)
    if count > limit("MAX_INSTANCES_PER_JOB"):
        return f"{count} instances in one job: the room allows {limit('MAX_INSTANCES_PER_JOB')} a job"
    who = attendee(job)
    if not who:  # the facilitator's jobs: the per-job limit only
        return None
    allowed = os.environ["INSTANCE_TYPES"].split(",")
    odd = sorted({t or "no type" for t, _ in mine} - set(allowed))
    if odd:
        return f"{' '.join(odd)}: the room allows {' '.join(allowed)}"
    fsx = [c["DataSource"].get("FileSystemDataSource") for c in job.get("InputDataConfig", [])]
    fsx = [f for f in fsx if f]
    if len(fsx) > 1:
        return f"{len(fsx)} FSx channels: the room allows one"
    for f in fsx:
        parts = f["DirectoryPath"].split("/")
        if ".." in parts or parts[2:3] != [who] or f["FileSystemAccessMode"] != "ro":
            return f"FSx channel {f['DirectoryPath']}: only /<mount>/{who}/ read-only"
    held = sum(n for _, n in before) + count
    if held > limit("MAX_INSTANCES_PER_ATTENDEE"):
        return f"{who} would hold {held} instances at once: the room allows {limit('MAX_INSTANCES_PER_ATTENDEE')}"
    return None


def listed(sm, **filters):
    """{name: summary} of the jobs that hold instances (running, or a warm pool), with ``filters``."""
    pages = [p for f in HELD for p in sm.get_paginator("list_training_jobs").paginate(**filters, **f)]
    return {s["TrainingJobName"]: s for p in pages for s in p["TrainingJobSummaries"]}


def stop(sm, job, why):
    """Stop ``job`` (release it, a warm pool), then tag it with why: a tag that fails changes nothing."""
    name = job["TrainingJobName"]
    print(f"stopping {name}: {why}")
    try:
        if job.get("TrainingJobStatus") == "InProgress":
            sm.stop_training_job(TrainingJobName=name)
        else:
            sm.update_training_job(TrainingJobName=name, ResourceConfig={"KeepAlivePeriodInSeconds": 0})
    except ClientError as e:  # already stopping or ended: a second event of the same job
        if e.response["Error"]["Code"] != "ValidationException":
            raise
        print(f"not stopped: {e}")
    try:
        value = re.sub(r"[^\w .:/=+@-]", " ", why)[:256]  # a tag value's characters
        sm.add_tags(ResourceArn=job["TrainingJobArn"], Tags=[{"Key": STOPPED_TAG, "Value": value}])
    except ClientError as e:
        print(f"not tagged: {e}")
    return why


def check(sm, name, arn):
    """One job, as it starts: judged against its attendee's running jobs and warm pools created before it."""
    job = {"TrainingJobName": name, "TrainingJobArn": arn, "TrainingJobStatus": "InProgress"}
    try:
        job = sm.describe_training_job(TrainingJobName=name)
        if job["TrainingJobStatus"] != "InProgress":
            return None
        who, before = attendee(job), []
        for other, summary in listed(sm, NameContains=f"{who}-").items() if who else ():
            if (summary["CreationTime"], other) < (job["CreationTime"], name):
                earlier = sm.describe_training_job(TrainingJobName=other)
                before += instances(earlier) if attendee(earlier) == who else []
        why = verdict(job, before)
    except Exception as e:  # noqa: BLE001 (fail closed: a job that cannot be counted is stopped)
        why = f"not counted ({type(e).__name__}: {e})"
    return stop(sm, job, why) if why else None


def sweep(sm):
    """Every job that holds instances, each attendee's oldest first: what a lost event left running is stopped."""
    stopped, kept = [], {}
    for name, job in sorted(listed(sm).items(), key=lambda item: (item[1]["CreationTime"], item[0])):
        try:
            job = sm.describe_training_job(TrainingJobName=name)
            who = attendee(job)
            why = None if job["TrainingJobStatus"] == "Stopping" else verdict(job, kept.get(who, []))
            kept.setdefault(who, []).extend([] if why else instances(job))
        except Exception as e:  # noqa: BLE001
            why = f"not counted ({type(e).__name__}: {e})"
        if why and job["TrainingJobStatus"] != "Stopping":
            stop(sm, job, why)
            stopped.append(name)
    return stopped


def handle(event, sm):
    if event.get("detail-type") == "Scheduled Event":
        return sweep(sm)
    return check(sm, event["detail"]["TrainingJobName"], event["detail"]["TrainingJobArn"])


def handler(event, context):
    import boto3
    from botocore.config import Config

    return handle(event, boto3.client("sagemaker", config=Config(retries=dict(RETRIES))))
