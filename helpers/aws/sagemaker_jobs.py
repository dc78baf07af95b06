"""A lab's :class:`~helpers.job.Job` as a SageMaker training job, built with SDK v3's ``ModelTrainer``.

``run(job, "ml.g5.2xlarge")`` is a dry run: it checks the job (:func:`preflight`, no AWS call), prices it, builds the
``ModelTrainer`` and lets the SDK produce its ``CreateTrainingJob`` request against a session that records the
request instead of sending it (``helpers.aws.offline``). The returned :class:`DryRun` shows the exact request and the
cost in the notebook. ``run(..., launch=True)`` does the same against AWS, then follows the job: status, logs with
progress, final metrics, billable vs training seconds, console link.

How each lab's job maps onto the SDK:

* one process (a single GPU): ``SourceCode`` + the SDK's basic script driver;
* several processes (``distribution="auto"``/``"torchrun"``): ``Torchrun()``;
* SMP v2 (``"smp"``): ``Torchrun(smp=SMP(...))`` on an SMP image;
* SMDDP AllReduce (``"smddp"``): needs the mpirun launcher, which ``ModelTrainer`` does not offer. The job instead
  lets the framework image's own training toolkit launch it, exactly as SDK v2's ``distribution=
  {"smdistributed": {"dataparallel": {"enabled": True}}}`` did: no ``source_code`` (so the image keeps its
  entrypoint), the source dir uploaded as ``sourcedir.tar.gz``, and the ``sagemaker_*`` hyperparameters the toolkit
  reads (``sagemaker_program``, ``sagemaker_submit_directory``, ``sagemaker_distributed_dataparallel_enabled``,
  ``sagemaker_instance_type``, ``sagemaker_region``). The toolkit then runs ``mpirun ... smddprun python train.py``.

Channels are local directories (uploaded to the bucket under the attendee prefix at launch; the dry run shows where)
or ``s3://`` URIs, each with an explicit input mode (File, FastFile), or FSx for Lustre directories (``FSx`` mode).
"""
from __future__ import annotations

import copy
import functools
import hashlib
import html
import io
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from helpers.aws import account as aws
from helpers.aws import offline as aws_offline
from helpers.planning import cost
from helpers import hyperparameters
from helpers.planning import instances
from helpers.job import METRIC_DEFINITIONS, REPO, RUNS_DIR, Job, parse_metric_line
from helpers.targets import LOCAL_TARGETS, Target, TargetError
from helpers.channels import ChannelError, ChannelPlan, FSxConfigError, check_fsx, plan_channels  # noqa: F401 (raised here)
from helpers.errors import PreflightError, WorkshopError
from helpers.targets import local_gpu_count

TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # where SageMaker collects TensorBoard files from
CHECKPOINT_DIR = "/opt/ml/checkpoints"  # synced with CheckpointConfig.s3_uri; restored into a restarted spot job
LOG_GROUP = "/aws/sagemaker/TrainingJobs"
MAX_RUNTIME_S = 28 * 24 * 3600  # the service's ceiling for MaxRuntimeInSeconds
LAUNCHERS = ("auto", "torchrun", "smddp", "smp")
REQUESTS_ENV = "WORKSHOP_REQUESTS_DIR"  # set by the headless lab runner: every dry run's request is saved there

# The framework image every lab runs on, retrieved through the SDK's image_uris (it knows PyTorch DLCs up to 2.10).
PYTORCH_DLC = ("2.10.0", "py313")
# Which SageMaker images ship SMDDP, which the SDK cannot tell (its own list, fw_utils, stops at the 2.2.0 DLC). Two
# sources, checked 2026-11-23, disagree: AWS's SMDDP support table lists PyTorch 2.3.0 (SMDDP 2.3.0) as the newest
# framework DLC with SMDDP preinstalled, while the DLC repository's Dockerfiles for the 2.4 and 2.5 SageMaker GPU images
# install SMDDP 2.5.0 and 2.6.0 (the 2.6 image, and every later one, none). The Dockerfile is what goes into the image,
# so preflight goes by it; the default image stays 2.3.0, the one both sources list.
SMDDP_DLC = ("2.3.0", "py311")
SMDDP_IN_DLC = {"2.3": "2.3.0", "2.4": "2.5.0", "2.5": "2.6.0"}  # SageMaker GPU DLC (PyTorch x.y) -> SMDDP installed
SMDDP_IN_AWS_TABLE = {"2.3": "2.3.0"}  # the framework DLCs AWS's support table lists past the SDK's list
SMDDP_IN_SMP_IMAGES = {"2.4.1": "2.5.0", "2.5.1": "2.6.0"}  # SMP image (PyTorch version) -> bundled SMDDP
# SMP v2 image: PyTorch 2.5.1 with SMP 2.8.0, CUDA 12.4 (image_uris framework "pytorch-smp")
SMP_IMAGE = ("2.5.1", "py311", "cu124")
TOOLKIT_HYPERPARAMETERS = ("sagemaker_program", "sagemaker_submit_directory", "sagemaker_region",
                           "sagemaker_container_log_level", "sagemaker_distributed_dataparallel_enabled",
                           "sagemaker_instance_type", "sagemaker_distributed_dataparallel_custom_mpi_options")
# secret-looking names, as whole words: "hf_token" and "WANDB_API_KEY" are hidden, "tokenize" is not
_SECRETS = re.compile(r"(?<![a-z])(secret|token|password|passwd|credential|api[_-]?key|access[_-]?key)s?(?![a-z])",
                      re.IGNORECASE)
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")
_MPI_TAG = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")  # mpirun --tag-output prefixes every line of an SMDDP job


# ---------------------------------------------------------------------------------------------------- errors
class UnsupportedFeature(PreflightError):
    """SMDDP or SMP asked of an instance type or image that does not have it."""


class SpotConfigError(PreflightError):
    """Managed spot without checkpoints, or stopping conditions the service would reject."""


class ProcessCountError(PreflightError):
    """More processes per host than GPUs, or SMP degrees that do not divide the processes."""


class LaunchRefused(WorkshopError, ValueError):
    """A launch asked for where it cannot happen (offline)."""


class LocalContainerUnavailable(WorkshopError, RuntimeError):
    """``local_container`` needs Docker with compose; the message says what is missing."""


class TrainingJobFailed(WorkshopError, RuntimeError):
    """The SageMaker job ended Failed or Stopped; ``.result`` holds its status, reason and last log lines."""

    def __init__(self, message: str, result: "SageMakerJobResult"):
        super().__init__(message)
        self.result = result


# ---------------------------------------------------------------------------------------------------- preflight
@dataclass
class Plan:
    """What :func:`preflight` decided: everything the request is built from, checked."""

    job: Job
    instance: instances.InstanceType
    processes_per_host: int
    launcher: str  # "script", "torchrun", "smp" or "smddp"
    image_uri: str
    image_note: str
    channels: list[ChannelPlan]
    max_wait_s: int | None
    tensorboard: bool
    notes: list[str] = field(default_factory=list)

    @property
    def world_size(self) -> int:
        return self.processes_per_host * self.job.instance_count

    @property
    def base_job_name_suffix(self) -> str:
        return self.job.name.lower().replace("_", "-")


def _region_for_images(region: str | None) -> str:
    return region or aws_offline.REGION


