"""What a job needs wherever it runs, on this machine or on SageMaker (its name, entry point, hyperparameters, tags,
stopping conditions, processes and channels): the rules, and their table :data:`COMMON` at the end."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from helpers import hyperparameters, input_mode
from helpers.checks.findings import (
    ChannelError,
    Finding,
    ProcessCountError,
    Rule,
    SpotConfigError,
    UnsupportedFeature,
    Where,
    fail,
    note,
)
from helpers.data import catalog_files
from helpers.job_spec import Job
from helpers.planning import instances

MAX_RUNTIME_S = 28 * 24 * 3600  # the service's ceiling for MaxRuntimeInSeconds
RESERVED_TAGS = ("workshop-attendee", "workshop-lab")  # the helpers tag every SageMaker job with these
# secret-looking names, as whole words: "hf_token" and "WANDB_API_KEY" are hidden, "tokenize" is not
_SECRETS = re.compile(
    r"(?<![a-z])(secret|token|password|passwd|credential|api[_-]?key|access[_-]?key)s?(?![a-z])", re.IGNORECASE
)
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")


# ---------------------------------------------------------------------------------------------- the job itself
def counts(job: Job, where: Where) -> Iterator[Finding]:
    if job.instance_count < 1 or where.processes < 1:
        yield fail("processes_per_host and instance_count must be at least 1.", ProcessCountError)


def entry_point(job: Job, where: Where) -> Iterator[Finding]:
    entry = Path(job.source_dir) / job.entry_point
    if not entry.is_file():
        yield fail(f"entry point {entry} does not exist; set Job.source_dir and Job.entry_point.")


def hyperparameter_names(job: Job, where: Where) -> Iterator[Finding]:
    for key in job.hyperparameters:
        if not isinstance(key, str) or not key or key.startswith("sagemaker_"):
            yield fail(f"hyperparameter {key!r}: names are non-empty strings; 'sagemaker_' is reserved.")


def hyperparameter_values(job: Job, where: Where) -> Iterator[Finding]:
    """Against the options the entry script publishes: unknown names (a typo would be ignored), values out of
    range or of the wrong kind."""
    if problem := hyperparameters.mismatch(job):
        yield fail(problem)


def secrets(job: Job, where: Where) -> Iterator[Finding]:
    """A secret-looking name with a text value ("generate_tokens": 20 is a count, "hf_token": "hf_..." is not), as
    a hyperparameter or an environment variable: both are stored with the job and shown by DescribeTrainingJob."""
    for kind, found in (
        ("hyperparameter", [k for k, v in job.hyperparameters.items() if secret(k) and _text(v)]),
        ("environment variable", [k for k, v in job.environment.items() if secret(k) and _text(v)]),
    ):
        if found:
            yield fail(
                f"{kind}(s) {', '.join(found)} look like secrets: a job's hyperparameters and environment are stored "
                f"with it and shown by DescribeTrainingJob to anyone who may describe it. Keep secrets out of the job "
                f"(read them from AWS Secrets Manager in the script, under a role granted that secret: the workshop's "
                f"job roles are granted none)."
            )


def traffic_encryption(job: Job, where: Where) -> Iterator[Finding]:
    """What encrypting the traffic between instances does, and costs."""
    if not job.encrypt_traffic:
        return
    if job.instance_count == 1:
        yield note("encrypt_traffic has nothing to encrypt on one instance: its processes talk over loopback")
    elif where.target.is_local:
        yield note("encrypt_traffic: local 'nodes' talk over loopback, unencrypted; on SageMaker it applies")
    else:
        yield note(
            "inter-container traffic encryption is on: no charge of its own, but every byte between the instances "
            "(the gradient all-reduce included) goes through IPsec, which AWS says can increase training time; the "
            "cost above assumes none"
        )


def tags(job: Job, where: Where) -> Iterator[Finding]:
    if len(job.tags) > 45:
        yield fail("at most 45 tags (SageMaker allows 50; the helpers add their own).")
    elif taken := sorted(set(RESERVED_TAGS) & set(job.tags)):
        yield fail(
            f"tag key(s) {', '.join(taken)} are the helpers' own (the attendee and the lab of every job): name "
            f"yours otherwise."
        )


def stopping(job: Job, where: Where) -> Iterator[Finding]:
    """MaxRuntime in the service's range; managed spot needs checkpoints and a MaxWait of at least MaxRuntime."""
    if not 0 < job.max_runtime_s <= MAX_RUNTIME_S:
        yield fail(f"max_runtime_s must be between 1 and {MAX_RUNTIME_S} (28 days).", SpotConfigError)
    elif not job.spot and job.max_wait_s is not None:
        yield fail(
            "max_wait_s is set but spot=False: MaxWait only applies to managed spot. Set Job.spot=True or drop "
            "max_wait_s.",
            SpotConfigError,
        )
    elif job.spot and not job.checkpoints:
        yield fail(
            "managed spot without checkpoints: an interrupted job would start over. Set Job.checkpoints=True (the "
            "script saves to /opt/ml/checkpoints, SageMaker syncs it to S3 and restores it after an interruption).",
            SpotConfigError,
        )
    elif job.spot and job.max_wait_s is not None and job.max_wait_s < job.max_runtime_s:
        yield fail(
            f"max_wait_s ({job.max_wait_s}) is below max_runtime_s ({job.max_runtime_s}): MaxWait counts runtime "
            f"plus time waiting for spot capacity, so it must be at least MaxRuntime. Set max_wait_s >= "
            f"{job.max_runtime_s}.",
            SpotConfigError,
        )
    elif job.spot and (job.max_wait_s or 0) > MAX_RUNTIME_S:
        yield fail(f"max_wait_s must be at most {MAX_RUNTIME_S} (28 days).", SpotConfigError)
    elif job.spot and job.max_wait_s is None:
        yield note(
            f"max_wait_s not set: {max_wait_s(job)} s (twice max_runtime_s) of runtime plus waiting for spot capacity"
        )


