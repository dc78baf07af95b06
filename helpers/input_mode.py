"""What an input mode is: SageMaker's ways of giving a job a channel's data, registered once (:data:`MODES`).

Every place that treats the modes differently reads this table: the checks (what a channel of each mode names), the
requests (:mod:`helpers.aws.build`: an S3 data source that names the mode, or a file system data source), the local
stand-ins (:data:`sagemaker_standin.s3_inputs.STAND_INS`, one per mode), lab 05's jobs, one per mode
(:func:`helpers.aws.mode_comparison.sagemaker_jobs_per_mode`), its exercise and every figure's colours. A new mode
starts here (docs/extending.md); tests/test_registries.py fails until each of those handles it.
"""

from __future__ import annotations

from dataclasses import dataclass

S3, FILE_SYSTEM = "s3", "file_system"  # what a channel names: an S3 prefix (or a directory uploaded to one), or a
# directory on an FSx for Lustre file system


@dataclass(frozen=True)
class InputMode:
    name: str  # as Job.input_mode and Job.channel_modes say it, and the console shows it
    source: str  # S3 or FILE_SYSTEM: what a channel of this mode names
    request_mode: str  # the InputMode the CreateTrainingJob request gives its channel (a file system is mounted: File)
    colour: str  # the mode's colour in every figure that compares modes
    job_sees: str  # one line: what the training script finds in /opt/ml/input/data/<channel>, and when

    @property
    def reads_s3(self) -> bool:
        return self.source == S3


MODES: dict[str, InputMode] = {
    mode.name: mode
    for mode in (
        InputMode(
            "File", S3, "File", "#4C72B0", "every object, copied to the instance's disk before the script starts"
        ),
        InputMode("FastFile", S3, "FastFile", "#DD8452", "every object at once, its bytes streamed from S3 as read"),
        InputMode("FSx", FILE_SYSTEM, "File", "#55A868", "a Lustre file system, loaded from S3 once, mounted"),
    )
}
DEFAULT = "File"  # what a channel gets when the job names no mode: SageMaker's default too
RETIRED = {"Pipe": "Pipe mode is legacy: FastFile streams the same way with plain files."}


def unknown(name: str) -> str | None:
    """What to tell a learner who named a mode that is not one of :data:`MODES` (None for one that is)."""
    if name in MODES:
        return None
    hint = f" {RETIRED[name]}" if name in RETIRED else ""
    return f"input mode {name!r} is not one of {', '.join(MODES)}.{hint}"


def of_channel(channel: dict) -> str:
    """The mode of one channel of a CreateTrainingJob request, or of DescribeTrainingJob's answer."""
    if "FileSystemDataSource" in channel.get("DataSource", {}):
        return next(mode.name for mode in MODES.values() if mode.source == FILE_SYSTEM)
    return channel.get("InputMode", DEFAULT)


def reads_s3(name: str) -> bool:
    """A channel in this mode names an S3 prefix or a local directory (an unknown mode counts as one: the checks
    refuse it by name first)."""
    return name not in MODES or MODES[name].reads_s3