@functools.lru_cache(maxsize=64)
def _image_uri(**query) -> str:
    """``image_uris.retrieve``, remembered: it reads botocore's endpoint tables (~0.5 s) on every call."""
    from sagemaker.core import image_uris

    return image_uris.retrieve(image_scope="training", **query)


def default_image(launcher: str, instance: instances.InstanceType, region: str | None = None) -> tuple[str, str]:
    """(image URI, why this image) for a launcher on an instance type, through the SDK's ``image_uris``."""
    region = _region_for_images(region)
    if launcher == "smp":
        version, py, cuda = SMP_IMAGE
        uri = _image_uri(framework="pytorch-smp", region=region, version=version, py_version=py,
                         container_version=cuda, instance_type=instance.name)
        return uri, f"SMP v2 image for PyTorch {version} (bundles SMDDP {SMDDP_IN_SMP_IMAGES[version]})"
    volta = bool(instance.gpu and instance.gpu.model == "V100")  # CUDA 13 (the newest DLC's) dropped Volta
    version, py = SMDDP_DLC if launcher == "smddp" or volta else PYTORCH_DLC
    uri = _image_uri(framework="pytorch", region=region, version=version, py_version=py,
                     instance_type=instance.name)
    why = (f"PyTorch {version} DLC: the newest framework image that both AWS's SMDDP table and the DLC Dockerfiles "
           f"list with SMDDP {SMDDP_IN_DLC[_minor(version)]}" if launcher == "smddp"
           else f"PyTorch {version} DLC (CUDA 12: newer images no longer run on the V100)" if volta
           else f"PyTorch {version} DLC ({'GPU' if instance.gpus else 'CPU'})")
    return uri, why


def _minor(version: str) -> str:
    return ".".join(version.split(".")[:2])


def _image_tag(image_uri: str) -> tuple[str, str, str]:
    """(repository, tag, PyTorch version) of an ECR image URI."""
    repo, _, tag = image_uri.rsplit("/", 1)[-1].partition(":")
    return repo, tag, tag.split("-")[0]


def image_has_smddp(image_uri: str) -> bool:
    """Whether a SageMaker framework or SMP image ships SMDDP (custom images: unknown, so False).

    Framework images: the SageMaker GPU DLCs the SDK lists (up to PyTorch 2.2.0), and 2.3, 2.4 and 2.5, whose
    Dockerfiles install SMDDP (:data:`SMDDP_IN_DLC`; AWS's support table lists only 2.3.0). Not the CPU or EC2
    variants: the Dockerfiles install SMDDP in the SageMaker GPU stage only."""
    from sagemaker.core.fw_utils import SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS

    repo, tag, version = _image_tag(image_uri)
    if repo == "smdistributed-modelparallel":
        return version in SMDDP_IN_SMP_IMAGES
    if repo == "pytorch-training" and "-gpu-" in f"-{tag}-" and "-ec2" not in f"{tag}-":
        return version in SM_DATAPARALLEL_SUPPORTED_FRAMEWORK_VERSIONS["pytorch"] or _minor(version) in SMDDP_IN_DLC
    return False


def smddp_images(region: str | None = None) -> list[dict]:
    """One row per SageMaker image that matters for SMDDP: what AWS's support table says, what the image's
    Dockerfile installs, and whether preflight accepts it for ``distribution="smddp"`` (lab 03's table)."""
    region = _region_for_images(region)
    p4d = instances.lookup("ml.p4d.24xlarge")
    rows = []
    for version, py in [SMDDP_DLC, ("2.4.0", "py311"), ("2.5.1", "py311"), ("2.6.0", "py312"), PYTORCH_DLC]:
        uri = _image_uri(framework="pytorch", region=region, version=version, py_version=py, instance_type=p4d.name)
        table = SMDDP_IN_AWS_TABLE.get(_minor(version))
        built = SMDDP_IN_DLC.get(_minor(version))
        rows.append({"image": uri.rsplit("/", 1)[-1],
                     "AWS support table": f"SMDDP {table}" if table else "not listed",
                     "DLC Dockerfile installs": f"SMDDP {built}" if built else "no SMDDP",
                     "preflight": "accepted" if image_has_smddp(uri) else "refused"})
    for version, bundled in SMDDP_IN_SMP_IMAGES.items():
        rows.append({"image": f"smdistributed-modelparallel:{version} (SMP)",
                     "AWS support table": "SMP images bundle it", "DLC Dockerfile installs": f"SMDDP {bundled}",
                     "preflight": "accepted"})
    return rows


def _target_instance(target: Target | str) -> instances.InstanceType:
    name = target.name if isinstance(target, Target) else str(target)
    if name in LOCAL_TARGETS:
        raise TargetError(f"helpers.aws.sagemaker_jobs runs SageMaker instance types ('ml.g5.2xlarge'); {name!r} is a "
                          f"local target: use helpers.jobs.run_job(job, {name!r}).")
    return instances.lookup(name)


