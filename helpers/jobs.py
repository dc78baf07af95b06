"""A lab's training job, described once, launched on the local runner or on SageMaker.

The notebook builds a :class:`Job` and calls :func:`run_job` with its ``target`` parameter; nothing else in the
notebook changes between this laptop and an ``ml.p4d.24xlarge``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO / "labs" / "src"
DATA_DIR = REPO / "data"
RUNS_DIR = REPO / "runs"

# what the training script prints, as SageMaker metric definitions (one regex per figure)
METRIC_NAMES = ("train_loss", "val_loss", "val_accuracy", "val_macro_f1", "samples_per_sec", "mfu")
METRIC_DEFINITIONS = [{"Name": name, "Regex": rf"\b{name}=([-+0-9.eE]+|nan|inf)"} for name in METRIC_NAMES]
_JOB_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_METRIC_LINE = re.compile(r"^\[(?P<kind>[a-z_]+)\] (?P<body>(?:\w+=\S+ ?)+)$")


def parse_metric_line(line: str) -> dict[str, Any] | None:
    """``[eval] step=40 val_accuracy=0.81`` -> ``{"kind": "eval", "step": 40, "val_accuracy": 0.81}``."""
    m = _METRIC_LINE.match(line.strip())
    if not m:
        return None
    out: dict[str, Any] = {"kind": m["kind"]}
    for pair in m["body"].split():
        key, _, value = pair.partition("=")
        try:
            out[key] = int(value) if re.fullmatch(r"-?\d+", value) else float(value)
        except ValueError:
            out[key] = value
    return out


@dataclass
class Job:
    """Everything a training job needs, in one place: the same object drives local and SageMaker launches."""

    name: str  # short, lower-case: "lab01-single-gpu"
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    channels: dict[str, str | Path] = field(default_factory=dict)  # channel -> local directory or s3:// URI
    input_mode: str = "File"  # File | FastFile | FSx (per channel overrides in channel_modes)
    channel_modes: dict[str, str] = field(default_factory=dict)
    s3_endpoint: str | None = None  # local runs only: the loopback object store s3:// channels live on (lab 05)
    entry_point: str = "train.py"
    source_dir: Path = SOURCE_DIR
    processes_per_host: int | None = None  # None: one per GPU, one on a CPU
    instance_count: int = 1
    environment: dict[str, str] = field(default_factory=dict)
    # how the processes are launched: "auto" (torchrun when more than one process), "torchrun", "smddp"
    # (SMDDP AllReduce through the image's mpirun launcher) or "smp" (SageMaker model parallel v2 over torchrun)
    distribution: str = "auto"
    smp: dict[str, Any] = field(default_factory=dict)  # SMP v2 degrees: hybrid_shard_degree, tensor_parallel_degree
    spot: bool = False  # managed spot: needs checkpoints
    checkpoints: bool = False  # sync /opt/ml/checkpoints with a checkpoint location that outlives the job
    max_runtime_s: int = 2 * 3600
    max_wait_s: int | None = None  # spot only: runtime plus time waiting for capacity
    fsx: dict[str, Any] = field(default_factory=dict)  # file_system_id, directory_path, subnets, security_group_ids
    image_uri: str | None = None  # None: the helpers pick the framework image for the distribution
    tags: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        # the name becomes a directory and a SageMaker job name: no path separators, no spaces
        if not isinstance(self.name, str) or not _JOB_NAME.fullmatch(self.name):
            raise ValueError(f"job name {self.name!r}: use letters, digits, '-' and '_' (e.g. 'lab01-single').")
        for name in ("instance_count", "max_runtime_s", "processes_per_host", "max_wait_s"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool)) and value is not None:
                raise TypeError(f"Job.{name} must be a whole number, got {value!r}.")
        if self.instance_count is None or self.max_runtime_s is None:
            raise TypeError("Job.instance_count and Job.max_runtime_s must be whole numbers, not None.")

    def mode_of(self, channel: str) -> str:
        return self.channel_modes.get(channel, self.input_mode)


def catalog_channels(catalog: str | Path = DATA_DIR / "catalog") -> dict[str, Path]:
    """The train and validation channels of a catalogue directory built by ``helpers.catalog``."""
    root = Path(catalog)
    return {"train": root / "train", "validation": root / "validation"}


def run_job(job: Job, target: str = "local", *, launch: bool = False, budget_usd: float | None = None, **options):
    """Run ``job`` on ``target``: ``local``/``local_cpu``/``local_gpu`` here, or a SageMaker instance type.

    ``launch`` and ``budget_usd`` guard real instances (a dry run by default); local runs are free and start at once.
    Other ``options`` go to the local runner or to the SageMaker launcher.
    """
    from . import targets

    if target == "local_container":  # the SDK's own Docker local mode: runs, or says precisely why it cannot
        from . import sagemaker_jobs

        return sagemaker_jobs.run_local_container(job, **options)
    t = targets.resolve(target)
    if t.is_local:
        from .local_runner import LocalRunner

        return LocalRunner(**options).run(job, t)
    from . import sagemaker_jobs

    return sagemaker_jobs.run(job, t, launch=launch, budget_usd=budget_usd, **options)
