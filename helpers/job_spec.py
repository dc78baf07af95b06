"""A lab's training job, described once: what it runs, on what data, with which settings (:class:`Job`), and how
its log's metric lines read. ``helpers.jobs.run_job`` launches it on any target."""

from __future__ import annotations

import functools
import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SOURCE_DIR = REPO / "labs" / "src"
DATA_DIR = REPO / "data"
RUNS_DIR = REPO / "runs"
_runs_root: Path | None = None  # set by write_runs_under: a lab's own output folder

# what the training script prints, as SageMaker metric definitions (one regex per figure)
METRIC_NAMES = ("train_loss", "val_loss", "val_accuracy", "val_macro_f1", "samples_per_sec", "mfu")
METRIC_DEFINITIONS = [{"Name": name, "Regex": rf"\b{name}=([-+0-9.eE]+|nan|inf)"} for name in METRIC_NAMES]
# SageMaker's TrainingJobName is ^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}: the helpers turn "_" into "-" and add the attendee
# prefix (up to 16 characters) and a timestamp, which leaves 30 for the lab's own name
_JOB_NAME = re.compile(r"[a-zA-Z0-9]([-_]*[a-zA-Z0-9])*")
JOB_NAME_MAX = 30
_METRIC_LINE = re.compile(r"^\[(?P<kind>[a-z_]+)\] (?P<body>(?:\w+=\S+ ?)+)$")


def runs_root() -> Path:
    """Where this process's local jobs, drills and container runs write their folders: ``runs/``, or the folder a
    lab chose with :func:`write_runs_under`."""
    return _runs_root or RUNS_DIR


def write_runs_under(folder: str | Path | None) -> Path:
    """From now on this process's local runs write under ``folder`` (``""`` or None: ``runs/``), so that a lab run
    headless keeps all it writes in its own output folder. Returns the folder."""
    global _runs_root
    _runs_root = Path(folder).resolve() if folder else None
    return runs_root()


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


@dataclass(frozen=True)
class Job:
    """Everything a training job needs, in one place: the same object drives local and SageMaker launches. Checked
    once, when made (its name and tags as SageMaker will take them); change one with ``dataclasses.replace``."""

    name: str  # short, lower-case: "lab01-single-gpu"
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    channels: dict[str, str | Path] = field(default_factory=dict)  # channel -> local directory or s3:// URI
    input_mode: str = "File"  # a name of helpers.input_mode.MODES (per channel overrides in channel_modes)
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
    # several instances: encrypt what they send each other (IPsec); no charge of its own, slower collectives
    encrypt_traffic: bool = False
    tags: dict[str, str] = field(default_factory=dict)
    # SageMaker's job-level answers to a failure (lab 08): relaunch on an InternalServerError up to this many times
    # (RetryStrategy), check the instances' hardware and network before the script starts (InfraCheckConfig), and
    # keep the instances warm this many seconds after the job for the next one (ResourceConfig's
    # KeepAlivePeriodInSeconds). None/False: the request leaves them out.
    retry_attempts: int | None = None
    infra_check: bool = False
    warm_pool_s: int | None = None

    def __post_init__(self):
        # the name becomes a directory and a SageMaker job name: no path separators, no spaces
        if problem := name_problem(self.name):
            raise ValueError(problem)
        for name in (
            "instance_count",
            "max_runtime_s",
            "processes_per_host",
            "max_wait_s",
            "retry_attempts",
            "warm_pool_s",
        ):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool)) and value is not None:
                raise TypeError(f"Job.{name} must be a whole number, got {value!r}.")
        if self.instance_count is None or self.max_runtime_s is None:
            raise TypeError("Job.instance_count and Job.max_runtime_s must be whole numbers, not None.")
        if problem := tag_problem(self.tags):
            raise ValueError(f"Job.tags: {problem}")

    def mode_of(self, channel: str) -> str:
        return self.channel_modes.get(channel, self.input_mode)


def name_problem(name) -> str | None:
    """What SageMaker would refuse in a lab job's name, with what to do; None if nothing."""
    if not isinstance(name, str) or not _JOB_NAME.fullmatch(name) or len(name) > JOB_NAME_MAX:
        return (
            f"job name {name!r}: use letters, digits, '-' and '_', starting and ending with a letter or digit, at "
            f"most {JOB_NAME_MAX} characters (e.g. 'lab01-single'; the attendee prefix and a timestamp are added "
            f"to make the SageMaker job name)."
        )
    return None


