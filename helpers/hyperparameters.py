"""A job's hyperparameters checked against the options its entry script declares, before anything is launched.

The scripts skip options they do not know (SageMaker adds its own) and argparse refuses a bad value only once the job
runs, so a typo would cost a run. ``labs/src/options.py --schema`` (standard library only) prints every script's
options as JSON; this runs it once per source directory and refuses an unknown option or a value out of range. A
script ``options.py``'s ``SCRIPTS`` does not list is not checked.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers.contract import deserialize, serialize
from helpers.errors import WorkshopError

OPTIONS_MODULE = "options.py"  # in the source directory, beside the entry scripts it describes
_CONVERT = {"int": int, "float": float}
# Other frameworks' names for the scripts' options (Hugging Face Trainer's TrainingArguments, Keras' fit, common
# script conventions), each with the script names it may mean, first match wins. Spelling is too far off for difflib
# ("learning_rate" is not close to "lr"), but the meaning is common: these are looked up first.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "learning_rate": ("lr",),
    "learningrate": ("lr",),
    "base_lr": ("lr",),
    "max_lr": ("lr",),
    "num_train_epochs": ("epochs",),
    "num_epochs": ("epochs",),
    "n_epochs": ("epochs",),
    "epoch": ("epochs",),
    "nb_epoch": ("epochs",),
    "train_epochs": ("epochs",),
    "per_device_train_batch_size": ("batch_size",),
    "per_gpu_train_batch_size": ("batch_size",),
    "train_batch_size": ("batch_size",),
    "batch": ("batch_size",),
    "bs": ("batch_size",),
    "batchsize": ("batch_size",),
    "global_batch_size": ("batch_size",),
    "max_seq_length": ("max_length", "block_size"),
    "max_seq_len": ("max_length", "block_size"),
    "seq_len": ("max_length", "block_size"),
    "max_len": ("max_length", "block_size"),
    "model_max_length": ("max_length", "block_size"),
    "sequence_length": ("max_length", "block_size"),
    "max_train_steps": ("max_steps",),
    "num_train_steps": ("max_steps",),
    "total_steps": ("max_steps",),
    "logging_steps": ("log_every",),
    "log_interval": ("log_every",),
    "log_steps": ("log_every",),
    "save_steps": ("checkpoint_every",),
    "save_total_limit": ("checkpoint_keep",),
    "dataloader_num_workers": ("num_workers",),
    "workers": ("num_workers",),
    "dataloader_pin_memory": ("pin_memory",),
    "torch_compile": ("compile",),
    "gradient_checkpointing": ("activation_checkpointing",),
    "wd": ("weight_decay",),
    "fp16": ("precision",),
    "bf16": ("precision",),
    "mixed_precision": ("precision",),
    "dtype": ("precision",),
    "warmup_steps": ("warmup_ratio",),
    "warmup": ("warmup_ratio",),
    "random_seed": ("seed",),
    "model_name_or_path": ("pretrained",),
    "model_name": ("pretrained",),
    "dist_backend": ("backend",),
    "ddp_backend": ("backend",),
}


class SchemaError(WorkshopError, RuntimeError):
    """The source directory's options.py exists but did not describe its scripts (the message says why)."""


@dataclass(frozen=True)
class Range:
    """The values a numeric option can train with, as options.py publishes them (its ``Range.published``)."""

    min: float | None = None
    max: float | None = None
    min_exclusive: bool = False
    max_exclusive: bool = False
    finite: bool = False
    text: str = ""  # in words, as the script's own refusal says it: "a finite float > 0"

    def allows(self, value: float) -> bool:
        if self.finite and not math.isfinite(value):
            return False
        low = self.min is None or (value > self.min if self.min_exclusive else value >= self.min)
        return low and (self.max is None or (value < self.max if self.max_exclusive else value <= self.max))


@dataclass(frozen=True)
class Option:
    type: str | None = None  # "int", "float", "bool", "str" (or None: not known, any string)
    choices: tuple[str, ...] | None = None
    default: Any = field(default=None, compare=False)  # as the script's parser declares it
    range: Range | None = None  # None: any value of its type


_SCHEMAS: dict[tuple, dict | None] = {}


def schema(source_dir: str | Path) -> dict | None:
    """What ``python options.py --schema`` prints in ``source_dir`` (see ``labs/src/options.py``): ``booleans``
    (``true``/``false`` spellings) and, per entry script, its ``options`` and ``model_sizes``. None where the
    directory has no options module. Run once per source directory, and again only when options.py changes."""
    path = Path(source_dir) / OPTIONS_MODULE
    if not path.is_file():
        return None  # no options module: nothing published
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size)
    if key not in _SCHEMAS:  # a module that has no --schema (someone else's options.py) publishes nothing
        published = "--schema" in path.read_text(encoding="utf-8", errors="replace")
        _SCHEMAS[key] = _run_schema(path) if published else None
    return _SCHEMAS[key]


