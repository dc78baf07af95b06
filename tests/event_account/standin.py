"""SageMaker's training-job API as the room's enforcer (infra/enforcer.py) meets it, offline, behind a real botocore
client: the client validates and serializes each call as it would for AWS, this stand-in answers it at the HTTP layer
(botocore's ``before-send`` event: nothing leaves the machine), and botocore parses the answer, raises its errors and
retries its throttling as it would AWS's. What the stand-in keeps of AWS's documented behaviour:

- at most 50 user tags a resource (AddTags past it fails); a tag value only of letters, digits, spaces and _.:/=+-@;
- a job's ResourceConfig as it was created: InstanceGroups (a heterogeneous cluster) or InstancePreferences carry no
  top-level InstanceCount; rule evaluators are the job's DebugRuleConfigurations and ProfilerRuleConfigurations;
- ListTrainingJobs: 10 a page by default (NextToken), newest first, NameContains anywhere in the name;
- StopTrainingJob on a job not InProgress fails (ValidationException); a stopped job goes Stopping, then Stopped;
- a job with KeepAlivePeriodInSeconds keeps its instances in a warm pool (WarmPoolStatus Available) after it ends,
  until UpdateTrainingJob sets the period to 0 (Terminated);
- throttling: ThrottlingException at a rate per operation, or always for chosen jobs (``throttle``, ``unreadable``)."""

from __future__ import annotations

import copy
import json
import random
import re
from pathlib import Path

import botocore.session
from botocore.awsrequest import AWSResponse
from botocore.config import Config
from botocore.validate import validate_parameters

HERE = Path(__file__).resolve().parent
EVENT = json.loads((HERE / "job-state-change-inprogress.json").read_text(encoding="utf-8"))
SCHEDULED = json.loads((HERE / "scheduled-event.json").read_text(encoding="utf-8"))
ACCOUNT, REGION = EVENT["account"], EVENT["region"]
SESSION = botocore.session.get_session()  # one for every client: its loader reads the service's model once
MODEL = SESSION.get_service_model("sagemaker")
TAG_VALUE = re.compile(r"[\w .:/=+@-]*")  # the API's pattern: letters, digits, spaces (\p{L}\p{Z}\p{N}) and _.:/=+-@
MAX_TAGS = 50


class Refused(Exception):
    def __init__(self, code: str, message: str, status: int = 400):
        super().__init__(message)
        self.code, self.status = code, status


class _Body:
    def __init__(self, data: bytes):
        self.data = data

    def stream(self, **_):
        yield self.data