def preflight(job: Job, target: Target | str, *, region: str | None = None, tensorboard: bool | None = None,
              image_has_smddp_override: bool | None = None) -> Plan:
    """Check ``job`` for ``target`` and decide launcher, image and channels; never calls AWS.

    Raises a :class:`PreflightError` subclass (or ``instances.UnknownInstanceType``) whose message names the fix.
    """
    instance = _target_instance(target)
    notes: list[str] = []
    base = f"x-{job.name}".lower().replace("_", "-")
    if not _NAME.match(job.name.replace("_", "-")) or len(base) > 32:
        raise PreflightError(f"job name {job.name!r}: use letters, digits and dashes, at most 30 characters (the "
                             f"attendee prefix and a timestamp are added to make the SageMaker job name).")
    if job.instance_count < 1:
        raise PreflightError("instance_count must be at least 1.")
    entry = Path(job.source_dir) / job.entry_point
    if not entry.is_file():
        raise PreflightError(f"entry point {entry} does not exist; set Job.source_dir and Job.entry_point.")
    if problem := hyperparameters.check(job):
        raise PreflightError(problem)

    # processes: one per GPU by default, as the SDK's drivers do; never more than the GPUs
    slots = instance.gpus or 1
    procs = job.processes_per_host or slots
    if procs < 1:
        raise ProcessCountError("processes_per_host must be at least 1.")
    if instance.gpus and procs > instance.gpus:
        raise ProcessCountError(f"{procs} processes per host but {instance.name} has {instance.gpus} GPU(s): set "
                                f"processes_per_host to at most {instance.gpus} (one per GPU), or pick an instance "
                                f"with more GPUs ({', '.join(_bigger(instance))}).")
    if not instance.gpus and procs > instance.vcpus:
        raise ProcessCountError(f"{procs} processes per host but {instance.name} has {instance.vcpus} vCPUs.")
    if not instance.gpus and not instance.name.startswith(("ml.m", "ml.c")):
        raise UnsupportedFeature(f"{instance.name} has {instance.accelerators or 'no GPUs'}: the labs' script needs "
                                 f"CUDA GPUs (or a CPU type for a smoke run).")

    launcher = job.distribution
    if launcher not in LAUNCHERS:
        raise PreflightError(f"distribution {launcher!r} is not one of {', '.join(LAUNCHERS)}.")
    if launcher == "auto":
        launcher = "torchrun" if procs * job.instance_count > 1 else "script"
    if launcher == "torchrun" and procs * job.instance_count == 1:
        launcher = "script"
        notes.append("one process in all: the SDK's basic script driver runs it (torchrun adds nothing)")

    if launcher == "smddp":
        if not instance.supports("smddp"):
            raise UnsupportedFeature(
                f"SMDDP does not run on {instance.name}: it supports only {', '.join(instances.supporting('smddp'))} "
                f"(not P5 or the G families). Use distribution='torchrun' (NCCL) here, or target='ml.p4d.24xlarge'.")
        if job.smp:
            raise PreflightError("Job.smp is set but distribution='smddp': SMP degrees belong to distribution='smp'.")
    if launcher == "smp":
        if not instance.supports("smp"):
            raise UnsupportedFeature(f"SMP v2 does not run on {instance.name}: it supports "
                                     f"{', '.join(instances.supporting('smp'))}. Use distribution='torchrun' with "
                                     f"FSDP here, or target='ml.p4d.24xlarge'.")
        notes += _check_smp(job, procs)
    elif job.smp and launcher != "smddp":
        raise PreflightError("Job.smp is set but distribution is not 'smp': set distribution='smp' to use it.")
    precision = str(job.hyperparameters.get("precision", "auto")).lower()
    if precision == "bf16" and instance.gpus and not instance.supports("bf16"):
        notes.append(f"precision='bf16' on {instance.name} ({instance.gpu.model}, no bf16 tensor cores): the script "
                     f"runs its fp16 (loss-scaled, or fp32 where it has none) instead")
    if precision == "fp16" and not instance.gpus:
        raise UnsupportedFeature(f"precision='fp16' needs a GPU and {instance.name} has none: use 'fp32' or 'bf16'.")

    image, image_note = (job.image_uri, "image given in Job.image_uri") if job.image_uri else \
        default_image(launcher, instance, region)
    if launcher == "smddp":
        has = image_has_smddp(image) if image_has_smddp_override is None else image_has_smddp_override
        if not has:
            raise UnsupportedFeature(
                f"image {image} does not ship SMDDP: leave Job.image_uri unset (the helpers pick the PyTorch "
                f"{SMDDP_DLC[0]} DLC, which AWS's SMDDP table and its Dockerfile both list with SMDDP), or use the "
                f"SageMaker GPU DLC for PyTorch {' or '.join(sorted(set(SMDDP_IN_DLC) - {_minor(SMDDP_DLC[0])}))} "
                f"(their Dockerfiles install SMDDP) or an SMP image; for your own image that installs "
                f"smdistributed-dataparallel pass image_has_smddp=True.")
        repo, _, version = _image_tag(image)
        if image_has_smddp_override is None and repo == "pytorch-training" and \
                _minor(version) in set(SMDDP_IN_DLC) - set(SMDDP_IN_AWS_TABLE):
            notes.append(f"{image.rsplit('/', 1)[-1]}: AWS's SMDDP support table does not list it, but its "
                         f"Dockerfile installs SMDDP {SMDDP_IN_DLC[_minor(version)]}, and the Dockerfile is what goes "
                         f"into the image")
    if launcher == "smddp" and str(job.hyperparameters.get("backend", "smddp")) != "smddp":
        raise PreflightError(f"distribution='smddp' launches through mpirun for SMDDP's AllReduce, but "
                             f"hyperparameters['backend'] is {job.hyperparameters['backend']!r}: set it to 'smddp' "
                             f"or leave it out (or use distribution='torchrun' for NCCL).")
    # a secret-looking name with a text value ("generate_tokens": 20 is a count, "hf_token": "hf_..." is not)
    secrets = [k for k, v in job.hyperparameters.items() if _secret(k) and _text(v)]
    if secrets:
        raise PreflightError(f"hyperparameter(s) {', '.join(secrets)} look like secrets: hyperparameters are stored "
                             f"with the job and shown by DescribeTrainingJob. Keep secrets out of the job (read them "
                             f"from AWS Secrets Manager in the script, with the execution role's permission).")
    if "smdistributed-modelparallel" in image and job.entry_point == "train.py" and \
            str(job.hyperparameters.get("attn_implementation", "sdpa")) == "sdpa":
        notes.append("an SMP image keeps its own transformers (requirements.txt installs one only where the image has "
                     "none that fits: 4.44.2 in the SMP 2.5.1 image), and DistilBERT has SDPA attention only from "
                     "transformers 4.46: pass attn_implementation='eager' to train.py there")
    if launcher == "smp" and job.image_uri and "smdistributed-modelparallel" not in job.image_uri:
        raise UnsupportedFeature(f"SMP v2 needs an SMP image (smdistributed-modelparallel); {job.image_uri} is not "
                                 f"one. Leave Job.image_uri unset.")

    # stopping conditions and spot
    if not 0 < job.max_runtime_s <= MAX_RUNTIME_S:
        raise SpotConfigError(f"max_runtime_s must be between 1 and {MAX_RUNTIME_S} (28 days).")
    max_wait = job.max_wait_s
    if job.spot:
        if not job.checkpoints:
            raise SpotConfigError("managed spot without checkpoints: an interrupted job would start over. Set "
                                  "Job.checkpoints=True (the script saves to /opt/ml/checkpoints, SageMaker syncs it "
                                  "to S3 and restores it after an interruption).")
        if max_wait is None:
            max_wait = 2 * job.max_runtime_s
            notes.append(f"max_wait_s not set: {max_wait} s (twice max_runtime_s) of runtime plus waiting for spot "
                         f"capacity")
        if max_wait < job.max_runtime_s:
            raise SpotConfigError(f"max_wait_s ({max_wait}) is below max_runtime_s ({job.max_runtime_s}): MaxWait "
                                  f"counts runtime plus time waiting for spot capacity, so it must be at least "
                                  f"MaxRuntime. Set max_wait_s >= {job.max_runtime_s}.")
        if max_wait > MAX_RUNTIME_S:
            raise SpotConfigError(f"max_wait_s must be at most {MAX_RUNTIME_S} (28 days).")
    elif max_wait is not None:
        raise SpotConfigError("max_wait_s is set but spot=False: MaxWait only applies to managed spot. Set "
                              "Job.spot=True or drop max_wait_s.")

    channels = plan_channels(job)
    fsx_channels = [c for c in channels if c.kind == "fsx"]
    if fsx_channels or job.fsx:
        check_fsx(job, fsx_channels)
        code = ("the image's training toolkit downloads the source (sourcedir.tar.gz) from there" if launcher == "smddp"
                else "the job's code channels come from there (code, the source, and sm_drivers, the SDK's drivers)")
        notes.append(f"the job runs in your VPC, which must reach S3 through an S3 VPC endpoint or a NAT gateway: "
                     f"{code}, and so do its S3 data channels, its model, output and checkpoints")
        if (Path(job.source_dir) / "requirements.txt").is_file():
            notes.append("the job runs in your VPC: pip installs requirements.txt from PyPI there, so the subnets "
                         "need a NAT gateway (or a PyPI mirror); an S3 endpoint alone does not reach PyPI")

    if tensorboard is None:  # on when the job writes where SageMaker collects TensorBoard files
        tensorboard = any(str(v).startswith(TENSORBOARD_DIR) for v in job.hyperparameters.values())
    for key in job.hyperparameters:
        if not isinstance(key, str) or not key or key.startswith("sagemaker_"):
            raise PreflightError(f"hyperparameter {key!r}: names are non-empty strings; 'sagemaker_' is reserved.")
    if len(job.tags) > 45:
        raise PreflightError("at most 45 tags (SageMaker allows 50; the helpers add their own).")
    if taken := sorted({aws.ATTENDEE_TAG, "workshop-lab"} & set(job.tags)):
        raise PreflightError(f"tag key(s) {', '.join(taken)} are the helpers' own (the attendee and the lab of every "
                             f"job): name yours otherwise.")
    return Plan(job, instance, procs, launcher, image, image_note, channels, max_wait, bool(tensorboard), notes)


