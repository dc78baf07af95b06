"""A job's hyperparameters checked against the options its entry script declares, before anything is launched.

The training scripts keep going past options they do not know (SageMaker adds its own), and argparse only rejects a
bad value once the job has started: a misspelt switch would cost a whole run without taking effect, a bad value a
launch. The options are read from the script's source (it is not run: no torch import, no container needed).
"""
from __future__ import annotations

import ast
import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from helpers.local.contract import deserialize, serialize

# what labs/src/train.py's str2bool accepts (tests/test_train_script.py holds the two together)
TRUE, FALSE = ("true", "1", "yes", "y", "on"), ("false", "0", "no", "n", "off", "none", "")
_CONVERT = {"int": int, "float": float}
_BOOLEAN_TYPES = ("str2bool", "boolean")  # train.py's converter, and its name inside profiling.add_arguments
# Other frameworks' names for the scripts' options (Hugging Face Trainer's TrainingArguments, Keras' fit, common
# script conventions), each with the script names it may mean, first match wins. Spelling is too far off for difflib
# ("learning_rate" is not close to "lr"), but the meaning is common: these are looked up first.
SYNONYMS: dict[str, tuple[str, ...]] = {
    "learning_rate": ("lr",), "learningrate": ("lr",), "base_lr": ("lr",), "max_lr": ("lr",),
    "num_train_epochs": ("epochs",), "num_epochs": ("epochs",), "n_epochs": ("epochs",), "epoch": ("epochs",),
    "nb_epoch": ("epochs",), "train_epochs": ("epochs",),
    "per_device_train_batch_size": ("batch_size",), "per_gpu_train_batch_size": ("batch_size",),
    "train_batch_size": ("batch_size",), "batch": ("batch_size",), "bs": ("batch_size",),
    "batchsize": ("batch_size",), "global_batch_size": ("batch_size",),
    "max_seq_length": ("max_length", "block_size"), "max_seq_len": ("max_length", "block_size"),
    "seq_len": ("max_length", "block_size"), "max_len": ("max_length", "block_size"),
    "model_max_length": ("max_length", "block_size"), "sequence_length": ("max_length", "block_size"),
    "max_train_steps": ("max_steps",), "num_train_steps": ("max_steps",), "total_steps": ("max_steps",),
    "logging_steps": ("log_every",), "log_interval": ("log_every",), "log_steps": ("log_every",),
    "save_steps": ("checkpoint_every",), "save_total_limit": ("checkpoint_keep",),
    "dataloader_num_workers": ("num_workers",), "workers": ("num_workers",),
    "dataloader_pin_memory": ("pin_memory",), "torch_compile": ("compile",),
    "gradient_checkpointing": ("activation_checkpointing",), "wd": ("weight_decay",),
    "fp16": ("precision",), "bf16": ("precision",), "mixed_precision": ("precision",), "dtype": ("precision",),
    "warmup_steps": ("warmup_ratio",), "warmup": ("warmup_ratio",), "random_seed": ("seed",),
    "model_name_or_path": ("pretrained",), "model_name": ("pretrained",),
    "dist_backend": ("backend",), "ddp_backend": ("backend",),
}


@dataclass(frozen=True)
class Option:
    type: str | None = None  # "int", "float", "bool", or None: any string
    choices: tuple[str, ...] | None = None


def options(entry: Path) -> dict[str, Option] | None:
    """The ``--options`` an entry script's parser declares, with those a sibling module adds through its
    ``add_arguments(parser)`` (as ``profiling`` does for ``train.py``); None if it declares none (a script without
    argparse: nothing to check against)."""
    entry = Path(entry)
    if entry.suffix != ".py" or not entry.is_file():  # a shell entry point, or none: nothing to read
        return None
    tree = ast.parse(entry.read_text(), str(entry))
    found: dict[str, Option] = {}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr == "add_argument":
            names = [a.value[2:] for a in node.args if isinstance(a, ast.Constant) and str(a.value).startswith("--")]
            found.update(dict.fromkeys(names, _option(node, tree, entry.parent)))
        elif node.func.attr == "add_arguments" and isinstance(node.func.value, ast.Name):
            module = entry.parent / f"{node.func.value.id}.py"
            found.update(options(module) or {} if module.is_file() else {})
    return found or None


def _option(call: ast.Call, tree: ast.Module, source_dir: Path) -> Option:
    keywords = {k.arg: k.value for k in call.keywords}
    kind = getattr(keywords.get("type"), "id", None)
    kind = "bool" if kind in _BOOLEAN_TYPES else kind if kind in _CONVERT else None
    choices = _literal(keywords["choices"], tree, source_dir) if "choices" in keywords else None
    return Option(kind, tuple(str(c) for c in choices) if choices is not None else None)


def _literal(node: ast.AST, tree: ast.Module, source_dir: Path):
    """A ``choices=`` value: a literal, ``sorted(NAME)``, or a module-level literal ``NAME`` / ``module.NAME`` of the
    source_dir (a dict gives its keys); None where it is anything else (then the value is not checked)."""
    if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "sorted" and len(node.args) == 1:
        return _literal(node.args[0], tree, source_dir)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        module = source_dir / f"{node.value.id}.py"
        if not module.is_file():
            return None
        tree, node = ast.parse(module.read_text()), ast.Name(node.attr)
    if isinstance(node, ast.Name):
        assigned = [a.value for a in tree.body if isinstance(a, ast.Assign)
                    and any(getattr(t, "id", None) == node.id for t in a.targets)]
        return _literal(assigned[-1], tree, source_dir) if assigned else None
    try:
        value = ast.literal_eval(node)
    except ValueError:
        return None
    return list(value) if isinstance(value, (list, tuple, dict, set)) else None


def _bad_value(value: Any, option: Option) -> str | None:
    text = serialize(deserialize(value))  # exactly the string the script receives
    if option.choices is not None and text not in option.choices:
        return f"one of {', '.join(option.choices)}"
    if option.type == "bool" and text.lower() not in TRUE + FALSE:
        return "true or false"
    if option.type in _CONVERT:
        try:
            _CONVERT[option.type](text)
        except ValueError:
            return f"a{'n' if option.type == 'int' else ''} {option.type}"
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


def check(job) -> str | None:
    """What is wrong with ``job``'s hyperparameters for its entry script (unknown names, with the closest known one;
    values the script would refuse), or None."""
    known = options(Path(job.source_dir) / job.entry_point)
    if not known:
        return None
    problems = []
    for name, value in job.hyperparameters.items():
        if name not in known:
            close = suggest(str(name), known)
            problems.append(f"no option {name!r}" + (f" (did you mean {close!r}?)" if close else "") +
                            ": it would be ignored")
        elif want := _bad_value(value, known[name]):
            problems.append(f"{name}={value!r} is not {want}")
    if not problems:
        return None
    return (f"{job.entry_point}: {'; '.join(problems)}. Fix the hyperparameters, or see "
            f"`python {job.entry_point} --help` in {job.source_dir}.")
