"""Run the real SageMaker SDK code path with no AWS account and no network.

A :class:`OfflineAWS` is a ``boto3.Session`` whose every API call is recorded after botocore has validated its
parameters against the service model, and then answered here instead of being sent: uploads are remembered (keys
only), ``CreateTrainingJob`` is stored and echoed back by ``DescribeTrainingJob``, and so on. The SDK cannot tell the
difference, so a captured ``CreateTrainingJob`` request is exactly what a real launch would send.

Two ways in:

* :func:`offline` — a context manager for notebooks and CI: fake credentials, SDK telemetry off, a network guard,
  and the session registered so ``helpers.aws.sagemaker_jobs.run`` picks it up::

      with aws_offline.offline():
          dry = run_job(job, "ml.p4d.24xlarge")     # prints the request; nothing leaves this machine

  Setting ``WORKSHOP_AWS_OFFLINE=1`` makes every dry run offline without touching the notebook.
* :class:`OfflineAWS` directly (the tests do), with :meth:`OfflineAWS.respond` to script answers.
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import json
import os
import socket
import tempfile
import threading
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from helpers.errors import WorkshopError

# placeholders that are obviously not a real account: the documentation account id AWS itself uses
ACCOUNT = "111122223333"
REGION = "us-east-1"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/service-role/AmazonSageMaker-ExecutionRole-workshop"
BUCKET = f"sagemaker-{REGION}-{ACCOUNT}"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "AKIAOFFLINEEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "offline-not-a-secret"}
OFFLINE_ENV_FLAG = "WORKSHOP_AWS_OFFLINE"
BODY_LIMIT = 1 << 20  # uploads up to this size are kept, so tests can read back what the SDK staged

# Telemetry off: the SDK reads SageMaker.PythonSDK.Modules.TelemetryOptOut from the config of the session it is
# given, or from the config files of a session it builds itself.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
_SDK_CONFIG_YAML = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


class NetworkBlocked(WorkshopError, ConnectionError):
    """Something tried to open a network connection inside an offline block."""


class OfflineCallUnanswered(WorkshopError, RuntimeError):
    """An AWS API call the offline session has no answer for: script one with ``OfflineAWS.respond``."""


@dataclass
class ApiCall:
    """One AWS API call as botocore validated it: ``service`` is botocore's id (``sagemaker``, ``s3``, ``iam``...)."""

    service: str
    operation: str
    params: dict
    body_size: int | None = None  # bytes in the request body (uploads)

    @property
    def name(self) -> str:
        return f"{self.service}.{self.operation}"


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


_shared_loader: list = []  # botocore's service-model loader, shared by every offline session of this process


def _botocore_session():
    """A fresh botocore session that reads no AWS config or profile of this machine (``AWS_PROFILE`` naming a
    profile that is missing here would otherwise fail it) and reuses the service models already loaded (~0.4 s per
    session otherwise)."""
    import botocore.session

    session = botocore.session.Session(
        session_vars={
            "profile": (None, None, None, None),
            "config_file": (None, None, os.devnull, None),
            "credentials_file": (None, None, os.devnull, None),
        }
    )
    if _shared_loader:
        session.register_component("data_loader", _shared_loader[0])
    else:
        _shared_loader.append(session.get_component("data_loader"))
    return session


