"""A job's channels as SageMaker will see them: each one's input mode and where its data comes from (uploaded from
this machine, an s3:// prefix, or a directory on an FSx for Lustre file system), checked before anything is built.
Both the SageMaker launcher and the local runner's input modes plan channels this way."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from helpers.data import catalog
from helpers.errors import PreflightError
from helpers.job import Job

INPUT_MODES = ("File", "FastFile", "FSx")


class FSxConfigError(PreflightError):
    """An FSx for Lustre channel without what the service needs to mount it."""


class ChannelError(PreflightError):
    """A channel that is missing, empty, or in a mode that does not exist."""


@dataclass
class ChannelPlan:
    name: str
    mode: str  # File | FastFile | FSx
    kind: str  # "local" (uploaded at launch), "s3" or "fsx"
    source: str  # local directory, s3:// URI, or directory path on the file system
    files: int = 0
    bytes: int = 0


def _dir_stats(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def _fsx_directory(job: Job, value: str) -> str:
    base = str(job.fsx.get("directory_path", "")).rstrip("/")
    value = str(value)
    return value if value.startswith("/") else f"{base}/{value}".replace("//", "/")


def plan_channels(job: Job) -> list[ChannelPlan]:
    plans = []
    for name, source in job.channels.items():
        mode = job.mode_of(name)
        if mode not in INPUT_MODES:
            hint = " Pipe mode is legacy: FastFile streams the same way with plain files." if mode == "Pipe" else ""
            raise ChannelError(f"channel {name!r}: input mode {mode!r} is not one of {', '.join(INPUT_MODES)}.{hint}")
        if name in ("code", "sm_drivers"):
            raise ChannelError(f"channel name {name!r} is reserved by the SDK for the source code; rename it.")
        text = str(source)
        if mode == "FSx":
            path = _fsx_directory(job, text)
            if not path.startswith("/") or path.strip("/") == "":
                raise FSxConfigError(
                    f"channel {name!r}: FSx directory {path!r} must be an absolute path that starts "
                    f"with the file system's mount name, e.g. '/abcdef12/catalog/train' (FSx "
                    f"console > file system > Attach shows the mount name)."
                )
            plans.append(ChannelPlan(name, mode, "fsx", path))
        elif text.startswith("s3://"):
            if not re.match(r"^s3://[a-z0-9][a-z0-9.\-]{1,61}[a-z0-9](/.*)?$", text):
                raise ChannelError(f"channel {name!r}: {text!r} is not a valid S3 URI (s3://bucket/prefix).")
            plans.append(ChannelPlan(name, mode, "s3", text))
        else:
            path = Path(source)
            if not path.is_dir():
                raise ChannelError(
                    f"channel {name!r}: {path} is not a directory. Build the data first "
                    f"(`python -m helpers.data.catalog build --out data/catalog`) or give an s3:// URI."
                )
            files, size = _dir_stats(path)
            if not files:
                raise ChannelError(f"channel {name!r}: {path} is empty; nothing to train on.")
            plans.append(ChannelPlan(name, mode, "local", str(path.resolve()), files, size))
    try:
        # a malformed data file fails here, not after upload and start-up
        catalog.check_channels({c.name: c.source for c in plans if c.kind == "local"})
    except catalog.CatalogError as e:
        raise ChannelError(str(e)) from None
    return plans


def check_fsx(job: Job, fsx_channels: list[ChannelPlan]) -> None:
    missing = [k for k in ("file_system_id", "subnets", "security_group_ids") if not job.fsx.get(k)]
    if not fsx_channels:
        raise FSxConfigError("Job.fsx is set but no channel uses it: set channel_modes={'train': 'FSx'}.")
    if "file_system_id" in missing:
        raise FSxConfigError("FSx channel without Job.fsx['file_system_id'] (fs-0123456789abcdef0).")
    if missing:
        raise FSxConfigError(
            f"FSx for Lustre is reached through your VPC: Job.fsx needs {' and '.join(missing)} (the subnet(s) of "
            f"the file system and a security group that allows Lustre traffic, TCP ports 988 and 1018-1023, from "
            f"itself; with several instances, all traffic from itself, for NCCL between them). The job then runs in "
            f"that VPC: it needs an S3 VPC endpoint or NAT for everything it reads from or writes to S3, its code "
            f"channels included (the source, and the SDK's drivers channel sm_drivers), and NAT to install "
            f"requirements.txt."
        )
    if not str(job.fsx["file_system_id"]).startswith("fs-"):
        raise FSxConfigError(f"file_system_id {job.fsx['file_system_id']!r} should look like 'fs-0123456789abcdef0'.")
    for c in fsx_channels:
        if c.mode != "FSx":
            raise FSxConfigError(f"channel {c.name!r}: FSx channels use input mode 'FSx'.")
    access = job.fsx.get("access_mode", "ro")
    if access not in ("ro", "rw"):
        raise FSxConfigError(f"Job.fsx['access_mode'] must be 'ro' or 'rw', not {access!r}.")