def _run_schema(path: Path) -> dict:
    # the container's defaults, not this machine's: no SM_* variable leaks into the defaults it reports.
    # -E: no PYTHONPATH (the module imports only its siblings); -B: no __pycache__ written into the source dir
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    try:
        done = subprocess.run(
            [sys.executable, "-B", "-E", path.name, "--schema"],
            cwd=path.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    except subprocess.TimeoutExpired:
        raise SchemaError(f"{path}: `python {path.name} --schema` took over 60 s") from None
    try:
        published = json.loads(done.stdout) if done.returncode == 0 else None
    except json.JSONDecodeError:
        published = None
    if not isinstance(published, dict) or "scripts" not in published:
        raise SchemaError(
            f"{path}: `python {path.name} --schema` gave no options (exit code {done.returncode}): "
            f"{(done.stderr or done.stdout).strip()[-500:]}"
        )
    return published


def _published(entry: Path) -> tuple[dict, dict] | None:
    """(the entry script's part of its source directory's schema, the whole schema), or None."""
    entry = Path(entry)
    if entry.suffix != ".py" or not entry.is_file():  # a shell entry point, or none: nothing to read
        return None
    published = schema(entry.parent)
    if published is None:
        return None
    script = published.get("scripts", {}).get(entry.name)
    return (script, published) if script else None


def options(entry: Path) -> dict[str, Option] | None:
    """The ``--options`` an entry script declares, as its source directory's options module publishes them; None
    where it publishes nothing for this script (a user's own script, a shell script: nothing to check against)."""
    published = _published(entry)
    if published is None:
        return None
    return {
        name: Option(
            o["type"],
            tuple(o["choices"]) if o["choices"] is not None else None,
            o.get("default"),
            Range(**o["range"]) if o.get("range") else None,  # an options.py of before ranges publishes none
        )
        for name, o in published[0]["options"].items()
    } or None


def model_sizes(entry: Path) -> dict[str, tuple[int, ...]] | None:
    """The ``--model_size`` table an entry script builds its model from (name: numbers, as the script's own table
    orders them), or None where it publishes none."""
    published = _published(entry)
    sizes = published[0].get("model_sizes") if published else None
    return {name: tuple(numbers) for name, numbers in sizes.items()} if sizes else None


def booleans(entry: Path) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the spellings an entry script reads as true, those it reads as false), or None where it publishes none."""
    published = _published(entry)
    if published is None:
        return None
    return tuple(published[1]["booleans"]["true"]), tuple(published[1]["booleans"]["false"])


def _bad_value(value: Any, option: Option, spellings: tuple[tuple[str, ...], ...]) -> str | None:
    text = serialize(deserialize(value))  # exactly the string the script receives
    if option.choices is not None and text not in option.choices:
        return f"one of {', '.join(option.choices)}"
    if option.type == "bool" and text.lower() not in spellings[0] + spellings[1]:
        return "true or false"
    if option.type in _CONVERT:
        try:
            number = _CONVERT[option.type](text)
        except ValueError:
            return f"a{'n' if option.type == 'int' else ''} {option.type}"
        if option.range and not option.range.allows(number):
            return option.range.text
    return None


def suggest(name: str, known) -> str | None:
    """The option a name that the script does not declare most likely means: a common synonym first (another
    framework's name for it), then the closest spelling (of the option, or of a synonym); None if nothing is near."""
    key = name.strip().lower().replace("-", "_")
    if key in SYNONYMS:  # the meaning is known: the script's name for it, or nothing (not a look-alike name)
        return next((c for c in SYNONYMS[key] if c in known), None)
    if key in known:  # "Batch_Size", "batch-size"
        return key
    close = difflib.get_close_matches(key, known, 1)
    if close:
        return close[0]
    for synonym in difflib.get_close_matches(key, SYNONYMS, 1, cutoff=0.85):  # "learnig_rate"
        for candidate in SYNONYMS[synonym]:
            if candidate in known:
                return candidate
    return None


def mismatch(job) -> str | None:
    """What is wrong with ``job``'s hyperparameters for its entry script (unknown names, with the closest known one;
    values the script would refuse), or None."""
    entry = Path(job.source_dir) / job.entry_point
    known = options(entry)
    if not known:
        return None
    spellings = booleans(entry)
    assert spellings is not None  # options() found the script's schema, and every schema publishes its booleans
    problems = []
    for name, value in job.hyperparameters.items():
        if name not in known:
            close = suggest(str(name), known)
            problems.append(
                f"no option {name!r}" + (f" (did you mean {close!r}?)" if close else "") + ": it would be ignored"
            )
        elif want := _bad_value(value, known[name], spellings):
            problems.append(f"{name}={value!r} is not {want}")
    if not problems:
        return None
    return (
        f"{job.entry_point}: {'; '.join(problems)}. Fix the hyperparameters, or see "
        f"`python {job.entry_point} --help` in {job.source_dir}."
    )