def _bigger(instance: instances.InstanceType) -> list[str]:
    return [n for n in instances.supporting("gpu") if instances.lookup(n).gpus > instance.gpus][:3]


def _check_smp(job: Job, procs: int) -> list[str]:
    """SMP v2's degrees against the cluster; raises what cannot run, returns advice (notes) for what can."""
    from sagemaker.train.distributed import SMP

    unknown = set(job.smp) - set(SMP.model_fields)
    if unknown:
        raise ProcessCountError(f"unknown SMP setting(s) {sorted(unknown)}; SMP v2 takes {sorted(SMP.model_fields)}.")
    world = procs * job.instance_count
    tp = int(job.smp.get("tensor_parallel_degree") or 1)
    hsd = int(job.smp.get("hybrid_shard_degree") or 0)
    if tp < 1 or hsd < 0:
        raise ProcessCountError("tensor_parallel_degree must be >= 1 and hybrid_shard_degree >= 0.")
    if world % tp:
        raise ProcessCountError(f"tensor_parallel_degree={tp} must divide the {world} GPUs of the cluster "
                                f"({job.instance_count} x {procs} processes).")
    if hsd and (world // tp) % hsd:
        raise ProcessCountError(f"hybrid_shard_degree={hsd} must divide the {world // tp} data-parallel ranks "
                                f"({world} processes / tensor_parallel_degree {tp}).")
    notes = []
    if procs % tp:  # SMP allows it; it is slow, not wrong
        notes.append(f"tensor_parallel_degree={tp} does not divide the {procs} GPUs of one instance, so its groups "
                     f"span instances: tensor parallel communicates inside every layer, and the network is much "
                     f"slower than NVLink; a degree that divides {procs} keeps each group inside one instance")
    return notes


# ---------------------------------------------------------------------------------------------------- building
@dataclass
class Locations:
    """Where a job's things live in S3, all under the attendee's prefix."""

    bucket: str
    attendee: str
    job: Job

    def _uri(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, self.attendee, *parts]).replace("//", "/")

    @property
    def output(self) -> str:
        return self._uri("output")

    @property
    def checkpoints(self) -> str:
        # one prefix per launch: a relaunch of the lab starts afresh instead of finding the last run's final (or
        # differently configured) checkpoint; spot restarts of one job keep its prefix. To continue an earlier run,
        # pass its prefix as checkpoint_s3_uri.
        return self._uri("checkpoints", self.job.name, time.strftime("%Y%m%d-%H%M%S")) + "/"

    @property
    def tensorboard(self) -> str:
        return self._uri("tensorboard", self.job.name) + "/"

    def channel_prefix(self, local_dir: str) -> str:
        """S3 key prefix for a local channel directory: mirrors its path in the repository, so relaunches reuse it."""
        path = Path(local_dir)
        try:
            rel = path.resolve().relative_to(REPO).as_posix()
        except ValueError:
            rel = f"{path.name}-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]}"
        return f"{self.attendee}/inputs/{rel}"  # S3Prefix takes it with a "/" (see build_trainer)


def _secret(key: str) -> bool:
    return bool(_SECRETS.search(key))


def _text(value) -> bool:
    """A value that is text, not a number or a boolean (also as SageMaker's strings: "20", "true")."""
    if not isinstance(value, str):
        return False
    try:
        float(value)
        return False
    except ValueError:
        return value.strip().lower() not in ("", "true", "false", "none", "null")


def build_trainer(plan: Plan, sagemaker_session, role_arn: str, bucket: str, attendee: str,
                  checkpoint_s3_uri: str | None = None):
    """The ``ModelTrainer`` for a checked plan, and its channels. Uploads local channels (and, for SMDDP, the
    source tarball) through ``sagemaker_session``: a recording session in a dry run, AWS at launch."""
    from sagemaker.core.training.configs import (CheckpointConfig, Channel, Compute, DataSource, FileSystemDataSource,
                                                 MetricDefinition, Networking, OutputDataConfig, S3DataSource,
                                                 SourceCode, StoppingCondition, Tag, TensorBoardOutputConfig)
    from sagemaker.train import ModelTrainer
    from sagemaker.train.distributed import SMP, Torchrun

    job = plan.job
    where = Locations(bucket, attendee, job)
    channels = []
    for c in plan.channels:
        if c.kind == "fsx":
            source = DataSource(file_system_data_source=FileSystemDataSource(
                file_system_id=job.fsx["file_system_id"], file_system_type="FSxLustre",
                directory_path=c.source, file_system_access_mode=job.fsx.get("access_mode", "ro")))
            mode = "File"  # a file system channel is mounted; the service takes it as File
        else:
            uri = c.source if c.kind == "s3" else sagemaker_session.upload_data(
                c.source, bucket=bucket, key_prefix=where.channel_prefix(c.source))
            # S3Prefix matches keys by prefix: without the "/", ".../train" would also take ".../train-big/..."
            uri = uri if uri.endswith("/") else uri + "/"
            # an explicit S3DataSource: a plain-string source would silently become File mode
            source = DataSource(s3_data_source=S3DataSource(s3_data_type="S3Prefix", s3_uri=uri,
                                                            s3_data_distribution_type="FullyReplicated"))
            mode = c.mode
        channels.append(Channel(channel_name=c.name, input_mode=mode, data_source=source))

    compute = Compute(instance_type=plan.instance.name, instance_count=job.instance_count,
                      enable_managed_spot_training=True if job.spot else None)
    stopping = StoppingCondition(max_runtime_in_seconds=job.max_runtime_s,
                                 max_wait_time_in_seconds=plan.max_wait_s if job.spot else None)
    tags = [Tag(key=aws.ATTENDEE_TAG, value=attendee), Tag(key="workshop-lab", value=job.name),
            *(Tag(key=str(k), value=str(v)) for k, v in job.tags.items())]
    fsx_networking = None
    if any(c.kind == "fsx" for c in plan.channels):
        fsx_networking = Networking(subnets=list(job.fsx["subnets"]),
                                    security_group_ids=list(job.fsx["security_group_ids"]))
    common = dict(
        sagemaker_session=sagemaker_session, role=role_arn, training_image=plan.image_uri,
        base_job_name=f"{attendee}-{plan.base_job_name_suffix}", input_s3_key_prefix=attendee,
        compute=compute, stopping_condition=stopping, networking=fsx_networking,
        output_data_config=OutputDataConfig(s3_output_path=where.output),
        input_data_config=channels or None, environment=dict(job.environment), tags=tags,
        checkpoint_config=(CheckpointConfig(s3_uri=checkpoint_s3_uri or where.checkpoints, local_path=CHECKPOINT_DIR)
                           if job.checkpoints else None))

    if plan.launcher == "smddp":
        trainer = ModelTrainer(hyperparameters=_toolkit_hyperparameters(plan, sagemaker_session, bucket, attendee),
                               **common)
    else:
        requirements = "requirements.txt" if (Path(job.source_dir) / "requirements.txt").is_file() else None
        source_code = SourceCode(source_dir=str(job.source_dir), entry_script=job.entry_point,
                                 requirements=requirements,
                                 ignore_patterns=[".git", "__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store"])
        distributed = None
        if plan.launcher in ("torchrun", "smp"):
            distributed = Torchrun(process_count_per_node=job.processes_per_host,
                                   smp=SMP(**job.smp) if plan.launcher == "smp" else None)
        trainer = ModelTrainer(source_code=source_code, distributed=distributed,
                               hyperparameters=dict(job.hyperparameters), **common)
    trainer.with_metric_definitions([MetricDefinition(name=m["Name"], regex=m["Regex"]) for m in METRIC_DEFINITIONS])
    if plan.tensorboard:
        trainer.with_tensorboard_output_config(TensorBoardOutputConfig(s3_output_path=where.tensorboard,
                                                                       local_path=TENSORBOARD_DIR))
    return trainer