class SageMakerStandIn:
    def __init__(self, throttle: dict[str, float] | None = None, unreadable: set[str] = frozenset(), seed: int = 0):
        self.jobs: dict[str, dict] = {}
        self.tags: dict[str, dict[str, str]] = {}
        self.clock = 1_795_860_000.0
        self.throttle, self.unreadable, self.rng = throttle or {}, set(unreadable), random.Random(seed)
        self.calls: list[tuple[str, dict]] = []
        self.throttled = 0

    # ---- the client, and the HTTP layer it talks to
    def client(self, retries: dict):
        sm = SESSION.create_client(
            "sagemaker",
            region_name=REGION,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key="not-a-secret",  # noqa: S106 (a stand-in's; nothing is sent)
            config=Config(retries=dict(retries)),
        )
        sm.meta.events.register("before-send.sagemaker", self._answer)
        return sm

    def _answer(self, request, **_):
        target = request.headers["X-Amz-Target"]
        operation = (target.decode() if isinstance(target, bytes) else target).split(".")[-1]
        params = json.loads(request.body or b"{}")
        self.calls.append((operation, params))
        try:
            self._maybe_throttle(operation, params)
            status, body = 200, getattr(self, operation)(**params)
        except Refused as e:
            status, body = e.status, {"__type": e.code, "message": str(e)}
        headers = {"x-amzn-requestid": f"req-{len(self.calls)}", "content-type": "application/x-amz-json-1.1"}
        return AWSResponse(request.url, status, headers, _Body(json.dumps(body).encode()))

    def _maybe_throttle(self, operation: str, params: dict):
        named = params.get("TrainingJobName") or params.get("ResourceArn", "").rsplit("/", 1)[-1]
        if named in self.unreadable or self.rng.random() < self.throttle.get(operation, 0.0):
            self.throttled += 1
            raise Refused("ThrottlingException", "Rate exceeded")

    # ---- what the test does to the account (validated as the real request would be)
    def create(self, request: dict, seconds_later: float = 1.0) -> dict:
        """A job created from a real CreateTrainingJob request, InProgress; the event EventBridge delivers for it."""
        validate_parameters(request, MODEL.operation_model("CreateTrainingJob").input_shape)
        self.clock += seconds_later
        self.CreateTrainingJob(**json.loads(json.dumps(request)))
        return self.event(request["TrainingJobName"])

    def event(self, name: str) -> dict:
        out = copy.deepcopy(EVENT)
        out["detail"] = {k: v for k, v in self.jobs[name].items() if k != "CreationTime"} | {
            "CreationTime": int(self.jobs[name]["CreationTime"] * 1000),  # the event's epoch milliseconds
            "Tags": self.tags[self.jobs[name]["TrainingJobArn"]],
        }
        out["resources"] = [self.jobs[name]["TrainingJobArn"]]
        return out

    def end(self, name: str, status: str = "Completed"):
        """The job ends (a stopping one: Stopped); with a keep-alive period its instances stay in a warm pool."""
        job = self.jobs[name]
        job["TrainingJobStatus"] = "Stopped" if job["TrainingJobStatus"] == "Stopping" else status
        if job["ResourceConfig"].get("KeepAlivePeriodInSeconds"):
            job["WarmPoolStatus"] = {"Status": "Available"}

    def holding(self) -> dict[str, str]:
        """Each job that holds instances now: running, or in a warm pool."""
        held = {n: j["TrainingJobStatus"] for n, j in self.jobs.items() if j["TrainingJobStatus"] == "InProgress"}
        pools = {
            n: "warm pool" for n, j in self.jobs.items() if j.get("WarmPoolStatus", {}).get("Status") == "Available"
        }
        return held | pools

    # ---- the API
    def CreateTrainingJob(self, TrainingJobName, Tags=(), **request):  # noqa: N802, N803 (the API's names)
        if TrainingJobName in self.jobs:
            raise Refused("ResourceInUse", f"Training job names must be unique: {TrainingJobName}")
        if len(Tags) > MAX_TAGS:
            raise Refused("ValidationException", f"{len(Tags)} tags: at most {MAX_TAGS}")
        arn = f"arn:aws:sagemaker:{REGION}:{ACCOUNT}:training-job/{TrainingJobName}"
        self.jobs[TrainingJobName] = request | {
            "TrainingJobName": TrainingJobName,
            "TrainingJobArn": arn,
            "TrainingJobStatus": "InProgress",
            "SecondaryStatus": "Starting",
            "CreationTime": self.clock,
            "LastModifiedTime": self.clock,
        }
        self.tags[arn] = {t["Key"]: t.get("Value", "") for t in Tags}
        return {"TrainingJobArn": arn}

    def _job(self, name: str) -> dict:
        if name not in self.jobs:
            raise Refused("ValidationException", "Requested resource not found.")
        return self.jobs[name]

    def DescribeTrainingJob(self, TrainingJobName):  # noqa: N802, N803
        return self._job(TrainingJobName)

    def ListTrainingJobs(self, MaxResults=10, NextToken=None, NameContains="", StatusEquals=None, **filters):  # noqa: N802, N803
        pool = filters.pop("WarmPoolStatusEquals", None)
        assert not {k for k in filters if k not in ("SortBy", "SortOrder")}, filters
        found = [
            j
            for j in sorted(self.jobs.values(), key=lambda j: -j["CreationTime"])
            if NameContains in j["TrainingJobName"]
            and (StatusEquals is None or j["TrainingJobStatus"] == StatusEquals)
            and (pool is None or j.get("WarmPoolStatus", {}).get("Status") == pool)
        ]
        start = int(NextToken or 0)
        keys = ("TrainingJobName", "TrainingJobArn", "CreationTime", "TrainingJobStatus", "WarmPoolStatus")
        page = [{k: j[k] for k in keys if k in j} for j in found[start : start + MaxResults]]
        more = start + MaxResults < len(found)
        return {"TrainingJobSummaries": page} | ({"NextToken": str(start + MaxResults)} if more else {})

    def StopTrainingJob(self, TrainingJobName):  # noqa: N802, N803
        job = self._job(TrainingJobName)
        if job["TrainingJobStatus"] != "InProgress":
            raise Refused("ValidationException", f"The job is {job['TrainingJobStatus']}: it cannot be stopped")
        job["TrainingJobStatus"] = "Stopping"
        return {}

    def UpdateTrainingJob(self, TrainingJobName, ResourceConfig=None, **other):  # noqa: N802, N803
        job = self._job(TrainingJobName)
        keep = (ResourceConfig or {}).get("KeepAlivePeriodInSeconds")
        pool = job.get("WarmPoolStatus", {}).get("Status")
        if keep is None or (job["TrainingJobStatus"] != "InProgress" and pool != "Available"):
            raise Refused("ValidationException", "Only a running job's or an available warm pool's keep-alive")
        job["ResourceConfig"]["KeepAlivePeriodInSeconds"] = keep
        if pool == "Available" and keep == 0:
            job["WarmPoolStatus"] = {"Status": "Terminated"}
        return {"TrainingJobArn": job["TrainingJobArn"]}

    def AddTags(self, ResourceArn, Tags):  # noqa: N802, N803
        tags = self.tags[ResourceArn] | {t["Key"]: t.get("Value", "") for t in Tags}
        if len(tags) > MAX_TAGS:
            raise Refused("ValidationException", f"a resource has at most {MAX_TAGS} tags")
        bad = [t["Value"] for t in Tags if not TAG_VALUE.fullmatch(t.get("Value", ""))]
        if bad:
            raise Refused("ValidationException", f"tag value {bad[0]!r} fails the pattern")
        self.tags[ResourceArn] = tags
        return {"Tags": Tags}

    def ListTags(self, ResourceArn, **_):  # noqa: N802, N803
        return {"Tags": [{"Key": k, "Value": v} for k, v in self.tags[ResourceArn].items()]}
