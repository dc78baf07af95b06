"""What the offline AWS answers by itself: the calls the SDK makes to build and follow a training job (STS, IAM,
S3, SageMaker, Service Quotas, CloudWatch Logs), each a method :class:`~sagemaker_standin.offline_account.OfflineAWS`
finds by service and operation (``_s3_PutObject``), and how a created job evolves (:class:`ScriptedJob`). A test scripts
other answers with ``OfflineAWS.respond``."""

from __future__ import annotations

import copy
import datetime as dt
import json
import threading
import urllib.parse
from dataclasses import dataclass, field


@dataclass
class ClientErrorAnswer:
    """An answer that makes botocore raise ``ClientError`` with this code, as AWS would."""

    code: str
    message: str
    status: int = 400


@dataclass
class ScriptedJob:
    """How a created training job evolves when it is described again and again (see ``OfflineAWS.script_job``)."""

    statuses: list[tuple[str, str]] = field(
        default_factory=lambda: [("InProgress", "Starting"), ("Completed", "Completed")]
    )
    log_lines: list[str] = field(default_factory=list)
    training_seconds: int | None = None
    billable_seconds: int | None = None
    final_metrics: dict[str, float] = field(default_factory=dict)
    failure_reason: str | None = None


class BuiltInAnswers:
    """The calls the SDK makes to build and follow a training job, answered: the built-in answers of
    :class:`~sagemaker_standin.offline_account.OfflineAWS`, which sets the attributes they read."""

    region: str
    bucket: str
    role_arn: str
    account: str
    objects: dict[str, dict[str, int]]  # bucket -> key -> size: what "was uploaded"
    jobs: dict[str, dict]  # training job name -> CreateTrainingJob request
    _describes: dict[str, int]
    _scripts: dict[str, ScriptedJob]
    _default_script: ScriptedJob | None
    _lock: threading.Lock

    def _now(self) -> dt.datetime:
        return dt.datetime(2026, 11, 22, 12, 0, 0, tzinfo=dt.timezone.utc)

    def _sts_GetCallerIdentity(self, params):
        role_name = self.role_arn.rsplit("/", 1)[-1]
        return {
            "Account": self.account,
            "UserId": "AROAOFFLINE:workshop",
            "Arn": f"arn:aws:sts::{self.account}:assumed-role/{role_name}/workshop",
        }

    def _iam_GetRole(self, params):
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Action": "sts:AssumeRole", "Principal": {"Service": "sagemaker.amazonaws.com"}}
            ],
        }
        return {
            "Role": {
                "RoleName": params["RoleName"],
                "Arn": self.role_arn,
                "Path": "/service-role/",
                "RoleId": "AROAOFFLINEROLE",
                "CreateDate": self._now(),
                # IAM sends policy documents URL-encoded; botocore's after-call handler decodes them
                "AssumeRolePolicyDocument": urllib.parse.quote(json.dumps(trust)),
            }
        }

    def _iam_SimulatePrincipalPolicy(self, params):
        return {
            "EvaluationResults": [
                {"EvalActionName": a, "EvalDecision": "allowed", "EvalResourceName": r}
                for a in params.get("ActionNames", [])
                for r in (params.get("ResourceArns") or ["*"])
            ],
            "IsTruncated": False,
        }

    def _s3_ListBuckets(self, params):
        return {
            "Buckets": [{"Name": self.bucket, "CreationDate": self._now()}],
            "Owner": {"ID": "offline", "DisplayName": "workshop"},
        }

    def _s3_HeadBucket(self, params):
        return {"BucketRegion": self.region}

    def _s3_GetBucketLocation(self, params):
        return {"LocationConstraint": None if self.region == "us-east-1" else self.region}

    def _put(self, bucket: str, key: str, size: int) -> None:
        with self._lock:
            self.objects.setdefault(bucket, {})[key] = size

    def _s3_PutObject(self, params):
        return {"ETag": '"offline"'}  # the object was recorded in _answer, where its body is at hand

    def _s3_CreateMultipartUpload(self, params):
        return {"Bucket": params["Bucket"], "Key": params["Key"], "UploadId": "offline-upload"}

    def _s3_UploadPart(self, params):
        return {"ETag": f'"offline-{params["PartNumber"]}"'}

    def _s3_CompleteMultipartUpload(self, params):
        self._put(params["Bucket"], params["Key"], 0)
        return {"Bucket": params["Bucket"], "Key": params["Key"], "ETag": '"offline"'}

    def _s3_ListObjectsV2(self, params):
        prefix = params.get("Prefix", "")
        keys = sorted(k for k in self.objects.get(params["Bucket"], {}) if k.startswith(prefix))
        contents = [{"Key": k, "Size": self.objects[params["Bucket"]][k], "LastModified": self._now()} for k in keys]
        return {
            "KeyCount": len(keys),
            "Contents": contents,
            "IsTruncated": False,
            "Name": params["Bucket"],
            "Prefix": prefix,
        }

    def _s3_DeleteObjects(self, params):
        with self._lock:
            held = self.objects.get(params["Bucket"], {})
            gone = [o["Key"] for o in params["Delete"]["Objects"] if held.pop(o["Key"], None) is not None]
        return {"Deleted": [{"Key": k} for k in gone]}

    def _sagemaker_CreateTrainingJob(self, params):
        name = params["TrainingJobName"]
        self.jobs[name] = params
        if name not in self._scripts and self._default_script is not None:
            self._scripts[name] = self._default_script
        return {"TrainingJobArn": self._job_arn(name)}

    def _job_arn(self, name: str) -> str:
        return f"arn:aws:sagemaker:{self.region}:{self.account}:training-job/{name}"

    def _sagemaker_DescribeTrainingJob(self, params):
        name = params["TrainingJobName"]
        if name not in self.jobs:
            return ClientErrorAnswer("ValidationException", f"Requested resource not found: {name}")
        request = copy.deepcopy(self.jobs[name])
        request.pop("Tags", None)  # DescribeTrainingJob does not return tags
        n = self._describes[name] = self._describes.get(name, -1) + 1
        script = self._scripts.get(name, ScriptedJob(statuses=[("InProgress", "Starting")]))
        status, secondary = script.statuses[min(n, len(script.statuses) - 1)]
        started = self._now()
        out = {
            **request,
            "TrainingJobArn": self._job_arn(name),
            "TrainingJobStatus": status,
            "SecondaryStatus": secondary,
            "CreationTime": started,
            "LastModifiedTime": started,
            "ModelArtifacts": {
                "S3ModelArtifacts": f"{request['OutputDataConfig']['S3OutputPath'].rstrip('/')}/"
                f"{name}/output/model.tar.gz"
            },
            "SecondaryStatusTransitions": [
                {"Status": s, "StartTime": started, "StatusMessage": s} for _, s in script.statuses[: n + 1]
            ],
        }
        if status in ("Completed", "Failed", "Stopped"):
            out["TrainingStartTime"] = started
            seconds = script.training_seconds or 0
            out["TrainingEndTime"] = started + dt.timedelta(seconds=seconds)
            out["TrainingTimeInSeconds"] = seconds
            out["BillableTimeInSeconds"] = script.billable_seconds if script.billable_seconds is not None else seconds
            out["FinalMetricDataList"] = [
                {"MetricName": k, "Value": v, "Timestamp": started} for k, v in script.final_metrics.items()
            ]
            if status == "Failed":
                out["FailureReason"] = script.failure_reason or "AlgorithmError: offline failure"
        return out

    def _sagemaker_ListTrainingJobs(self, params):
        wanted = params.get("StatusEquals")
        contains = params.get("NameContains", "")
        summaries = []
        for name in self.jobs:
            status = self._sagemaker_DescribeTrainingJob({"TrainingJobName": name})["TrainingJobStatus"]
            self._describes[name] -= 1  # listing does not advance the job's script
            if contains in name and (wanted is None or wanted == status):
                summaries.append(
                    {
                        "TrainingJobName": name,
                        "TrainingJobArn": self._job_arn(name),
                        "CreationTime": self._now(),
                        "TrainingJobStatus": status,
                    }
                )
        return {"TrainingJobSummaries": summaries}

    def _sagemaker_StopTrainingJob(self, params):
        name = params["TrainingJobName"]
        self._scripts[name] = ScriptedJob(statuses=[("Stopping", "Stopping"), ("Stopped", "Stopped")])
        self._describes[name] = -1
        return {}

    def _service_quotas_ListAWSDefaultServiceQuotas(self, params):
        return {"Quotas": []}  # no quota known by name: the quota check stays silent

    def _service_quotas_GetServiceQuota(self, params):
        return ClientErrorAnswer("NoSuchResourceException", f"no applied value for {params['QuotaCode']}")

    def _service_quotas_GetAWSDefaultServiceQuota(self, params):
        return ClientErrorAnswer("NoSuchResourceException", f"no quota {params['QuotaCode']}")

    def _sagemaker_ListTags(self, params):
        name = params["ResourceArn"].rsplit("/", 1)[-1]
        return {"Tags": list(self.jobs.get(name, {}).get("Tags", []))}

    def _cloudwatch_logs_DescribeLogStreams(self, params):
        prefix = params.get("logStreamNamePrefix", "")
        name = prefix.rstrip("/")
        if name not in self.jobs or not self._scripts.get(name, ScriptedJob()).log_lines:
            return {"logStreams": []}
        return {"logStreams": [{"logStreamName": f"{name}/algo-1-1700000000"}]}

    def _cloudwatch_logs_GetLogEvents(self, params):
        name = params["logStreamName"].split("/")[0]
        lines = self._scripts.get(name, ScriptedJob()).log_lines
        start = _token_index(params.get("nextToken"))
        batch = lines[start : start + 50]
        events = [
            {"timestamp": 1700000000000 + i, "message": m, "ingestionTime": 1700000000000 + i}
            for i, m in enumerate(batch, start)
        ]
        return {"events": events, "nextForwardToken": f"f/{start + len(batch)}", "nextBackwardToken": "b/0"}


def _token_index(token: str | None) -> int:
    return int(token.split("/")[-1]) if token else 0
