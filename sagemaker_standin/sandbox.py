"""What an offline block changes for the whole process, and undoes on leaving: a fake account and credentials, no
network (:func:`network_guard`), an environment where nothing of this machine's AWS or SDK configuration applies
(:func:`offline_environment`), and the SDK's config validated once (:func:`config_validated_once`).
:func:`sagemaker_standin.offline_account.offline` enters all of them."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

from sagemaker_standin.errors import StandInError

# placeholders that are obviously not a real account: the documentation account id AWS itself uses
ACCOUNT = "111122223333"
REGION = "us-east-1"
ROLE_ARN = f"arn:aws:iam::{ACCOUNT}:role/service-role/AmazonSageMaker-ExecutionRole-workshop"
BUCKET = f"sagemaker-{REGION}-{ACCOUNT}"
FAKE_CREDENTIALS = {"AWS_ACCESS_KEY_ID": "AKIAOFFLINEEXAMPLE00", "AWS_SECRET_ACCESS_KEY": "offline-not-a-secret"}

# Telemetry off: the SDK reads SageMaker.PythonSDK.Modules.TelemetryOptOut from the config of the session it is
# given, or from the config files of a session it builds itself.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
_SDK_CONFIG_YAML = "SchemaVersion: '1.0'\nSageMaker:\n  PythonSDK:\n    Modules:\n      TelemetryOptOut: true\n"


class NetworkBlocked(StandInError, ConnectionError):
    """Something tried to open a network connection inside an offline block."""


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