def max_wait_s(job: Job) -> int | None:
    """A spot job's MaxWaitTimeInSeconds: as given, else twice its runtime; None without spot."""
    if not job.spot:
        return None
    return job.max_wait_s if job.max_wait_s is not None else 2 * job.max_runtime_s


# ---------------------------------------------------------------------------------------------- the processes
def processes_fit_the_gpus(job: Job, where: Where) -> Iterator[Finding]:
    if not where.gpus or where.processes <= where.gpus:
        return
    if where.instance:
        yield fail(
            f"{where.processes} processes per host but {where.instance.name} has {where.gpus} GPU(s): set "
            f"processes_per_host to at most {where.gpus} (one per GPU), or pick an instance with more GPUs "
            f"({', '.join(_bigger(where))}).",
            ProcessCountError,
        )
    else:
        yield fail(
            f"{where.processes} processes per host but {where.target.describe()}: use at most {where.gpus} (one per "
            f"GPU), or target='local_cpu'.",
            ProcessCountError,
        )


def precision_fits_the_device(job: Job, where: Where) -> Iterator[Finding]:
    precision = str(job.hyperparameters.get("precision", "auto")).lower()
    instance = where.instance
    if precision == "fp16" and not where.gpus:
        yield fail(
            f"precision='fp16' needs a GPU and {where.target.name} has none: use 'fp32' or 'bf16'.", UnsupportedFeature
        )
    elif precision == "bf16" and instance and instance.gpu and where.gpus and not instance.supports("bf16"):
        yield note(
            f"precision='bf16' on {instance.name} ({instance.gpu.model}, no bf16 tensor cores): the "
            f"script runs its fp16 (loss-scaled, or fp32 where it has none) instead"
        )


# ---------------------------------------------------------------------------------------------- the channels
def channel_modes(job: Job, where: Where) -> Iterator[Finding]:
    for name in job.channels:
        if problem := input_mode.unknown(job.mode_of(name)):
            yield fail(f"channel {name!r}: {problem}", ChannelError)
        if name in ("code", "sm_drivers"):
            yield fail(f"channel name {name!r} is reserved by the SDK for the source code; rename it.", ChannelError)


def channel_sources(job: Job, where: Where) -> Iterator[Finding]:
    """A local directory holds files; an s3:// URI is one S3 would take."""
    for name, source in job.channels.items():
        text = str(source)
        if not input_mode.reads_s3(job.mode_of(name)):
            continue  # a directory on a file system: the fsx rule checks it
        if text.startswith("s3://"):
            if not _S3_URI.match(text):
                yield fail(f"channel {name!r}: {text!r} is not a valid S3 URI (s3://bucket/prefix).", ChannelError)
        elif not Path(source).is_dir() or not any(Path(source).iterdir()):
            yield fail(f"channel {name!r}: {_missing(Path(source))}", ChannelError)


def _missing(source: Path) -> str:
    """Why a local channel is missing or empty: its catalogue's own account where it is a catalogue's folder (the
    part its manifest lists, and the command that rebuilds it)."""
    if (source.parent / "manifest.json").is_file():
        try:
            catalog_files.verify_catalogue(source.parent, only=f"{source.name}/")
        except catalog_files.CatalogError as e:
            return str(e)
    return (
        f"{source} is missing or empty. Build the data first (`python -m catalog_generator.catalog build --out "
        f"data/catalog`) or give an s3:// URI."
    )


def channel_data(job: Job, where: Where) -> Iterator[Finding]:
    """A malformed data file in a local channel fails here, not after upload and start-up."""
    try:
        catalog_files.check_channels({n: src for n, src in job.channels.items() if input_mode.reads_s3(job.mode_of(n))})
    except catalog_files.CatalogError as e:
        yield fail(str(e), ChannelError)


# ---------------------------------------------------------------------------------------------- small helpers
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


def _bigger(where: Where) -> list[str]:
    return [n for n in instances.supporting("gpu") if instances.lookup(n).gpus > where.gpus][:3]


# the rules every job meets, in this order, before those of its target's kind (helpers.checks.target_rules.ONLY)
COMMON: tuple[Rule, ...] = (
    counts,
    entry_point,
    hyperparameter_names,
    hyperparameter_values,
    secrets,
    traffic_encryption,
    tags,
    stopping,
    processes_fit_the_gpus,
    precision_fits_the_device,
    channel_modes,
    channel_sources,
    channel_data,
)
