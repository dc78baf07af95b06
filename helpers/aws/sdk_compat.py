"""What differs between the SageMaker Python SDK v3 releases the helpers run on, in one place.

SageMaker Studio's JupyterLab image (SageMaker Distribution) ships its own SDK, and the helpers use it as it is.
Every 4.x release ships ``sagemaker`` 3.7.1 or 3.12.0 with ``sagemaker-core`` 2.7.1 to 2.20.0 and ``sagemaker-train``
1.7.1 to 1.14.0 (4.0.0: 3.7.1, core 2.7.1, train 1.7.1; 4.4.1: 3.12.0, core 2.20.0, train 1.14.0, read from
aws/sagemaker-distribution's build_artifacts); ``make`` installs the newest (3.27.0: core 2.27.0, train 1.27.0).
Three things the helpers rely on came later. Where one is missing it is detected and reached another way, so that
the ``CreateTrainingJob`` request is the same, field for field (``tools/studio/dry_requests.py`` compares every lab's
on the Studio twin with the one from ``make``'s environment):

* ``ModelTrainer(input_s3_key_prefix=...)`` (sagemaker-train 1.24.0): the uploaded ``code`` and ``sm_drivers``
  channels go under ``<prefix>/<job name>/input/<channel>``, the attendee's prefix; before, always under
  ``<base_job_name>/...``. Older releases get a ``ModelTrainer`` subclass that takes the field and rewrites the key
  prefix the SDK hands to ``create_input_data_channel`` exactly so.
* one SageMaker client per boto session (sagemaker-core 2.24.0): before, ``TrainingJob.create(session=...)`` used the
  client of the first session the process ever gave it, so a launch after an offline dry run would have gone to the
  dry run's recorder, and a dry run after a launch to AWS. The subclass's ``train`` gives the SDK a client of the
  trainer's own session for the call and drops it afterwards. sagemaker-core 2.13.1 to 2.17.0 (in 4.x images from
  4.0.x on) go further: they build that client from a botocore session of their own, whatever session is given, so
  the subclass builds it from the trainer's session itself.
* the PyTorch 2.10.0 training DLC in ``image_uris`` (sagemaker-core 2.22.0): older releases get its entry (the one
  sagemaker-core 2.27.0 bundles: repository, Python versions and ECR account per region) added to the config that
  ``image_uris.retrieve`` reads, so the URI is still built by the SDK's own code.

One difference no request shows: from sagemaker-train 1.2x, a role that may not write the session's default bucket
gets its uploads staged under the output path instead. The helpers stage into the workshop's bucket, which the role
writes in every release.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import os
from collections.abc import Iterator

INPUT_PREFIX_FIELD = "input_s3_key_prefix"
# sagemaker-core 2.27.0's image_uri_config/pytorch.json, training, "2.10.0" (first bundled in 2.22.0)
PYTORCH_DLC_ENTRIES = {
    "2.10.0": {
        "py_versions": ["py313"],
        "repository": "pytorch-training",
        "registries": {
            "af-south-1": "626614931356",
            "ap-east-1": "871362719292",
            "ap-east-2": "975050140332",
            "ap-northeast-1": "763104351884",
            "ap-northeast-2": "763104351884",
            "ap-northeast-3": "364406365360",
            "ap-south-1": "763104351884",
            "ap-south-2": "772153158452",
            "ap-southeast-1": "763104351884",
            "ap-southeast-2": "763104351884",
            "ap-southeast-3": "907027046896",
            "ap-southeast-4": "457447274322",
            "ap-southeast-5": "550225433462",
            "ap-southeast-6": "633930458069",
            "ap-southeast-7": "590183813437",
            "ca-central-1": "763104351884",
            "ca-west-1": "204538143572",
            "cn-north-1": "727897471807",
            "cn-northwest-1": "727897471807",
            "eu-central-1": "763104351884",
            "eu-central-2": "380420809688",
            "eu-isoe-west-1": "371248457586",
            "eu-north-1": "763104351884",
            "eu-south-1": "692866216735",
            "eu-south-2": "503227376785",
            "eu-west-1": "763104351884",
            "eu-west-2": "763104351884",
            "eu-west-3": "763104351884",
            "eusc-de-east-1": "204133271717",
            "il-central-1": "780543022126",
            "me-central-1": "914824155844",
            "me-south-1": "217643126080",
            "me-west-1": "124382933778",
            "mx-central-1": "637423239942",
            "sa-east-1": "763104351884",
            "us-east-1": "763104351884",
            "us-east-2": "763104351884",
            "us-gov-east-1": "446045086412",
            "us-gov-west-1": "442386744353",
            "us-iso-east-1": "886529160074",
            "us-isob-east-1": "094389454867",
            "us-isof-east-1": "303241398832",
            "us-isof-south-1": "454834333376",
            "us-west-1": "763104351884",
            "us-west-2": "763104351884",
        },
    }
}


def model_trainer_class():
    """The SDK's ``ModelTrainer``, or, on a release that lacks what the helpers use, a subclass that adds it."""
    from sagemaker.train import ModelTrainer

    add_prefix = INPUT_PREFIX_FIELD not in ModelTrainer.model_fields
    pin_client = _one_client_per_process()
    return _compatible(ModelTrainer, add_prefix, pin_client) if add_prefix or pin_client else ModelTrainer


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


def training_image_uri(**query) -> str:
    """``image_uris.retrieve(image_scope="training", **query)``, with the DLC entries an older SDK lacks."""
    from sagemaker.core import image_uris

    with _dlc_entries(image_uris, query.get("framework"), query.get("version")):
        return image_uris.retrieve(image_scope="training", **query)


@contextlib.contextmanager
def _dlc_entries(image_uris, framework: str | None, version: str | None) -> Iterator[None]:
    """Inside the block the SDK's PyTorch config knows :data:`PYTORCH_DLC_ENTRIES` (only where it lacks them)."""
    load = image_uris.config_for_framework
    if framework != "pytorch" or version not in PYTORCH_DLC_ENTRIES:
        yield
        return
    config = load("pytorch")
    if version in config["training"]["versions"]:
        yield
        return
    training = config["training"]
    training["versions"][version] = copy.deepcopy(PYTORCH_DLC_ENTRIES[version])
    training.setdefault("version_aliases", {})[version.rsplit(".", 1)[0]] = version

    def config_for_framework(name):
        return copy.deepcopy(config) if name == "pytorch" else load(name)

    image_uris.config_for_framework = config_for_framework
    try:
        yield
    finally:
        image_uris.config_for_framework = load
