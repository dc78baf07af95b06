"""The stand-in for SageMaker: what plays the service's part when a lab runs with no account. It imitates the
service; it does not teach it, and a learner need not read it (``helpers/README.md`` says what to read instead).

It holds each host's first process (:mod:`~sagemaker_standin.container_init`), the ``s3://`` channels in each input
mode (:mod:`~sagemaker_standin.s3_inputs`) from an S3-compatible store on loopback
(:mod:`~sagemaker_standin.objectstore`), the offline account a dry run talks to
(:mod:`~sagemaker_standin.offline_account`), and a job's end said as SageMaker says it where a machine's limit
ended it (:mod:`~sagemaker_standin.limits`: out of memory, the process limit). The helpers reach it through the
names below and nothing else; a lab that shows the stand-in at work (lab 05) imports its modules by name.
"""

from pathlib import Path

from sagemaker_standin import container_init
from sagemaker_standin.errors import StandInError
from sagemaker_standin.limits import MemoryWatch, killed_by_sigkill, process_limit_reason
from sagemaker_standin.offline_account import (
    ApiCall,
    OfflineAWS,
    active,
    offline,
    requested_by_environment,
    summarize,
    to_json,
)
from sagemaker_standin.ports import free_port
from sagemaker_standin.s3_inputs import JobInputs, s3_channels
from sagemaker_standin.sandbox import REGION, config_validated_once, network_guard

CONTAINER_INIT = Path(container_init.__file__)  # every local host's first process, as a container's

__all__ = [
    "CONTAINER_INIT",
    "REGION",
    "ApiCall",
    "JobInputs",
    "MemoryWatch",
    "OfflineAWS",
    "StandInError",
    "active",
    "config_validated_once",
    "free_port",
    "killed_by_sigkill",
    "network_guard",
    "offline",
    "process_limit_reason",
    "requested_by_environment",
    "s3_channels",
    "summarize",
    "to_json",
]
