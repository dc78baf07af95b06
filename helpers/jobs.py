"""A lab's training job, described once, launched on the local runner or on SageMaker.

The notebook builds a :class:`Job` and calls :func:`run_job` with its ``target`` parameter; nothing else in the
notebook changes between this laptop and an ``ml.p4d.24xlarge``.
"""
from __future__ import annotations

import ast
import difflib
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

    def mode_of(self, channel: str) -> str:
        return self.channel_modes.get(channel, self.input_mode)


def script_options(entry: Path) -> set[str] | None:
    """The ``--options`` an entry script's argparse parser declares, read from its source (the script is not run: no
    torch import), with those a sibling module adds through its ``add_arguments(parser)``, as ``profiling`` does for
    ``train.py``; None if it declares none (a script without argparse: nothing to check against).
    """
    options, tree = set(), ast.parse(Path(entry).read_text(), str(entry))
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "add_argument":
            options |= {a.value[2:] for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")}
        elif node.func.attr == "add_arguments" and isinstance(node.func.value, ast.Name):
            module = Path(entry).parent / f"{node.func.value.id}.py"
            options |= script_options(module) or set() if module.is_file() else set()
    return options or None


def unknown_hyperparameters(job: Job) -> str | None:
    """Why ``job``'s hyperparameters would be silently ignored, or None: the script keeps going past an option it does
    not know (SageMaker adds its own), so a misspelt switch would cost a whole run without taking effect."""
    known = script_options(Path(job.source_dir) / job.entry_point)
    unknown = sorted(set(job.hyperparameters) - known) if known else []
    if not unknown:
        return None
    hints = [f"{name!r}" + (f" (did you mean {close[0]!r}?)" if (close := difflib.get_close_matches(name, known, 1))
                            else "") for name in unknown]
    return (f"{job.entry_point} has no option {', '.join(hints)}: it would ignore "
            f"{'it' if len(unknown) == 1 else 'them'}. Fix the name, or see `python {job.entry_point} --help` "
            f"in {job.source_dir}.")


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
