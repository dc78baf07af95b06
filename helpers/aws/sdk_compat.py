"""What differs between the SageMaker Python SDK v3 releases the helpers run on, in one place.

Studio's 4.x images ship older SDKs than ``make`` installs, without two things the helpers use:
``ModelTrainer(input_s3_key_prefix=...)`` (sagemaker-train 1.24.0) and one SageMaker client per boto session
(sagemaker-core 2.24.0). Where one is missing, a ``ModelTrainer`` subclass reaches it another way, so every lab's
``CreateTrainingJob`` request is the same, field for field (``tools/studio/dry_requests.py`` compares them; see
docs/studio.md).
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator

INPUT_PREFIX_FIELD = "input_s3_key_prefix"


def model_trainer_class():
    """The SDK's ``ModelTrainer``, or, on a release that lacks what the helpers use, a subclass that adds it."""
    from sagemaker.train import ModelTrainer

    add_prefix = INPUT_PREFIX_FIELD not in ModelTrainer.model_fields
    pin_client = _one_client_per_process()
    return _compatible(ModelTrainer, add_prefix, pin_client) if add_prefix or pin_client else ModelTrainer


def with_request_fields(trainer_class: type, fields: dict) -> type:
    """``trainer_class``, or (for ``fields``: CreateTrainingJob fields as the SDK's shapes, keyed as
    ``TrainingJob.create`` names them, e.g. ``retry_strategy``) a subclass that adds them to the request it builds.
    ``ModelTrainer`` has no argument for RetryStrategy or InfraCheckConfig; ``TrainingJob.create``, which it calls
    with the arguments it builds, takes every field of the request."""
    if not fields:
        return trainer_class
    extra = dict(fields)

    class ModelTrainer(trainer_class):  # the SDK's name: a repr or an error message reads as the SDK's own
        def _create_training_job_args(self, *args, **kwargs):
            return {**super()._create_training_job_args(*args, **kwargs), **extra}

    ModelTrainer.__doc__ = trainer_class.__doc__
    ModelTrainer.__module__ = __name__
    return ModelTrainer


def rekeyed(key_prefix: str | None, base_job_name: str | None, input_prefix: str | None) -> str | None:
    """The key prefix sagemaker-train 1.24+ builds for an upload: ``<input_prefix>/...`` where older releases build
    ``<base_job_name>/...`` (``<base>/<job name>/input``); anything else as it is."""
    if not (key_prefix and base_job_name and input_prefix) or not key_prefix.startswith(base_job_name + "/"):
        return key_prefix
    return input_prefix + key_prefix[len(base_job_name) :]


@functools.cache
def _compatible(base: type, add_prefix: bool, pin_client: bool) -> type:
    """``base`` (the SDK's ``ModelTrainer``) with ``input_s3_key_prefix`` applied where 1.24+ applies it (the key
    prefix of every channel the SDK uploads while building the job) and/or a client of its own session in ``train``."""

    class ModelTrainer(base):  # the SDK's name: a repr or an error message reads as the SDK's own
        if add_prefix:
            input_s3_key_prefix: str | None = None

        def create_input_data_channel(self, channel_name, data_source, key_prefix=None, *args, **kwargs):
            if add_prefix:
                key_prefix = rekeyed(key_prefix, self.base_job_name, self.input_s3_key_prefix)
            return super().create_input_data_channel(channel_name, data_source, key_prefix, *args, **kwargs)

        def train(self, *args, **kwargs):
            session = getattr(self.sagemaker_session, "boto_session", None)
            with _client_of(session) if pin_client and session else contextlib.nullcontext():
                return super().train(*args, **kwargs)

    ModelTrainer.__doc__ = base.__doc__
    ModelTrainer.__module__ = __name__
    return ModelTrainer


def _one_client_per_process() -> bool:
    """Whether the SDK keeps a single SageMaker client for the whole process (sagemaker-core before 2.24.0)."""
    from sagemaker.core.utils import utils as core_utils

    return type(core_utils.SageMakerClient) is core_utils.SingletonMeta


@contextlib.contextmanager
def _client_of(boto_session) -> Iterator[None]:
    """Inside the block the SDK's process-wide SageMaker client is one of ``boto_session``; afterwards there is none,
    so the next SDK call outside the helpers builds its own from the default credentials, as in a new process."""
    from sagemaker.core.utils import utils as core_utils

    instances = core_utils.SingletonMeta._instances
    instances.pop(core_utils.SageMakerClient, None)
    pinned = core_utils.SageMakerClient(session=boto_session, region_name=boto_session.region_name)
    # sagemaker-core 2.13.1 to 2.17.0 build this client from a botocore session of their own, not the one given: a
    # dry run would reach AWS (or fail without credentials) and a launch would skip the session's credentials
    pinned.sagemaker_client = boto_session.client(
        "sagemaker",
        region_name=os.environ.get("SAGEMAKER_REGION", boto_session.region_name),
        endpoint_url=os.environ.get("SAGEMAKER_ENDPOINT"),
        config=getattr(pinned, "config", None),
    )
    try:
        yield
    finally:
        instances.pop(core_utils.SageMakerClient, None)