@functools.lru_cache(maxsize=1)
def _tag_rules() -> tuple[dict[str, tuple[int, int, str]], int]:
    """``{"Key": (min, max, pattern), "Value": ...}`` and the list's ``max``: the SageMaker API's own rules for a
    tag, read from botocore's service model (no session: no AWS configuration is read)."""
    import botocore.loaders
    import botocore.model

    model = botocore.model.ServiceModel(botocore.loaders.create_loader().load_service_model("sagemaker", "service-2"))
    tag = model.shape_for("Tag")
    rules = {
        part: (shape.metadata.get("min", 0), shape.metadata["max"], shape.metadata.get("pattern", ""))
        for part, shape in tag.members.items()
    }
    return rules, model.shape_for("TagList").metadata["max"]


def _pattern_class(pattern: str) -> tuple[set[str], set[str]] | None:
    r"""A pattern of the form ``^?([...]*)$?`` as (Unicode category prefixes from ``\p{..}``, literal characters);
    None for any other form. Python's ``re`` has no ``\p{L}``: the characters are checked with ``unicodedata``."""
    m = re.fullmatch(r"\^?\(?\[(?P<body>[^\]]*)\]\*\)?\$?", pattern)
    if not m:
        return None
    body = m["body"]
    categories = set(re.findall(r"\\p\{(\w+)\}", body))
    rest = re.sub(r"\\p\{\w+\}", "", body)
    literals = set(re.sub(r"\\(.)", r"\1", rest))
    return categories, literals


def _allowed(char: str, rule: tuple[set[str], set[str]]) -> bool:
    categories, literals = rule
    return char in literals or any(unicodedata.category(char).startswith(c) for c in categories)


def tag_problem(tags) -> str | None:
    """What SageMaker would refuse in ``tags`` (a dict of key -> value), with what to do; None if nothing.

    The lengths and characters are the API's (``Tag.Key``/``Tag.Value`` in botocore's model); keys may not start
    with ``aws:`` in any case, a prefix AWS reserves for its own tags."""
    if not tags:
        return None
    if not isinstance(tags, dict):
        return f"give a dict of key -> value, e.g. {{'team': 'ml'}}, not {type(tags).__name__}."
    rules, most_tags = _tag_rules()
    if len(tags) > most_tags:
        return f"{len(tags)} tags, but a training job takes at most {most_tags}."
    for key, value in tags.items():
        for part, text in (("Key", key), ("Value", value)):
            shown = repr(text) if len(repr(text)) <= 40 else repr(text)[:37] + "..."
            what = f"key {shown}" if part == "Key" else f"the value of {key!r} ({shown})"
            if not isinstance(text, str):
                return f"{what} is not text: tag keys and values are strings (e.g. {str(text)!r})."
            low, high, pattern = rules[part]
            if not low <= len(text) <= high:
                return (
                    f"{what} has {len(text)} characters; SageMaker takes {low} to {high} for a tag "
                    f"{part.lower()}: {'shorten it' if len(text) > high else 'give it a name'}."
                )
            rule = _pattern_class(pattern)
            bad = sorted({c for c in text if not _allowed(c, rule)}) if rule else []
            if rule and bad:
                return (
                    f"{what} contains {', '.join(repr(c) for c in bad)}, which SageMaker does not accept in a "
                    f"tag (pattern {pattern}): use letters, digits, spaces and {' '.join(sorted(rule[1]))} "
                    f"only, e.g. {''.join(c if _allowed(c, rule) else '-' for c in text)!r}."
                )
        if key.lower().startswith("aws:"):
            return (
                f"key {key!r} starts with 'aws:', a prefix AWS reserves for its own tags (in any case): "
                f"drop it, e.g. {key[4:] or 'owner'!r}."
            )
    return None


def catalog_channels(catalog: str | Path = DATA_DIR / "catalog") -> dict[str, Path]:
    """The train and validation channels of a catalogue directory built by ``catalog_generator.catalog``."""
    root = Path(catalog)
    return {"train": root / "train", "validation": root / "validation"}