def source_tarball(source_dir: Path, out_dir: Path) -> Path:
    """``sourcedir.tar.gz`` of the training code, byte-for-byte reproducible (sorted, zero mtimes), so its content
    hash can name it in S3 and an unchanged source is not uploaded twice under new names."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(Path(source_dir).rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            info = tar.gettarinfo(str(path), arcname=path.relative_to(source_dir).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
    import gzip

    out = Path(out_dir) / "sourcedir.tar.gz"
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
    return out


def _toolkit_hyperparameters(plan: Plan, sagemaker_session, bucket: str, attendee: str) -> dict[str, str]:
    """Hyperparameters for a job the image's training toolkit launches (SMDDP AllReduce through mpirun).

    Values are JSON-encoded, as SDK v2 sent them: the toolkit decodes each one (strings arrive as '"train.py"').
    """
    job = plan.job
    with tempfile.TemporaryDirectory(prefix="sourcedir-") as tmp:
        tarball = source_tarball(Path(job.source_dir), Path(tmp))
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:16]
        submit = sagemaker_session.upload_data(str(tarball), bucket=bucket, key_prefix=f"{attendee}/source/{digest}")
    # distribution='smddp' means the script's SMDDP backend too (its default, 'auto', would be NCCL under mpirun)
    hps = {k: json.dumps(v) for k, v in {"backend": "smddp", **job.hyperparameters}.items()}
    hps.update({
        "sagemaker_program": json.dumps(job.entry_point),
        "sagemaker_submit_directory": json.dumps(submit),
        "sagemaker_region": json.dumps(sagemaker_session.boto_region_name),
        "sagemaker_container_log_level": "20",
        "sagemaker_distributed_dataparallel_enabled": "true",
        "sagemaker_instance_type": json.dumps(plan.instance.name),
        "sagemaker_distributed_dataparallel_custom_mpi_options": json.dumps(""),
    })
    if job.processes_per_host:
        hps["sagemaker_mpi_num_of_processes_per_host"] = str(job.processes_per_host)
    return hps


# ---------------------------------------------------------------------------------------------------- dry run
def _redacted(request: dict) -> dict:
    """The request for display: values of secret-looking environment variables and hyperparameters hidden."""
    shown = copy.deepcopy(request)
    for section in ("Environment", "HyperParameters"):
        for key in list(shown.get(section) or {}):
            if _secret(key):
                shown[section][key] = "***"
    return shown


def _uploads(calls: list[aws_offline.ApiCall], channel_prefixes: list[str]) -> list[tuple[str, int, int]]:
    """(s3 prefix, files, bytes) per staged thing (a channel, the code, the SDK's drivers, a source tarball), from
    the recorded uploads."""
    groups: dict[str, list[int]] = {}
    for call in calls:
        if call.name != "s3.PutObject":
            continue
        key = call.params["Key"]
        prefix = next((p for p in channel_prefixes if key.startswith(p + "/")), None)
        if prefix is None:
            sdk_channel = re.match(r"^(.*/input/(?:code|sm_drivers))/", key)
            prefix = sdk_channel.group(1) if sdk_channel else key.rsplit("/", 1)[0]
        group = groups.setdefault(f"s3://{call.params['Bucket']}/{prefix}/", [0, 0])
        group[0] += 1
        group[1] += call.body_size or 0
    return [(k, v[0], v[1]) for k, v in groups.items()]


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


@dataclass
class DryRun:
    """A job checked and built but not launched: the exact CreateTrainingJob request and what it would cost.

    ``print(dry)`` or display it in a notebook; ``dry.launch()`` launches the same job after review.
    """

    plan: Plan
    request: dict  # CreateTrainingJob parameters as botocore validated them
    estimate: cost.Estimate | None
    budget_usd: float | None
    uploads: list[tuple[str, int, int]]
    calls: dict[str, int]
    where: str  # "offline (placeholder account)" or the AWS context it was built for
    notes: list[str] = field(default_factory=list)
    _relaunch: Callable[..., Any] | None = field(default=None, repr=False)
    _shown_in: int | None = field(default=None, repr=False)  # the notebook execution that run() displayed it in

    @property
    def job_name(self) -> str:
        return self.request["TrainingJobName"]

    @property
    def history(self) -> list[dict]:
        """Empty: nothing trained. Labs test ``result.history`` to show curves only after a real run."""
        return []

    @property
    def metrics(self) -> dict:
        return {}

    @property
    def over_budget(self) -> bool:
        return bool(self.estimate and self.budget_usd is not None and self.estimate.max_usd > self.budget_usd)

    def __repr__(self) -> str:
        return str(self)

    def _ipython_display_(self) -> None:
        from IPython import get_ipython

        # run() shows the dry run as it is built; a display(dry) in the same cell would show it a second time
        if self._shown_in is None or self._shown_in != get_ipython().execution_count:
            self._display_now()

    def _display_now(self) -> None:
        from IPython.display import display

        display({"text/plain": str(self), "text/html": self._repr_html_()}, raw=True)
        if self._relaunch is not None:  # built for a real account: one click launches it (headless: launch=True)
            display(self.launch_button())

    def launch_button(self):
        """A button that launches this job after review; disabled when the estimate is over budget."""
        import ipywidgets as widgets

        if self._relaunch is None:
            self.launch()  # raises: nothing to launch from an offline dry run
        over = self.over_budget
        button = widgets.Button(description="Over budget" if over else "Launch this job", icon="rocket",
                                button_style="" if over else "warning", disabled=over,
                                tooltip=f"{self.job_name}: up to ${self.estimate.max_usd:,.2f}" if self.estimate else "")
        out = widgets.Output()

        def clicked(_):
            button.disabled = True  # one click, one job
            with out:
                job = self.launch(wait=False)
                print(f"launched {job.name}: follow it with .wait(), stop it with .stop(); {job.console_url}")
                button.job = job

        button.on_click(clicked)
        return widgets.VBox([button, out])

    def launch(self, **options):
        """Launch this job for real (same options, plus any given here)."""
        if self._relaunch is None:
            raise LaunchRefused("this dry run was built offline with placeholder account details: launch from a "
                                "session with AWS credentials, run_job(job, target, launch=True).")
        return self._relaunch(**options)

    def summary_lines(self) -> list[str]:
        p, r = self.plan, self.request
        rc = r["ResourceConfig"]
        lines = [f"DRY RUN - nothing launched ({self.where})",
                 f"job        {self.job_name}",
                 f"instances  {rc['InstanceCount']} x {rc['InstanceType']} ({p.instance.describe().split(': ', 1)[1]})",
                 f"launcher   {p.launcher}: {p.processes_per_host} process(es) per host, world size {p.world_size}",
                 f"image      {r['AlgorithmSpecification']['TrainingImage']}  ({p.image_note})"]
        for c in r.get("InputDataConfig", []):
            src = c["DataSource"].get("S3DataSource", {}).get("S3Uri") or \
                c["DataSource"].get("FileSystemDataSource", {}).get("DirectoryPath")
            lines.append(f"channel    {c['ChannelName']:<11} {c.get('InputMode', 'File'):<8} {src}")
        if r.get("EnableManagedSpotTraining"):
            sc = r["StoppingCondition"]
            lines.append(f"spot       MaxRuntime {sc['MaxRuntimeInSeconds']} s, MaxWait {sc['MaxWaitTimeInSeconds']} s")
        if r.get("CheckpointConfig"):
            lines.append(f"checkpoint {r['CheckpointConfig']['LocalPath']} <-> {r['CheckpointConfig']['S3Uri']}")
        for prefix, n, size in self.uploads:
            lines.append(f"upload     {n} file(s), {_size(size)} -> {prefix}")
        return lines

    def __str__(self) -> str:
        parts = ["\n".join(self.summary_lines())]
        if self.estimate:
            parts.append("cost\n" + "\n".join("  " + line for line in str(self.estimate).splitlines()))
        if self.over_budget:
            parts.append(f"OVER BUDGET: up to ${self.estimate.max_usd:,.2f} > budget ${self.budget_usd:,.2f}; "
                         f"a launch would be refused.")
        parts += [f"note: {n}" for n in self.plan.notes + self.notes]
        parts.append("CreateTrainingJob request:\n" + aws_offline.to_json(_redacted(self.request)))
        parts.append("To launch: run_job(job, target, launch=True)  (or dry.launch())")
        return "\n\n".join(parts)

    def _repr_html_(self) -> str:
        summary = html.escape("\n".join(self.summary_lines()))
        out = [f"<pre>{summary}</pre>"]
        if self.estimate:
            out.append(f"<b>Cost</b>{self.estimate._repr_html_()}")
        if self.over_budget:
            out.append(f"<p><b>Over budget</b>: up to ${self.estimate.max_usd:,.2f} &gt; ${self.budget_usd:,.2f}; "
                       f"a launch would be refused.</p>")
        for n in self.plan.notes + self.notes:
            out.append(f"<p><i>note:</i> {html.escape(n)}</p>")
        request = html.escape(aws_offline.to_json(_redacted(self.request)))
        out.append(f"<details><summary>CreateTrainingJob request</summary><pre>{request}</pre></details>")
        out.append("<p>To launch: <code>run_job(job, target, launch=True)</code></p>")
        return "\n".join(out)


# ---------------------------------------------------------------------------------------------------- launch and follow
@dataclass
class SageMakerJobResult:
    """A finished SageMaker job, shaped like the local runner's ``JobResult`` where they overlap
    (``name``, ``status``, ``metrics``, ``history``, ``failure_reason``, ``log_tail``, ``curve``)."""

    name: str
    status: str  # Completed | Failed | Stopped
    metrics: dict
    history: list[dict]
    cost: cost.JobCost
    console_url: str
    model_artifacts: str | None
    failure_reason: str = ""
    log_tail: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)  # seconds in each secondary status (Downloading...)

    @property
    def billable_seconds(self) -> int:
        return self.cost.billable_seconds

    @property
    def training_seconds(self) -> int:
        return self.cost.training_seconds

    def curve(self, kind: str, key: str) -> tuple[list[float], list[float]]:
        rows = [h for h in self.history if h["kind"] == kind and key in h]
        return [h["step"] for h in rows], [h[key] for h in rows]

    def __repr__(self) -> str:
        figures = ", ".join(f"{k}={v:.4g}" for k, v in self.metrics.items() if isinstance(v, float))
        return f"SageMakerJobResult({self.name}: {self.status}; {self.cost}; {figures}; {self.console_url})"


def _phases(transitions: list[dict]) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in transitions or []:
        start, end = t.get("StartTime"), t.get("EndTime")
        if start and end:
            out[t["Status"]] = out.get(t["Status"], 0.0) + (end - start).total_seconds()
    return out


class LaunchedJob:
    """A training job running on SageMaker: follow it, wait for it, or stop it."""

    def __init__(self, name: str, boto_session, region: str, instance_type: str, instance_count: int,
                 echo: bool = True, poll_s: float = 15.0, sleep: Callable[[float], None] = time.sleep):
        self.name, self.region = name, region
        self.instance_type, self.instance_count = instance_type, instance_count
        self.echo, self.poll_s, self._sleep = echo, poll_s, sleep
        self._sm = boto_session.client("sagemaker", region_name=region)
        self._logs = boto_session.client("logs", region_name=region)
        self._tokens: dict[str, str | None] = {}
        self.history: list[dict] = []
        self.tail: list[str] = []
        self.total_steps: int | None = None

    @property
    def console_url(self) -> str:
        return aws.console_url(self.region, self.name)

    def describe(self) -> dict:
        return self._sm.describe_training_job(TrainingJobName=self.name)

    def stop(self) -> None:
        self._sm.stop_training_job(TrainingJobName=self.name)

    def _say(self, text: str) -> None:
        if self.echo:
            print(text, flush=True)

    def _poll_logs(self) -> None:
        from botocore.exceptions import ClientError

        try:
            streams = self._logs.describe_log_streams(logGroupName=LOG_GROUP, logStreamNamePrefix=f"{self.name}/")
        except ClientError:  # the log group appears with the first job's first line
            return
        names = [s["logStreamName"] for s in streams.get("logStreams", [])]
        for stream in names:
            while True:
                kwargs = {"logGroupName": LOG_GROUP, "logStreamName": stream, "startFromHead": True}
                if self._tokens.get(stream):
                    kwargs["nextToken"] = self._tokens[stream]
                page = self._logs.get_log_events(**kwargs)
                for event in page.get("events", []):
                    self._take(stream.split("/")[1].rsplit("-", 1)[0], event["message"], len(names) > 1)
                if page.get("nextForwardToken") == self._tokens.get(stream) or not page.get("events"):
                    self._tokens[stream] = page.get("nextForwardToken")
                    break
                self._tokens[stream] = page.get("nextForwardToken")

    def _take(self, host: str, line: str, multi: bool) -> None:
        text = f"[{host}] {line}" if multi else line
        self.tail = (self.tail + [text])[-60:]
        parsed = parse_metric_line(_MPI_TAG.sub("", line))
        if parsed:
            parsed["host"] = host
            self.history.append(parsed)
            if parsed["kind"] == "setup" and isinstance(parsed.get("steps"), int):
                self.total_steps = parsed["steps"]
            if parsed["kind"] == "train" and self.total_steps:
                text += f"   <- step {parsed['step']}/{self.total_steps} ({parsed['step'] / self.total_steps:.0%})"
        self._say(text)

    def wait(self, check: bool = True) -> SageMakerJobResult:
        """Follow status and logs until the job ends; ``check`` raises :class:`TrainingJobFailed` unless Completed.

        Interrupting the notebook stops following, not the job: stop it with ``.stop()`` or ``helpers.aws.account.cleanup()``.
        """
        self._say(f"following {self.name}: {self.console_url}")
        last = None
        try:
            while True:
                desc = self.describe()
                state = (desc["TrainingJobStatus"], desc.get("SecondaryStatus"))
                if state != last:
                    self._say(f"--- {state[0]} / {state[1]}")
                    last = state
                self._poll_logs()
                if desc["TrainingJobStatus"] in ("Completed", "Failed", "Stopped"):
                    break
                self._sleep(self.poll_s)
        except KeyboardInterrupt:
            self._say(f"stopped following; {self.name} is still running. Stop it with job.stop() or "
                      f"helpers.aws.account.cleanup().")
            raise
        return self._result(desc, check)

    def _result(self, desc: dict, check: bool) -> SageMakerJobResult:
        finals = [h for h in self.history if h["kind"] == "final"]
        metrics = {k: v for k, v in finals[-1].items() if k not in ("kind", "host")} if finals else \
            {m["MetricName"]: m["Value"] for m in desc.get("FinalMetricDataList", [])}
        bill = cost.job_cost(self.instance_type, self.instance_count, desc.get("TrainingTimeInSeconds", 0),
                             desc.get("BillableTimeInSeconds", 0))
        result = SageMakerJobResult(self.name, desc["TrainingJobStatus"], metrics, self.history, bill,
                                    self.console_url, desc.get("ModelArtifacts", {}).get("S3ModelArtifacts"),
                                    desc.get("FailureReason", ""), self.tail,
                                    _phases(desc.get("SecondaryStatusTransitions", [])))
        self._say(f"{result.status}: {bill}")
        if check and result.status != "Completed":
            tail = "\n".join(result.log_tail[-25:])
            raise TrainingJobFailed(f"job {self.name} {result.status.lower()}: {result.failure_reason}\n"
                                    f"--- last lines of its log ---\n{tail}\n{self.console_url}", result)
        return result


# ---------------------------------------------------------------------------------------------------- run
def _offline_session(session) -> aws_offline.OfflineAWS | None:
    if isinstance(session, aws_offline.OfflineAWS):
        return session
    if session is None:
        return aws_offline.active() or (aws_offline.OfflineAWS() if aws_offline.requested_by_environment() else None)
    return None


def _capture(plan: Plan, recorder: aws_offline.OfflineAWS, role: str, bucket: str, attendee: str,
             checkpoint_s3_uri: str | None) -> dict:
    """Build the trainer on a recording session and let the SDK 'create' the job: returns the request."""
    with aws_offline.config_validated_once():
        trainer = build_trainer(plan, recorder.sagemaker_session(), role, bucket, attendee, checkpoint_s3_uri)
        trainer.train(wait=False, logs=False)
    return recorder.request("CreateTrainingJob")


def run(job: Job, target: Target | str, launch: bool = False, budget_usd: float | None = None,
        attendee: str | None = None, session=None, role: str | None = None, bucket: str | None = None,
        region: str | None = None, wait: bool = True, check: bool = True, echo: bool = True,
        tensorboard: bool | None = None, expected_minutes: float | None = None,
        checkpoint_s3_uri: str | None = None, image_has_smddp: bool | None = None, quota_check: bool = True,
        poll_s: float = 15.0):
    """Dry-run (default) or launch ``job`` on a SageMaker instance type.

    ``session``: a ``boto3.Session`` (or an ``aws_offline.OfflineAWS``); by default the ambient credentials, or the
    offline session of an ``aws_offline.offline()`` block / ``WORKSHOP_AWS_OFFLINE=1``.
    ``budget_usd`` (default ``WORKSHOP_BUDGET_USD``) refuses a launch that could cost more.
    ``tensorboard``: collect ``/opt/ml/output/tensorboard`` to S3 (default: when a hyperparameter points there).
    Returns a :class:`DryRun`; with ``launch=True`` a :class:`SageMakerJobResult` (``wait=False``: a
    :class:`LaunchedJob`).
    """
    if (target.name if isinstance(target, Target) else str(target)) == "local_container":
        return run_local_container(job, echo=echo, session=session)
    priced: list[str] = []  # notes from pricing, kept when the plan is re-made for the job's region

    def replan(in_region: str | None) -> Plan:
        again = preflight(job, target, region=in_region, tensorboard=tensorboard,
                          image_has_smddp_override=image_has_smddp)
        again.notes.extend(priced)
        return again

    plan = replan(region)  # every check before any AWS call; the image is re-resolved once the region is known
    if role:
        role = aws.require_role_arn(role)
    if bucket:
        bucket = aws.require_bucket_name(bucket)
    budget_usd = cost.budget_from_environment() if budget_usd is None else budget_usd
    try:
        estimate = cost.estimate(plan.instance.name, job.instance_count, max_runtime_s=job.max_runtime_s,
                                 spot=job.spot, expected_s=None if expected_minutes is None else expected_minutes * 60)
    except cost.UnknownPrice as err:
        estimate = None
        priced.append(str(err))
        plan.notes.append(str(err))
    offline = _offline_session(session)

    if launch:
        if offline is not None:
            raise LaunchRefused("launch=True inside an offline session: nothing can be launched offline. Leave the "
                                "aws_offline.offline() block (and unset WORKSHOP_AWS_OFFLINE) to launch.")
        if estimate is None and budget_usd is not None:
            raise cost.BudgetExceeded(f"no price on file for {plan.instance.name}, so the budget of ${budget_usd:,.2f} "
                                      f"cannot be checked: pass budget_usd=None to launch without a budget.")
        if estimate is not None:
            cost.check_budget(estimate, budget_usd)
        ctx = aws.discover(role, bucket, region, attendee, boto_session=session)
        plan = replan(ctx.region)  # the image lives in the job's region: pulls across regions are refused
        if ctx.attendee.shared:
            raise aws.AwsSetupError(f"the job-name prefix would be the shared login name {ctx.attendee.name!r}: "
                                    f"pass attendee='yourname' or set {aws.ATTENDEE_ENV} so your jobs are yours.")
        if quota_check:
            aws.check_quota(ctx.boto_session, plan.instance.name, job.instance_count, job.spot, ctx.region)
        trainer = build_trainer(plan, ctx.sagemaker_session(), ctx.role_arn, ctx.bucket, ctx.attendee.name,
                                checkpoint_s3_uri)
        trainer.train(wait=False, logs=False)
        # the SDK keeps the created job on a private attribute only (train(wait=False) returns None)
        name = trainer._latest_training_job.training_job_name
        launched = LaunchedJob(name, ctx.boto_session, ctx.region, plan.instance.name, job.instance_count,
                               echo=echo, poll_s=poll_s)
        if echo:
            print(f"launched {name} ({job.instance_count} x {plan.instance.name}); {launched.console_url}",
                  flush=True)
        return launched.wait(check=check) if wait else launched

    notes: list[str] = []
    relaunch = None
    if offline is not None:
        recorder, where = offline, "offline: placeholder account, role and bucket"
        plan = replan(region or offline.region)
        role_arn, bucket_name = role or offline.role_arn, bucket or offline.bucket
        who = aws.resolve_attendee(attendee, {})
    else:
        try:
            ctx = aws.discover(role, bucket, region, attendee, boto_session=session)
        except aws.AwsSetupError as err:
            # a dry run still shows the request, with placeholders, and says what a launch will need
            notes.append(f"{err} Placeholders are shown instead.")
            ctx, why = None, ("no AWS credentials" if isinstance(err, aws.NoCredentials) else
                              f"the account is not ready to launch ({type(err).__name__})")
        if ctx is None:
            recorder, where = aws_offline.OfflineAWS(), f"offline: {why}, placeholder account"
            role_arn, bucket_name = role or recorder.role_arn, bucket or recorder.bucket
            who = aws.resolve_attendee(attendee, {})
        else:
            recorder = aws_offline.OfflineAWS(region=ctx.region, bucket=ctx.bucket, role_arn=ctx.role_arn,
                                              account=ctx.account)
            plan = replan(ctx.region)
            where, role_arn, bucket_name, who = f"built for {ctx!r}", ctx.role_arn, ctx.bucket, ctx.attendee

            def relaunch(**options):
                merged = dict(budget_usd=budget_usd, attendee=attendee, session=session, role=role, bucket=bucket,
                              region=region, wait=wait, check=check, echo=echo, tensorboard=tensorboard,
                              expected_minutes=expected_minutes, checkpoint_s3_uri=checkpoint_s3_uri,
                              image_has_smddp=image_has_smddp, quota_check=quota_check, poll_s=poll_s)
                merged.update(options)
                return run(job, target, launch=True, **merged)
    if who.shared:
        notes.append(f"job names would start with the shared login name {who.name!r}: set {aws.ATTENDEE_ENV} "
                     f"(or attendee=) before launching.")
    start = len(recorder.calls)
    with aws_offline.network_guard():
        request = _capture(plan, recorder, role_arn, bucket_name, who.name, checkpoint_s3_uri)
    made = recorder.calls[start:]
    where_inputs = Locations(bucket_name, who.name, job)
    uploads = _uploads(made, [where_inputs.channel_prefix(c.source) for c in plan.channels if c.kind == "local"])
    dry = DryRun(plan, request, estimate, budget_usd, uploads, aws_offline.summarize(made), where, notes, relaunch)
    save_request(dry, target)
    if echo:
        _show(dry)
    return dry


def save_request(dry: DryRun, target: Target | str, directory: str | Path | None = None) -> Path | None:
    """Write a dry run's request and plan as JSON into ``directory`` (default: ``$WORKSHOP_REQUESTS_DIR``; nothing
    when neither is set). The headless lab runner collects them, so tests can check what each lab would launch."""
    directory = directory or os.environ.get(REQUESTS_ENV)
    if not directory:
        return None
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    p = dry.plan
    record = {"lab_job": p.job.name, "target": target.name if isinstance(target, Target) else str(target),
              "launcher": p.launcher, "processes_per_host": p.processes_per_host, "world_size": p.world_size,
              "image_note": p.image_note, "max_usd": dry.estimate.max_usd if dry.estimate else None,
              "uploads": dry.uploads, "calls": dry.calls, "request": _redacted(dry.request)}
    path = out / f"{len(list(out.glob('*.json'))) + 1:02d}-{p.job.name}.json"
    path.write_text(aws_offline.to_json(record), encoding="utf-8")
    return path


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython

        return get_ipython() is not None
    except ImportError:
        return False


def _show(dry: DryRun) -> None:
    """Shown as it is built, like a local run's log (a lab cell usually assigns the result, which displays nothing):
    HTML in Jupyter, its text in a saved headless notebook, printed in a terminal."""
    if _in_notebook():
        from IPython import get_ipython

        dry._display_now()
        dry._shown_in = get_ipython().execution_count
    else:
        print(dry, flush=True)


def dry_run_offline(job: Job, target: Target | str, **options) -> DryRun:
    """The dry run CI uses: no credentials, no network, placeholders for account, role and bucket."""
    with aws_offline.offline():
        return run(job, target, launch=False, **options)


# ---------------------------------------------------------------------------------------------------- local_container
def docker_problem() -> str | None:
    """Why SageMaker's Docker local mode cannot run here, or None when it can."""
    if not shutil.which("docker"):
        return "the `docker` command is not installed"
    try:
        info = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True,
                              timeout=20)
    except (OSError, subprocess.SubprocessError) as err:
        return f"`docker info` failed ({err})"
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"the Docker daemon is not reachable ({reason})"
    compose = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=20)
    if compose.returncode != 0 and not shutil.which("docker-compose"):
        return "Docker Compose is not installed (`docker compose version` failed and there is no docker-compose)"
    return None


