"""Preflight: a lab's :class:`~helpers.job.Job` checked for a SageMaker instance type before any AWS call, and the
:class:`Plan` (launcher, processes, image, channels, stopping conditions) the request is built from."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from helpers import hyperparameters
from helpers.aws import account as aws
from helpers.aws import images
from helpers.channels import ChannelPlan, check_fsx, plan_channels
from helpers.errors import PreflightError
from helpers.job import Job
from helpers.planning import instances
from helpers.targets import LOCAL_TARGETS, Target, TargetError

TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # where SageMaker collects TensorBoard files from
MAX_RUNTIME_S = 28 * 24 * 3600  # the service's ceiling for MaxRuntimeInSeconds
LAUNCHERS = ("auto", "torchrun", "smddp", "smp")
# secret-looking names, as whole words: "hf_token" and "WANDB_API_KEY" are hidden, "tokenize" is not
_SECRETS = re.compile(
    r"(?<![a-z])(secret|token|password|passwd|credential|api[_-]?key|access[_-]?key)s?(?![a-z])", re.IGNORECASE
)
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")


class UnsupportedFeature(PreflightError):
    """SMDDP or SMP asked of an instance type or image that does not have it."""


class SpotConfigError(PreflightError):
    """Managed spot without checkpoints, or stopping conditions the service would reject."""


class ProcessCountError(PreflightError):
    """More processes per host than GPUs, or SMP degrees that do not divide the processes."""


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


def _target_instance(target: Target | str) -> instances.InstanceType:
    name = target.name if isinstance(target, Target) else str(target)
    if name in LOCAL_TARGETS:
        raise TargetError(
            f"helpers.aws.sagemaker_jobs runs SageMaker instance types ('ml.g5.2xlarge'); {name!r} is a "
            f"local target: use helpers.jobs.run_job(job, {name!r})."
        )
    return instances.lookup(name)


def preflight(
    job: Job,
    target: Target | str,
    *,
    region: str | None = None,
    tensorboard: bool | None = None,
    image_has_smddp_override: bool | None = None,
) -> Plan:
    """Check ``job`` for ``target`` and decide launcher, image and channels; never calls AWS.

    Raises a :class:`PreflightError` subclass (or ``instances.UnknownInstanceType``) whose message names the fix.
    """
    instance = _target_instance(target)
    notes: list[str] = []
    base = f"x-{job.name}".lower().replace("_", "-")
    if not _NAME.match(job.name.replace("_", "-")) or len(base) > 32:
        raise PreflightError(
            f"job name {job.name!r}: use letters, digits and dashes, at most 30 characters (the "
            f"attendee prefix and a timestamp are added to make the SageMaker job name)."
        )
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
        raise ProcessCountError(
            f"{procs} processes per host but {instance.name} has {instance.gpus} GPU(s): set "
            f"processes_per_host to at most {instance.gpus} (one per GPU), or pick an instance "
            f"with more GPUs ({', '.join(_bigger(instance))})."
        )
    if not instance.gpus and procs > instance.vcpus:
        raise ProcessCountError(f"{procs} processes per host but {instance.name} has {instance.vcpus} vCPUs.")
    if not instance.gpus and not instance.name.startswith(("ml.m", "ml.c")):
        raise UnsupportedFeature(
            f"{instance.name} has {instance.accelerators or 'no GPUs'}: the labs' script needs "
            f"CUDA GPUs (or a CPU type for a smoke run)."
        )

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
                f"(not P5 or the G families). Use distribution='torchrun' (NCCL) here, or target='ml.p4d.24xlarge'."
            )
        if job.smp:
            raise PreflightError("Job.smp is set but distribution='smddp': SMP degrees belong to distribution='smp'.")
    if launcher == "smp":
        if not instance.supports("smp"):
            raise UnsupportedFeature(
                f"SMP v2 does not run on {instance.name}: it supports "
                f"{', '.join(instances.supporting('smp'))}. Use distribution='torchrun' with "
                f"FSDP here, or target='ml.p4d.24xlarge'."
            )
        notes += _check_smp(job, procs)
    elif job.smp and launcher != "smddp":
        raise PreflightError("Job.smp is set but distribution is not 'smp': set distribution='smp' to use it.")
    precision = str(job.hyperparameters.get("precision", "auto")).lower()
    if precision == "bf16" and instance.gpus and not instance.supports("bf16"):
        notes.append(
            f"precision='bf16' on {instance.name} ({instance.gpu.model}, no bf16 tensor cores): the script "
            f"runs its fp16 (loss-scaled, or fp32 where it has none) instead"
        )
    if precision == "fp16" and not instance.gpus:
        raise UnsupportedFeature(f"precision='fp16' needs a GPU and {instance.name} has none: use 'fp32' or 'bf16'.")

    image, image_note = (
        (job.image_uri, "image given in Job.image_uri")
        if job.image_uri
        else images.default_image(launcher, instance, region)
    )
    if launcher == "smddp":
        has = images.image_has_smddp(image) if image_has_smddp_override is None else image_has_smddp_override
        if not has:
            default = images.SMDDP_DLC[0]
            others = sorted(set(images.SMDDP_IN_DLC) - {images.minor(default)})
            raise UnsupportedFeature(
                f"image {image} does not ship SMDDP: leave Job.image_uri unset (the helpers pick the PyTorch "
                f"{default} DLC, which AWS's SMDDP table and its Dockerfile both list with SMDDP), or use the "
                f"SageMaker GPU DLC for PyTorch {' or '.join(others)} "
                f"(their Dockerfiles install SMDDP) or an SMP image; for your own image that installs "
                f"smdistributed-dataparallel pass image_has_smddp=True."
            )
        repo, _, version = images.image_tag(image)
        if (
            image_has_smddp_override is None
            and repo == "pytorch-training"
            and images.minor(version) in set(images.SMDDP_IN_DLC) - set(images.SMDDP_IN_AWS_TABLE)
        ):
            notes.append(
                f"{image.rsplit('/', 1)[-1]}: AWS's SMDDP support table does not list it, but its "
                f"Dockerfile installs SMDDP {images.SMDDP_IN_DLC[images.minor(version)]}, and the "
                f"Dockerfile is what goes into the image"
            )
    if launcher == "smddp" and str(job.hyperparameters.get("backend", "smddp")) != "smddp":
        raise PreflightError(
            f"distribution='smddp' launches through mpirun for SMDDP's AllReduce, but "
            f"hyperparameters['backend'] is {job.hyperparameters['backend']!r}: set it to 'smddp' "
            f"or leave it out (or use distribution='torchrun' for NCCL)."
        )
    # a secret-looking name with a text value ("generate_tokens": 20 is a count, "hf_token": "hf_..." is not)
    secrets = [k for k, v in job.hyperparameters.items() if secret(k) and _text(v)]
    if secrets:
        raise PreflightError(
            f"hyperparameter(s) {', '.join(secrets)} look like secrets: hyperparameters are stored "
            f"with the job and shown by DescribeTrainingJob. Keep secrets out of the job (read them "
            f"from AWS Secrets Manager in the script, with the execution role's permission)."
        )
    if (
        "smdistributed-modelparallel" in image
        and job.entry_point == "train.py"
        and str(job.hyperparameters.get("attn_implementation", "sdpa")) == "sdpa"
    ):
        notes.append(
            "an SMP image keeps its own transformers (requirements.txt installs one only where the image has "
            "none that fits: 4.44.2 in the SMP 2.5.1 image), and DistilBERT has SDPA attention only from "
            "transformers 4.46: pass attn_implementation='eager' to train.py there"
        )
    if launcher == "smp" and job.image_uri and "smdistributed-modelparallel" not in job.image_uri:
        raise UnsupportedFeature(
            f"SMP v2 needs an SMP image (smdistributed-modelparallel); {job.image_uri} is not "
            f"one. Leave Job.image_uri unset."
        )

    # stopping conditions and spot
    if not 0 < job.max_runtime_s <= MAX_RUNTIME_S:
        raise SpotConfigError(f"max_runtime_s must be between 1 and {MAX_RUNTIME_S} (28 days).")
    max_wait = job.max_wait_s
    if job.spot:
        if not job.checkpoints:
            raise SpotConfigError(
                "managed spot without checkpoints: an interrupted job would start over. Set "
                "Job.checkpoints=True (the script saves to /opt/ml/checkpoints, SageMaker syncs it "
                "to S3 and restores it after an interruption)."
            )
        if max_wait is None:
            max_wait = 2 * job.max_runtime_s
            notes.append(
                f"max_wait_s not set: {max_wait} s (twice max_runtime_s) of runtime plus waiting for spot capacity"
            )
        if max_wait < job.max_runtime_s:
            raise SpotConfigError(
                f"max_wait_s ({max_wait}) is below max_runtime_s ({job.max_runtime_s}): MaxWait "
                f"counts runtime plus time waiting for spot capacity, so it must be at least "
                f"MaxRuntime. Set max_wait_s >= {job.max_runtime_s}."
            )
        if max_wait > MAX_RUNTIME_S:
            raise SpotConfigError(f"max_wait_s must be at most {MAX_RUNTIME_S} (28 days).")
    elif max_wait is not None:
        raise SpotConfigError(
            "max_wait_s is set but spot=False: MaxWait only applies to managed spot. Set "
            "Job.spot=True or drop max_wait_s."
        )

    channels = plan_channels(job)
    fsx_channels = [c for c in channels if c.kind == "fsx"]
    if fsx_channels or job.fsx:
        check_fsx(job, fsx_channels)
        code = (
            "the image's training toolkit downloads the source (sourcedir.tar.gz) from there"
            if launcher == "smddp"
            else "the job's code channels come from there (code, the source, and sm_drivers, the SDK's drivers)"
        )
        notes.append(
            f"the job runs in your VPC, which must reach S3 through an S3 VPC endpoint or a NAT gateway: "
            f"{code}, and so do its S3 data channels, its model, output and checkpoints"
        )
        if (Path(job.source_dir) / "requirements.txt").is_file():
            notes.append(
                "the job runs in your VPC: pip installs requirements.txt from PyPI there, so the subnets "
                "need a NAT gateway (or a PyPI mirror); an S3 endpoint alone does not reach PyPI"
            )

    if tensorboard is None:  # on when the job writes where SageMaker collects TensorBoard files
        tensorboard = any(str(v).startswith(TENSORBOARD_DIR) for v in job.hyperparameters.values())
    for key in job.hyperparameters:
        if not isinstance(key, str) or not key or key.startswith("sagemaker_"):
            raise PreflightError(f"hyperparameter {key!r}: names are non-empty strings; 'sagemaker_' is reserved.")
    if len(job.tags) > 45:
        raise PreflightError("at most 45 tags (SageMaker allows 50; the helpers add their own).")
    if taken := sorted({aws.ATTENDEE_TAG, "workshop-lab"} & set(job.tags)):
        raise PreflightError(
            f"tag key(s) {', '.join(taken)} are the helpers' own (the attendee and the lab of every "
            f"job): name yours otherwise."
        )
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
        raise ProcessCountError(
            f"tensor_parallel_degree={tp} must divide the {world} GPUs of the cluster "
            f"({job.instance_count} x {procs} processes)."
        )
    if hsd and (world // tp) % hsd:
        raise ProcessCountError(
            f"hybrid_shard_degree={hsd} must divide the {world // tp} data-parallel ranks "
            f"({world} processes / tensor_parallel_degree {tp})."
        )
    notes = []
    if procs % tp:  # SMP allows it; it is slow, not wrong
        notes.append(
            f"tensor_parallel_degree={tp} does not divide the {procs} GPUs of one instance, so its groups "
            f"span instances: tensor parallel communicates inside every layer, and the network is much "
            f"slower than NVLink; a degree that divides {procs} keeps each group inside one instance"
        )
    return notes


def secret(key: str) -> bool:
    """A secret-looking name: refused as a hyperparameter with a text value, hidden in a dry run's request."""
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
