"""What one kind of target needs besides the common rules: this machine (``local``), the SDK's Docker local mode
(``local_container``) or an instance type (``sagemaker``): the rules, and their table :data:`ONLY` at the end."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from helpers import guardrails, input_mode
from helpers.checks.findings import (
    ChannelError,
    Finding,
    FSxConfigError,
    ProcessCountError,
    Rule,
    UnsupportedFeature,
    Where,
    fail,
    note,
)
from helpers.job_spec import Job
from helpers.planning import instances

LAUNCHERS = ("auto", "torchrun", "smddp", "smp")


# ---------------------------------------------------------------------------------------------- the channels
def local_channel_modes(job: Job, where: Where) -> Iterator[Finding]:
    """Locally, every mode but the default comes from the loopback object store (lab 05); a directory is copied."""
    for name, source in job.channels.items():
        mode = job.mode_of(name)
        if mode != input_mode.DEFAULT and not str(source).startswith("s3://"):
            yield fail(
                f"channel {name!r}: input mode {mode!r} needs an s3:// channel on the local object store "
                f"(sagemaker_standin.objectstore, lab 05); a local directory is presented in 'File' mode.",
                ChannelError,
            )


MOUNT_NAME = re.compile(r"^[a-z0-9]{3,8}$")  # LustreConfiguration.MountName: 'fsx' for SCRATCH_1


def fsx(job: Job, where: Where) -> Iterator[Finding]:
    """What the service needs to mount an FSx for Lustre file system, and what a job in a VPC needs besides."""
    fsx_channels = [n for n in job.channels if not input_mode.reads_s3(job.mode_of(n))]
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
    elif job.fsx.get("mount_name") is not None:
        yield from _linked(job, fsx_channels)
        yield from _in_a_vpc(job, where)
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


def _linked(job: Job, fsx_channels: list[str]) -> Iterator[Finding]:
    """A file system linked to S3 (``Job.fsx['mount_name']`` set): each channel names its data as the File and
    FastFile jobs do (an s3:// prefix, or a local directory uploaded at launch), and the job mounts where the file
    system shows it."""
    mount, link = str(job.fsx["mount_name"]), str(job.fsx.get("import_path", ""))
    if not MOUNT_NAME.match(mount):
        yield fail(
            f"FSx mount name {mount!r} does not look like one (3-8 lower-case letters and digits, e.g. 'abcdef12'; "
            f"'fsx' for SCRATCH_1): copy it from the FSx console (file system > Attach) or `aws fsx "
            f"describe-file-systems` (LustreConfiguration.MountName).",
            FSxConfigError,
        )
    if link and not link.startswith("s3://"):
        yield fail(
            f"Job.fsx['import_path'] {link!r} must be the S3 location the file system is linked to (its ImportPath, "
            f"e.g. 's3://my-bucket'), or '' for the workshop bucket.",
            FSxConfigError,
        )
    for name in fsx_channels:
        value = str(job.channels[name])
        if value.startswith("s3://"):
            if link.startswith("s3://") and not _under(value, link):
                yield fail(
                    f"channel {name!r}: {value} is not under {link}, the S3 location the file system is linked to: "
                    f"it would never show there. Put the data under {link}, or link the file system to it.",
                    FSxConfigError,
                )
        elif not Path(value).is_dir():
            yield fail(
                f"channel {name!r}: {value!r} is neither an s3:// prefix nor a local directory (with "
                f"Job.fsx['mount_name'] set, FSx channels name their data as File and FastFile do; the directory "
                f"on the file system follows from it).",
                FSxConfigError,
            )


def _under(uri: str, link: str) -> bool:
    return (uri.rstrip("/") + "/").startswith(link.rstrip("/") + "/")


def linked_directory(s3_uri: str, import_path: str, mount_name: str) -> str:
    """Where a file system linked to ``import_path`` (its ImportPath, or a data repository association's S3 path)
    shows the objects under ``s3_uri``: ``/<mount_name>/<their key below the link>``. The File and FastFile jobs read
    that prefix itself, so all three read the same bytes."""
    if not _under(s3_uri, import_path):
        raise FSxConfigError(
            f"{s3_uri} is not under {import_path}, the S3 location the file system is linked to: it would never "
            f"show there. Put the data under {import_path}, or link the file system to it."
        )
    below = (s3_uri.rstrip("/") + "/")[len(import_path.rstrip("/") + "/") :].strip("/")
    return "/" + "/".join(part for part in (mount_name, below) if part)


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
            f"gradients between instances go over TCP sockets ('NET/Socket' in NCCL's log), not EFA: the "
            f"{instance.network_gbps:g} Gb/s listed for the type is its network's peak (its EFA hardware's, where EC2 "
            f"lists EFA on it), of which TCP sockets reach only a part, and a multi-node data-parallel job feels that "
            f"on every step"
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


def event_guardrails(job: Job, where: Where) -> Iterator[Finding]:
    """In an event account (its settings set WORKSHOP_GUARDRAILS) IAM lets an attendee launch only the guardrails'
    instance types and runtime. A dry run outside them is still every lab's to show (labs 03 and 04 build p4d
    requests), so it is noted here; the launch itself is refused, naming the limit, before AWS's AccessDenied
    (:func:`launch_guardrail`)."""
    if problem := launch_guardrail(job, where.target.name):
        yield note(f"in this event account a launch would be refused: {problem}")


def launch_guardrail(job: Job, instance_type: str) -> str | None:
    """The event account's guardrail a launch of ``job`` on ``instance_type`` would break, if the account has any."""
    if not os.environ.get(guardrails.GUARDRAILS_ENV):
        return None
    return guardrails.refusal(instance_type, job.max_runtime_s, job.warm_pool_s)


def relaunch_settings(job: Job, where: Where) -> Iterator[Finding]:
    """RetryStrategy's MaximumRetryAttempts and a warm pool's KeepAlivePeriodInSeconds within the API's own range
    (botocore's service model), refused before any request is built."""
    for name, value, shape, member in (
        ("retry_attempts", job.retry_attempts, "RetryStrategy", "MaximumRetryAttempts"),
        ("warm_pool_s", job.warm_pool_s, "ResourceConfig", "KeepAlivePeriodInSeconds"),
    ):
        low, high = api_range(shape, member)
        if value is not None and not low <= value <= high:
            yield fail(
                f"{name}={value}: SageMaker's {shape}.{member} takes {low} to {high}; pick a value in that range."
            )


def api_range(shape: str, member: str) -> tuple[int, int]:
    """(min, max) of a number in the SageMaker API, read from botocore's service model (no AWS configuration read)."""
    import botocore.loaders

    model = botocore.loaders.create_loader().load_service_model("sagemaker", "service-2")
    target = model["shapes"][model["shapes"][shape]["members"][member]["shape"]]
    return target.get("min", 0), target["max"]


# what only one kind of target needs, after helpers.checks.common_rules.COMMON (Target.kind is the key)
ONLY: dict[str, tuple[Rule, ...]] = {
    "local": (no_hub_downloads, local_channel_modes),
    "local_container": (local_mode_limits,),
    "sagemaker": (
        instance_runs_the_script,
        launcher,
        smddp,
        smp,
        fsx,
        multi_node_network,
        event_guardrails,
        relaunch_settings,
    ),
}