def local_container_trainer(job: Job, gpus: int, root: Path, session=None):
    """The ``ModelTrainer`` for SDK local mode: the SageMaker image on this machine's Docker (File mode only)."""
    from sagemaker.core.training.configs import Compute, InputData, SourceCode
    from sagemaker.train import ModelTrainer
    from sagemaker.train.distributed import Torchrun
    from sagemaker.train.model_trainer import Mode

    if job.spot or job.checkpoints or job.fsx:
        raise PreflightError("local_container runs no spot, checkpoint sync or FSx (SDK local mode has none): "
                             "drop spot/checkpoints/fsx for this target, or use target='local'.")
    for name, source in job.channels.items():
        if str(source).startswith("s3://"):
            continue
        if not Path(source).is_dir():
            raise ChannelError(f"channel {name!r}: {source} is not a directory.")
    procs = job.processes_per_host or (gpus or 1)
    kind = "local_gpu" if gpus else "local_cpu"
    probe = instances.lookup("ml.g5.xlarge" if gpus else "ml.m5.xlarge")
    image, _ = default_image("torchrun", probe)
    root.mkdir(parents=True, exist_ok=True)
    return ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER, training_image=image, base_job_name=job.name.replace("_", "-"),
        source_code=SourceCode(source_dir=str(job.source_dir), entry_script=job.entry_point),
        distributed=Torchrun(process_count_per_node=job.processes_per_host) if procs * job.instance_count > 1
        else None,
        compute=Compute(instance_type=kind, instance_count=job.instance_count),
        hyperparameters=dict(job.hyperparameters), environment=dict(job.environment),
        input_data_config=[InputData(channel_name=n, data_source=str(s)) for n, s in job.channels.items()] or None,
        local_container_root=str(root), sagemaker_session=session)


def run_local_container(job: Job, echo: bool = True, session=None):
    """Run ``job`` with the SDK's own ``Mode.LOCAL_CONTAINER`` (Docker), or say precisely why it cannot."""
    if problem := hyperparameters.check(job):
        raise PreflightError(problem)
    problem = docker_problem()
    if problem:
        raise LocalContainerUnavailable(
            f"target 'local_container' runs the job in the SageMaker training image on this machine (the SDK's "
            f"Mode.LOCAL_CONTAINER) and needs a Docker daemon with compose, but {problem}. SageMaker Studio has no "
            f"Docker unless the domain enables it. Use target='local' (the same container contract without Docker) "
            f"or an ml.* instance type.")

    root = RUNS_DIR / "local_container" / f"{job.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    trainer = local_container_trainer(job, local_gpu_count(), root, session)
    trainer.train(wait=True, logs=echo)
    return root
