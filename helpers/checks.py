"""Every check of a job, in one table: small named rules, each a function of the job and where it runs.

A rule yields what it finds: :func:`fail` (what is wrong and what to do, as one of the :class:`JobCheckError` kinds)
or :func:`note` (advice the dry run prints). :data:`COMMON` rules apply wherever the job runs; :data:`ONLY` adds
what one kind of target needs besides: this machine (``local``), the SDK's Docker local mode (``local_container``)
or an instance type (``sagemaker``). The local runner runs ``check(job, Where.local(...))``, preflight
``check(job, Where.sagemaker(...))``: a rule added to :data:`COMMON` applies to both. Choosing the image for a
region is a step of its own, after these (``helpers.aws.images.choose_image``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers import hyperparameters
from helpers.data import catalog
from helpers.errors import JobCheckError
from helpers.job import Job, name_problem, tag_problem
from helpers.planning import instances
from helpers.targets import Target

INPUT_MODES = ("File", "FastFile", "FSx")
LAUNCHERS = ("auto", "torchrun", "smddp", "smp")
MAX_RUNTIME_S = 28 * 24 * 3600  # the service's ceiling for MaxRuntimeInSeconds
RESERVED_TAGS = ("workshop-attendee", "workshop-lab")  # the helpers tag every SageMaker job with these
# secret-looking names, as whole words: "hf_token" and "WANDB_API_KEY" are hidden, "tokenize" is not
_SECRETS = re.compile(
    r"(?<![a-z])(secret|token|password|passwd|credential|api[_-]?key|access[_-]?key)s?(?![a-z])", re.IGNORECASE
)
_S3_URI = re.compile(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$")


class UnsupportedFeature(JobCheckError):
    """SMDDP, SMP or a precision asked of an instance type or image that does not have it."""


class SpotConfigError(JobCheckError):
    """Managed spot without checkpoints, or stopping conditions the service would reject."""


class ProcessCountError(JobCheckError):
    """More processes per host than GPUs, or SMP degrees that do not divide the processes."""


class ChannelError(JobCheckError):
    """A channel that is missing, empty, malformed, or in a mode that does not exist."""


class FSxConfigError(ChannelError):
    """An FSx for Lustre channel without what the service needs to mount it."""


@dataclass(frozen=True)
class Where:
    """Where a job is checked for: the target, its catalogue entry (SageMaker; None here), the processes per host
    and the launcher that starts them (``script``, ``torchrun``, ``smddp`` or ``smp``)."""

    target: Target
    instance: instances.InstanceType | None
    processes: int
    launcher: str

    @classmethod
    def local(cls, job: Job, target: Target) -> Where:
        procs = target.default_processes() if job.processes_per_host is None else job.processes_per_host
        return cls(target, None, procs, "torchrun" if procs * job.instance_count > 1 else "script")

    @classmethod
    def sagemaker(cls, job: Job, target: Target) -> Where:
        instance = instances.lookup(target.name)
        procs = (instance.gpus or 1) if job.processes_per_host is None else job.processes_per_host  # one per GPU
        launcher = job.distribution
        if launcher in ("auto", "torchrun") and procs * job.instance_count == 1:
            launcher = "script"
        elif launcher == "auto":
            launcher = "torchrun"
        return cls(target, instance, procs, launcher)

    @property
    def gpus(self) -> int:
        return self.target.gpus


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    error: type[JobCheckError] | None  # None: a note, not a refusal


Rule = Callable[[Job, Where], Iterable[Finding]]


def fail(message: str, error: type[JobCheckError] = JobCheckError) -> Finding:
    return Finding("", message, error)


def note(message: str) -> Finding:
    return Finding("", message, None)


def findings(job: Job, where: Where, rules: Iterable[Rule]) -> Iterator[Finding]:
    """Every finding of ``rules``, in order, each named for its rule. A rule stops at its first refusal."""
    for rule in rules:
        for found in rule(job, where):
            yield Finding(rule.__name__, found.message, found.error)
            if found.error is not None:
                break


def check(job: Job, where: Where, rules: Iterable[Rule] | None = None) -> list[str]:
    """Raise the first refusal of ``rules`` (by default, those of the target's kind: :func:`rules_for`) with its own
    error kind and a message naming the fix; else return the notes."""
    notes = []
    for found in findings(job, where, rules_for(where.target.kind) if rules is None else rules):
        if found.error is not None:
            raise found.error(found.message)
        notes.append(found.message)
    return notes


# ---------------------------------------------------------------------------------------------- the job itself
def job_name(job: Job, where: Where) -> Iterator[Finding]:
    if problem := name_problem(job.name):
        yield fail(problem)


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
    if problem := hyperparameters.check(job):
        yield fail(problem)


def secrets(job: Job, where: Where) -> Iterator[Finding]:
    """A secret-looking name with a text value ("generate_tokens": 20 is a count, "hf_token": "hf_..." is not)."""
    found = [k for k, v in job.hyperparameters.items() if secret(k) and _text(v)]
    if found:
        yield fail(
            f"hyperparameter(s) {', '.join(found)} look like secrets: hyperparameters are stored with the job and "
            f"shown by DescribeTrainingJob. Keep secrets out of the job (read them from AWS Secrets Manager in the "
            f"script, with the execution role's permission)."
        )


def tags(job: Job, where: Where) -> Iterator[Finding]:
    if problem := tag_problem(job.tags):
        yield fail(f"Job.tags: {problem}")
    elif len(job.tags) > 45:
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
        mode = job.mode_of(name)
        if mode not in INPUT_MODES:
            hint = " Pipe mode is legacy: FastFile streams the same way with plain files." if mode == "Pipe" else ""
            yield fail(
                f"channel {name!r}: input mode {mode!r} is not one of {', '.join(INPUT_MODES)}.{hint}", ChannelError
            )
        if name in ("code", "sm_drivers"):
            yield fail(f"channel name {name!r} is reserved by the SDK for the source code; rename it.", ChannelError)


def channel_sources(job: Job, where: Where) -> Iterator[Finding]:
    """A local directory holds files; an s3:// URI is one S3 would take."""
    for name, source in job.channels.items():
        text = str(source)
        if job.mode_of(name) == "FSx":
            continue
        if text.startswith("s3://"):
            if not _S3_URI.match(text):
                yield fail(f"channel {name!r}: {text!r} is not a valid S3 URI (s3://bucket/prefix).", ChannelError)
        elif not Path(source).is_dir() or not any(Path(source).iterdir()):
            yield fail(
                f"channel {name!r}: {source} is missing or empty. Build the data first (`python -m "
                f"helpers.data.catalog build --out data/catalog`) or give an s3:// URI.",
                ChannelError,
            )


def channel_data(job: Job, where: Where) -> Iterator[Finding]:
    """A malformed data file in a local channel fails here, not after upload and start-up."""
    try:
        catalog.check_channels({n: src for n, src in job.channels.items() if job.mode_of(n) != "FSx"})
    except catalog.CatalogError as e:
        yield fail(str(e), ChannelError)


def local_channel_modes(job: Job, where: Where) -> Iterator[Finding]:
    """Locally, FastFile and FSx come from the loopback object store (lab 05); a directory is copied (File)."""
    for name, source in job.channels.items():
        mode = job.mode_of(name)
        if mode != "File" and not str(source).startswith("s3://"):
            yield fail(
                f"channel {name!r}: input mode {mode!r} needs an s3:// channel on the local object store "
                f"(helpers.local.objectstore, lab 05); a local directory is presented in 'File' mode.",
                ChannelError,
            )


def fsx(job: Job, where: Where) -> Iterator[Finding]:
    """What the service needs to mount an FSx for Lustre file system, and what a job in a VPC needs besides."""
    fsx_channels = [n for n in job.channels if job.mode_of(n) == "FSx"]
    if not fsx_channels and not job.fsx:
        return
    missing = [k for k in ("file_system_id", "subnets", "security_group_ids") if not job.fsx.get(k)]
    if not fsx_channels:
        yield fail("Job.fsx is set but no channel uses it: set channel_modes={'train': 'FSx'}.", FSxConfigError)
    elif "file_system_id" in missing:
        yield fail("FSx channel without Job.fsx['file_system_id'] (fs-0123456789abcdef0).", FSxConfigError)
    elif missing:
        yield fail(
            f"FSx for Lustre is reached through your VPC: Job.fsx needs {' and '.join(missing)} (the subnet(s) of "
            f"the file system and a security group that allows Lustre traffic, TCP ports 988 and 1018-1023, from "
            f"itself; with several instances, all traffic from itself, for NCCL between them). The job then runs in "
            f"that VPC: it needs an S3 VPC endpoint or NAT for everything it reads from or writes to S3, its code "
            f"channels included (the source, and the SDK's drivers channel sm_drivers), and NAT to install "
            f"requirements.txt.",
            FSxConfigError,
        )
    elif not str(job.fsx["file_system_id"]).startswith("fs-"):
        yield fail(
            f"file_system_id {job.fsx['file_system_id']!r} should look like 'fs-0123456789abcdef0'.", FSxConfigError
        )
    elif job.fsx.get("access_mode", "ro") not in ("ro", "rw"):
        yield fail(f"Job.fsx['access_mode'] must be 'ro' or 'rw', not {job.fsx['access_mode']!r}.", FSxConfigError)
    else:
        for name in fsx_channels:
            path = fsx_directory(job, str(job.channels[name]))
            if not path.startswith("/") or path.strip("/") == "":
                yield fail(
                    f"channel {name!r}: FSx directory {path!r} must be an absolute path that starts with the file "
                    f"system's mount name, e.g. '/abcdef12/catalog/train' (FSx console > file system > Attach shows "
                    f"the mount name).",
                    FSxConfigError,
                )
        yield from _in_a_vpc(job, where)


def _in_a_vpc(job: Job, where: Where) -> Iterator[Finding]:
    code = (
        "the image's training toolkit downloads the source (sourcedir.tar.gz) from there"
        if where.launcher == "smddp"
        else "the job's code channels come from there (code, the source, and sm_drivers, the SDK's drivers)"
    )
    yield note(
        f"the job runs in your VPC, which must reach S3 through an S3 VPC endpoint or a NAT gateway: {code}, and so "
        f"do its S3 data channels, its model, output and checkpoints"
    )
    if (Path(job.source_dir) / "requirements.txt").is_file():
        yield note(
            "the job runs in your VPC: pip installs requirements.txt from PyPI there, so the subnets need a NAT "
            "gateway (or a PyPI mirror); an S3 endpoint alone does not reach PyPI"
        )


def fsx_directory(job: Job, value: str) -> str:
    """An FSx channel's directory: absolute as given, or under ``Job.fsx['directory_path']``."""
    base = str(job.fsx.get("directory_path", "")).rstrip("/")
    return value if value.startswith("/") else f"{base}/{value}".replace("//", "/")


# ---------------------------------------------------------------------------------------------- here only
def no_hub_downloads(job: Job, where: Where) -> Iterator[Finding]:
    if job.hyperparameters.get("hub_checkpoint"):
        yield fail(
            f"hub_checkpoint={job.hyperparameters['hub_checkpoint']!r} would download a model, and local jobs never "
            "leave this machine: run it on an ml.* target (the container downloads it), or pass a save_pretrained() "
            "directory as the 'pretrained' channel."
        )


def local_mode_limits(job: Job, where: Where) -> Iterator[Finding]:
    """The SDK's Docker local mode has no spot, no checkpoint sync and no FSx, and turns every channel to File."""
    if job.spot or job.checkpoints or job.fsx:
        yield fail(
            "local_container runs no spot, checkpoint sync or FSx (SDK local mode has none): drop "
            "spot/checkpoints/fsx for this target, or use target='local'.",
            UnsupportedFeature,
        )


# ---------------------------------------------------------------------------------------------- SageMaker only
def instance_runs_the_script(job: Job, where: Where) -> Iterator[Finding]:
    instance = where.instance
    if instance and not instance.gpus and where.processes > instance.vcpus:
        yield fail(f"{where.processes} processes per host but {instance.name} has {instance.vcpus} vCPUs.")
    if instance and not instance.gpus and not instance.name.startswith(("ml.m", "ml.c")):
        yield fail(
            f"{instance.name} has {instance.accelerators or 'no GPUs'}: the labs' script needs CUDA GPUs (or a CPU "
            f"type for a smoke run).",
            UnsupportedFeature,
        )


def launcher(job: Job, where: Where) -> Iterator[Finding]:
    if job.distribution not in LAUNCHERS:
        yield fail(f"distribution {job.distribution!r} is not one of {', '.join(LAUNCHERS)}.")
    elif job.distribution == "torchrun" and where.launcher == "script":
        yield note("one process in all: the SDK's basic script driver runs it (torchrun adds nothing)")


def smddp(job: Job, where: Where) -> Iterator[Finding]:
    if where.launcher != "smddp":
        return
    assert where.instance is not None  # only Where.sagemaker, which looks the instance up, picks this launcher
    if not where.instance.supports("smddp"):
        yield fail(
            f"SMDDP does not run on {where.instance.name}: it supports only "
            f"{', '.join(instances.supporting('smddp'))} (not P5 or the G families). Use distribution='torchrun' "
            f"(NCCL) here, or target='ml.p4d.24xlarge'.",
            UnsupportedFeature,
        )
    elif job.smp:
        yield fail("Job.smp is set but distribution='smddp': SMP degrees belong to distribution='smp'.")
    elif str(job.hyperparameters.get("backend", "smddp")) != "smddp":
        yield fail(
            f"distribution='smddp' launches through mpirun for SMDDP's AllReduce, but hyperparameters['backend'] is "
            f"{job.hyperparameters['backend']!r}: set it to 'smddp' or leave it out (or use distribution='torchrun' "
            f"for NCCL)."
        )


def smp(job: Job, where: Where) -> Iterator[Finding]:
    """SMP v2's degrees against the cluster: what cannot run is refused, what runs slowly gets a note."""
    if where.launcher != "smp":
        if job.smp and where.launcher != "smddp":
            yield fail("Job.smp is set but distribution is not 'smp': set distribution='smp' to use it.")
        return
    assert where.instance is not None  # only Where.sagemaker, which looks the instance up, picks this launcher
    if not where.instance.supports("smp"):
        yield fail(
            f"SMP v2 does not run on {where.instance.name}: it supports {', '.join(instances.supporting('smp'))}. "
            f"Use distribution='torchrun' with FSDP here, or target='ml.p4d.24xlarge'.",
            UnsupportedFeature,
        )
        return
    from sagemaker.train.distributed import SMP  # the SDK's own list of SMP settings

    unknown = set(job.smp) - set(SMP.model_fields)
    world, procs = where.processes * job.instance_count, where.processes
    tp = int(job.smp.get("tensor_parallel_degree") or 1)
    hsd = int(job.smp.get("hybrid_shard_degree") or 0)
    if unknown:
        yield fail(
            f"unknown SMP setting(s) {sorted(unknown)}; SMP v2 takes {sorted(SMP.model_fields)}.", ProcessCountError
        )
    elif tp < 1 or hsd < 0:
        yield fail("tensor_parallel_degree must be >= 1 and hybrid_shard_degree >= 0.", ProcessCountError)
    elif world % tp:
        yield fail(
            f"tensor_parallel_degree={tp} must divide the {world} GPUs of the cluster ({job.instance_count} x "
            f"{procs} processes).",
            ProcessCountError,
        )
    elif hsd and (world // tp) % hsd:
        yield fail(
            f"hybrid_shard_degree={hsd} must divide the {world // tp} data-parallel ranks ({world} processes / "
            f"tensor_parallel_degree {tp}).",
            ProcessCountError,
        )
    elif procs % tp:  # SMP allows it; it is slow, not wrong
        yield note(
            f"tensor_parallel_degree={tp} does not divide the {procs} GPUs of one instance, so its groups span "
            f"instances: tensor parallel communicates inside every layer, and the network is much slower than "
            f"NVLink; a degree that divides {procs} keeps each group inside one instance"
        )


def multi_node_network(job: Job, where: Where) -> Iterator[Finding]:
    """Between instances NCCL's all-reduce crosses the network: over EFA where SageMaker's drivers enable it for
    NCCL (they set FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1 on p4d/p5/trn1, NCCL_PROTO=simple), over plain TCP
    elsewhere. What a multi-node job needs for EFA, and how its log shows it, as notes."""
    if job.instance_count < 2 or where.launcher not in ("torchrun", "smp") or where.instance is None:
        return
    instance = where.instance
    if not instance.efa:
        enabled = ", ".join(sorted(instances.SAGEMAKER_EFA_NCCL))
        yield note(
            f"{job.instance_count} x {instance.name}: SageMaker enables EFA for NCCL only on {enabled}; here the "
            f"gradients between instances go over TCP at up to {instance.network_gbps:g} Gb/s, which a multi-node "
            f"data-parallel job feels on every step"
        )
        return
    yield note(
        f"{job.instance_count} x {instance.name} talk over EFA ({instance.network_gbps:g} Gb/s): with "
        f"environment={{'NCCL_DEBUG': 'INFO'}} the log shows 'NET/OFI Selected Provider is efa' when NCCL uses it "
        f"('NET/Socket' means plain TCP)"
    )
    if job.fsx.get("security_group_ids"):
        yield note(
            "the job runs in your VPC: EFA needs its security group to allow all inbound and outbound traffic to and "
            "from itself, not only Lustre's ports 988 and 1018-1023"
        )


COMMON: tuple[Rule, ...] = (
    job_name,
    counts,
    entry_point,
    hyperparameter_names,
    hyperparameter_values,
    secrets,
    tags,
    stopping,
    processes_fit_the_gpus,
    precision_fits_the_device,
    channel_modes,
    channel_sources,
    channel_data,
)
# what only one kind of target needs, after COMMON (Target.kind: local, local_container or sagemaker)
ONLY: dict[str, tuple[Rule, ...]] = {
    "local": (no_hub_downloads, local_channel_modes),
    "local_container": (local_mode_limits,),
    "sagemaker": (instance_runs_the_script, launcher, smddp, smp, fsx, multi_node_network),
}


def rules_for(kind: str) -> tuple[Rule, ...]:
    """The rules a job meets on a target of ``kind``: :data:`COMMON`, then that kind's own."""
    return (*COMMON, *ONLY[kind])


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
