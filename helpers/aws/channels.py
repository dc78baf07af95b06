"""A job's channels as SageMaker will see them: each one's input mode and where its data comes from (uploaded from
this machine, an s3:// prefix, or a directory on an FSx for Lustre file system). The checks are rules of
:mod:`helpers.checks`; planning a job's channels assumes they passed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers import input_mode
from helpers.checks.target_rules import fsx_directory, linked_directory
from helpers.job_spec import Job


@dataclass
class ChannelPlan:
    name: str
    mode: str  # a name of helpers.input_mode.MODES
    kind: str  # "local" (uploaded at launch), "s3" or "fsx"
    source: str  # local directory, s3:// URI, or directory path on the file system
    linked: bool = False  # an FSx channel named by its data (s3:// or local): the directory follows from it

    files: int = 0
    bytes: int = 0

    @property
    def uploaded(self) -> bool:
        """A local directory, uploaded at launch (for FSx too: the file system shows the prefix it goes to)."""
        return self.kind == "local" or (self.linked and not self.source.startswith("s3://"))


def _dir_stats(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def plan_channels(job: Job) -> list[ChannelPlan]:
    """One :class:`ChannelPlan` per channel of a checked job, with a local directory's file count and bytes."""
    plans = []
    for name, source in job.channels.items():
        mode, text = job.mode_of(name), str(source)
        if not input_mode.reads_s3(mode) and job.fsx.get("mount_name") is not None:
            source = text if text.startswith("s3://") else str(Path(source).resolve())
            plans.append(ChannelPlan(name, mode, "fsx", source, linked=True))
        elif not input_mode.reads_s3(mode):
            plans.append(ChannelPlan(name, mode, "fsx", fsx_directory(job, text)))
        elif text.startswith("s3://"):
            plans.append(ChannelPlan(name, mode, "s3", text))
        else:
            files, size = _dir_stats(Path(source))
            plans.append(ChannelPlan(name, mode, "local", str(Path(source).resolve()), files=files, bytes=size))
    return plans


def fsx_directory_of(plan: ChannelPlan, uploaded: str, bucket: str, job: Job) -> str:
    """The directory an FSx channel mounts: as planned, or, for one named by its data, where the file system shows
    ``uploaded`` (its s3:// prefix; a local directory once uploaded, to the prefix the File and FastFile jobs use).
    The file system is linked to ``Job.fsx['import_path']``, by default the workshop bucket's root (as
    infra/workshop-account.yaml links it)."""
    if not plan.linked:
        return plan.source
    return linked_directory(uploaded, job.fsx.get("import_path") or f"s3://{bucket}", job.fsx["mount_name"])
