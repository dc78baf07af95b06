"""A job's channels as SageMaker will see them: each one's input mode and where its data comes from (uploaded from
this machine, an s3:// prefix, or a directory on an FSx for Lustre file system). The checks are rules of
:mod:`helpers.checks`; planning a job's channels assumes they passed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from helpers import input_mode
from helpers.checks.target_rules import fsx_directory
from helpers.job import Job


@dataclass
class ChannelPlan:
    name: str
    mode: str  # a name of helpers.input_mode.MODES
    kind: str  # "local" (uploaded at launch), "s3" or "fsx"
    source: str  # local directory, s3:// URI, or directory path on the file system
    files: int = 0
    bytes: int = 0


def _dir_stats(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


def plan_channels(job: Job) -> list[ChannelPlan]:
    """One :class:`ChannelPlan` per channel of a checked job, with a local directory's file count and bytes."""
    plans = []
    for name, source in job.channels.items():
        mode, text = job.mode_of(name), str(source)
        if not input_mode.reads_s3(mode):
            plans.append(ChannelPlan(name, mode, "fsx", fsx_directory(job, text)))
        elif text.startswith("s3://"):
            plans.append(ChannelPlan(name, mode, "s3", text))
        else:
            files, size = _dir_stats(Path(source))
            plans.append(ChannelPlan(name, mode, "local", str(Path(source).resolve()), files, size))
    return plans
