"""Run the real SageMaker SDK code path with no AWS account and no network.

An :class:`OfflineAWS` is a ``boto3.Session`` whose every call botocore validates against the service model, then
recorded and answered here instead of sent: a captured ``CreateTrainingJob`` request is what a real launch would send.
:func:`offline` sets one up for a notebook or CI (fake credentials, telemetry off, a network guard);
``WORKSHOP_AWS_OFFLINE=1`` makes every dry run offline. Tests script answers with :meth:`OfflineAWS.respond`.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from sagemaker_standin.api_answers import BuiltInAnswers, ClientErrorAnswer, ScriptedJob
from sagemaker_standin.errors import StandInError
from sagemaker_standin.sandbox import (
    ACCOUNT,
    BUCKET,
    FAKE_CREDENTIALS,
    REGION,
    ROLE_ARN,
    SDK_CONFIG,
    NetworkBlocked,
    network_guard,
    offline_environment,
)

OFFLINE_ENV_FLAG = "WORKSHOP_AWS_OFFLINE"
BODY_LIMIT = 1 << 20  # uploads up to this size are kept, so tests can read back what the SDK staged


class OfflineCallUnanswered(StandInError, RuntimeError):
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


class OfflineAWS(BuiltInAnswers):
    """A boto3 session that validates, records and answers every AWS API call locally.

    ``calls`` lists every call in order. ``request("CreateTrainingJob")`` is the last such request's parameters.
    Nothing is signed or sent: the answer replaces the HTTP request in botocore's ``before-call`` event. What it
    answers without a script: :class:`~sagemaker_standin.api_answers.BuiltInAnswers`.
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
    """Everything AWS inside the block is answered locally; ``helpers.jobs.on_sagemaker`` dry-runs through it.

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