class OfflineAWS:
    """A boto3 session that validates, records and answers every AWS API call locally.

    ``calls`` lists every call in order. ``request("CreateTrainingJob")`` is the last such request's parameters.
    Nothing is signed or sent: the answer replaces the HTTP request in botocore's ``before-call`` event.
    """

    def __init__(
        self,
        region: str = REGION,
        bucket: str = BUCKET,
        role_arn: str = ROLE_ARN,
        account: str = ACCOUNT,
        credentials: bool = True,
    ):
        import boto3

        self.region, self.bucket, self.role_arn, self.account = region, bucket, role_arn, account
        self.calls: list[ApiCall] = []
        self.objects: dict[str, dict[str, int]] = {}  # bucket -> key -> size: what "was uploaded"
        self.bodies: dict[tuple[str, str], bytes] = {}  # (bucket, key) -> content, for uploads up to BODY_LIMIT
        self.jobs: dict[str, dict] = {}  # training job name -> CreateTrainingJob request
        self._describes: dict[str, int] = {}
        self._scripts: dict[str, ScriptedJob] = {}
        self._default_script: ScriptedJob | None = None
        self._answers: dict[str, Callable[[dict], Any] | dict | ClientErrorAnswer] = {}
        self._lock = threading.Lock()  # s3transfer uploads from worker threads
        # credentials=False: a session that finds none of its own (to test what happens without credentials)
        keys = (
            dict(
                aws_access_key_id=FAKE_CREDENTIALS["AWS_ACCESS_KEY_ID"],
                aws_secret_access_key=FAKE_CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
            )
            if credentials
            else {}
        )
        self.boto_session = boto3.Session(botocore_session=_botocore_session(), region_name=region, **keys)
        # registered before any client exists, so every client this session creates carries them
        self.boto_session.events.register("before-parameter-build.*.*", self._capture)
        self.boto_session.events.register("before-call.*.*", self._answer)

    # ---- what the tests and the dry run read
    def calls_to(self, operation: str) -> list[ApiCall]:
        """Calls of one operation, by name (``"CreateTrainingJob"``) or ``"service.Operation"``."""
        return [c for c in self.calls if operation in (c.operation, c.name)]

    def request(self, operation: str) -> dict:
        """The parameters of the last call of ``operation``; KeyError when there was none."""
        found = self.calls_to(operation)
        if not found:
            made = ", ".join(sorted({c.name for c in self.calls})) or "none"
            raise KeyError(f"no {operation} call was made (calls made: {made})")
        return found[-1].params

    def summary(self) -> dict[str, int]:
        """How many calls of each kind, in first-seen order: ``{"s3.PutObject": 26, ...}``."""
        return summarize(self.calls)

    def read(self, uri: str) -> bytes:
        """The content of a small object uploaded through this session (``s3://bucket/key``)."""
        bucket, _, key = uri[len("s3://") :].partition("/")
        if (bucket, key) not in self.bodies:
            raise KeyError(f"{uri} was not uploaded through this session (or was over {BODY_LIMIT} bytes)")
        return self.bodies[(bucket, key)]

    def sagemaker_session(self):
        """A SageMaker SDK session on this boto session, with the default bucket and telemetry off."""
        from sagemaker.core.helper.session_helper import Session

        return Session(boto_session=self.boto_session, default_bucket=self.bucket, sagemaker_config=SDK_CONFIG)

    # ---- scripting answers
    def respond(self, operation: str, answer: Callable[[dict], Any] | dict | ClientErrorAnswer) -> None:
        """Answer ``operation`` (``"Operation"`` or ``"service.Operation"``) with a dict, a function of the request
        parameters, or a :class:`ClientErrorAnswer`. Overrides the built-in answers."""
        self._answers[operation] = answer

    def script_job(self, script: ScriptedJob, job_name: str | None = None) -> None:
        """How the next created training jobs (or the one named) progress when described and what they log."""
        if job_name:
            self._scripts[job_name] = script
        else:
            self._default_script = script

    # ---- botocore hooks
    def _capture(self, params, model, context, **_):
        # before-parameter-build: keep the parameters; they only count once validation has passed (before-call)
        context["offline_params"] = _plain(params)

    def _answer(self, model, context, params, **_):
        from botocore.awsrequest import AWSResponse

        service = model.service_model.service_id.hyphenize()
        call = ApiCall(service, model.name, context.get("offline_params", {}))
        body = params.get("body")
        if model.name in ("PutObject", "UploadPart") and body is not None:
            # the request is never sent, so reading its body here costs nothing
            content = body if isinstance(body, (bytes, bytearray)) else body.read() if hasattr(body, "read") else b""
            call.body_size = len(content)
            if model.name == "PutObject":
                self._put(call.params["Bucket"], call.params["Key"], len(content))
                if len(content) <= BODY_LIMIT:
                    with self._lock:
                        self.bodies[(call.params["Bucket"], call.params["Key"])] = bytes(content)
        with self._lock:
            self.calls.append(call)
        answer = self._answers.get(call.name, self._answers.get(call.operation))
        if answer is None:
            answer = getattr(self, f"_{service.replace('-', '_')}_{model.name}", None)
        if answer is None:
            raise OfflineCallUnanswered(
                f"offline AWS has no answer for {call.name}; script one with "
                f"OfflineAWS.respond({call.operation!r}, ...)"
            )
        parsed = answer(call.params) if callable(answer) else copy.deepcopy(answer)
        if isinstance(parsed, ClientErrorAnswer):
            error = {
                "Error": {"Code": parsed.code, "Message": parsed.message},
                "ResponseMetadata": {"HTTPStatusCode": parsed.status},
            }
            return AWSResponse("https://offline.invalid", parsed.status, {}, None), error
        parsed = dict(parsed or {})
        parsed.setdefault("ResponseMetadata", {"HTTPStatusCode": 200, "RequestId": "offline"})
        return AWSResponse("https://offline.invalid", 200, {}, None), parsed

    # ---- built-in answers: the calls the SDK makes to build and follow a training job
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


def _plain(value: Any) -> Any:
    """A copy of API parameters with request bodies (files, streams, bytes) replaced by a short description."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray)):
        return f"<{len(value)} bytes>"
    if hasattr(value, "read"):
        size = getattr(value, "_size", None)
        try:
            size = len(value) if size is None else size
        except TypeError:
            pass
        return f"<stream of {size} bytes>" if size is not None else "<stream>"
    return value


def _token_index(token: str | None) -> int:
    return int(token.split("/")[-1]) if token else 0


# ---- the network guard
_guard_lock = threading.Lock()
_guard_depth = 0
_attempts: list[str] = []
_originals: dict[str, Any] = {}


def _blocked(what: str):
    def refuse(*args, **kwargs):
        target = args[1] if what == "socket.connect" and len(args) > 1 else (args[0] if args else kwargs)
        _attempts.append(f"{what} {target!r}")
        raise NetworkBlocked(f"network access blocked while offline: {what} {target!r}")

    return refuse


@contextlib.contextmanager
def network_guard() -> Iterator[list[str]]:
    """Refuse every outgoing connection (and name lookup) inside the block; yields the list of attempts made.

    Library code may swallow the error (the SDK's telemetry does), so callers that must prove nothing tried the
    network check the yielded list as well.
    """
    global _guard_depth
    with _guard_lock:
        if _guard_depth == 0:
            _attempts.clear()
            _originals.update(
                connect=socket.socket.connect,
                connect_ex=socket.socket.connect_ex,
                getaddrinfo=socket.getaddrinfo,
                create_connection=socket.create_connection,
            )
            # patched on the class, so that every socket is refused, a library's too: mypy forbids assigning methods
            socket.socket.connect = _blocked("socket.connect")  # type: ignore[method-assign]
            socket.socket.connect_ex = _blocked("socket.connect")  # type: ignore[method-assign]
            socket.getaddrinfo = _blocked("socket.getaddrinfo")
            socket.create_connection = _blocked("socket.create_connection")
        _guard_depth += 1
    try:
        yield _attempts
    finally:
        with _guard_lock:
            _guard_depth -= 1
            if _guard_depth == 0:
                socket.socket.connect = _originals["connect"]  # type: ignore[method-assign]
                socket.socket.connect_ex = _originals["connect_ex"]  # type: ignore[method-assign]
                socket.getaddrinfo = _originals["getaddrinfo"]
                socket.create_connection = _originals["create_connection"]


@contextlib.contextmanager
def offline_environment() -> Iterator[None]:
    """Fake credentials and region, no instance-metadata lookups, SDK telemetry off, no SDK defaults from this machine.

    Anything that builds its own boto3 or SageMaker session inside the block then finds the fake credentials without
    looking further, and the SDK reads its user and admin config from one file that only turns telemetry off: a
    developer's ``~/.config/sagemaker/config.yaml`` (default VPC, tags...) cannot leak into a request.
    """
    with tempfile.TemporaryDirectory(prefix="sm-offline-") as tmp:
        config = os.path.join(tmp, "config.yaml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(_SDK_CONFIG_YAML)
        values = {
            **FAKE_CREDENTIALS,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "SAGEMAKER_USER_CONFIG_OVERRIDE": config,
            "SAGEMAKER_ADMIN_CONFIG_OVERRIDE": config,
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }
        # a profile or session token from this machine would win over the fake keys or fail to match them
        removed = (
            "AWS_PROFILE",
            "AWS_DEFAULT_PROFILE",
            "AWS_SESSION_TOKEN",
            "AWS_SECURITY_TOKEN",
            "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
            "AWS_CONTAINER_CREDENTIALS_FULL_URI",
            "AWS_WEB_IDENTITY_TOKEN_FILE",
            "AWS_ROLE_ARN",
        )
        saved = {k: os.environ.get(k) for k in (*values, *removed)}
        try:
            os.environ.update(values)
            for k in removed:
                os.environ.pop(k, None)
            yield
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


_VALID_CONFIGS: set[str] = set()  # SDK defaults configs already validated in this process


@contextlib.contextmanager
def config_validated_once() -> Iterator[None]:
    """Inside the block the SDK validates each distinct defaults config once per process, not at every lookup.

    The SDK checks its config against its JSON schema, and that schema against the JSON Schema meta-schema, when it
    makes a session and again for every value it looks up (~0.6 s each, a dozen per job): with the telemetry opt-out
    config a dry run took 5 s instead of 1. The validation is still the SDK's own; only repeats are skipped.
    """
    from sagemaker.core.config.config_manager import SageMakerConfig
    from sagemaker.core.helper import session_helper

    method = SageMakerConfig.__dict__["validate_sagemaker_config"]
    function = session_helper.validate_sagemaker_config

    def once(validate):
        def validate_once(sagemaker_config=None):
            key = json.dumps(sagemaker_config, sort_keys=True, default=str)
            if key not in _VALID_CONFIGS:
                validate(sagemaker_config)
                _VALID_CONFIGS.add(key)

        return validate_once

    SageMakerConfig.validate_sagemaker_config = staticmethod(once(method.__func__))
    session_helper.validate_sagemaker_config = once(function)
    try:
        yield
    finally:
        SageMakerConfig.validate_sagemaker_config = method
        session_helper.validate_sagemaker_config = function


_active: list[OfflineAWS] = []


def active() -> OfflineAWS | None:
    """The session of the innermost :func:`offline` block, or None outside one."""
    return _active[-1] if _active else None


def requested_by_environment() -> bool:
    """``WORKSHOP_AWS_OFFLINE=1``: CI asks every dry run to stay offline without editing the notebooks."""
    return os.environ.get(OFFLINE_ENV_FLAG, "").strip().lower() in ("1", "true", "yes")


@contextlib.contextmanager
def offline(
    region: str = REGION, bucket: str = BUCKET, role_arn: str = ROLE_ARN, strict: bool = True
) -> Iterator[OfflineAWS]:
    """Everything AWS inside the block is answered locally; ``helpers.aws.sagemaker_jobs.run`` dry-runs through it.

    With ``strict`` (the default) leaving the block raises :class:`NetworkBlocked` if anything tried the network,
    even where the library that tried swallowed the error.
    """
    with offline_environment(), network_guard() as attempts:
        aws = OfflineAWS(region=region, bucket=bucket, role_arn=role_arn)
        _active.append(aws)
        try:
            yield aws
        finally:
            _active.remove(aws)
        if strict and attempts:
            raise NetworkBlocked(f"{len(attempts)} network attempt(s) inside an offline block: {attempts[:3]}")


def summarize(calls: list[ApiCall]) -> dict[str, int]:
    """How many calls of each kind, in first-seen order."""
    counts: dict[str, int] = {}
    for c in calls:
        counts[c.name] = counts.get(c.name, 0) + 1
    return counts


def to_json(value: Any) -> str:
    """JSON for captured requests: datetimes as ISO strings."""
    return json.dumps(value, indent=1, default=lambda o: o.isoformat() if hasattr(o, "isoformat") else str(o))
