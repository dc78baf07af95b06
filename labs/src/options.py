"""The entry scripts' options in one place: each script's argument parser and model sizes, and the booleans they accept.

``train.py``, ``train_lm.py`` and ``read_channel.py`` build their parsers here. A number that cannot train (lr=inf,
epochs=0, batch_size=-4) carries its allowed range (:class:`Range`): the script's parse refuses it with the range, and
the schema publishes it. Standard library only (no torch), so the notebook side asks this module what a script
takes, in milliseconds and without the container's packages::

    python options.py --schema               # every script's options, model sizes and boolean spellings, as JSON
    python options.py --schema train.py      # one script's

``helpers/hyperparameters.py`` checks a job's hyperparameters against that schema before launch, and
``helpers/planning/memory.py`` sizes ``train_lm.py``'s models from it. A new entry script in this directory is
checked once its parser is in :data:`SCRIPTS`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys

from container import ArgumentParser

# SageMaker passes every hyperparameter as a string: these are the spellings str2bool reads as True and as False
TRUE = ("true", "1", "yes", "y", "on")
FALSE = ("false", "0", "no", "n", "off", "none", "")

# train.py --model_size: (dim, layers, heads, ffn). "base" is distilbert-base's shape; "tiny" is for CPU smoke runs.
CLASSIFIER_MODEL_SIZES = {"tiny": (128, 2, 4, 512), "small": (256, 4, 4, 1024), "base": (768, 6, 12, 3072)}
# train_lm.py --model_size: (hidden, layers, heads, ffn). "tiny" keeps a CPU smoke run to seconds. "7b" is
# Llama-2-7B's shape; "1b" has Llama-3.2-1B's width, depth, heads and MLP but full multi-head attention (it shares 8
# KV heads) and untied embeddings (llama.build_model). Both use the catalogue's small vocabulary, not the models'.
LM_MODEL_SIZES = {
    "tiny": (128, 2, 4, 344),
    "small": (256, 4, 8, 688),
    "medium": (512, 8, 8, 1376),
    "1b": (2048, 16, 32, 8192),
    "7b": (4096, 32, 32, 11008),
}

# torch.compile modes a lab compares: "default" (fusion), "reduce-overhead" (fusion + CUDA graphs),
# "max-autotune-no-cudagraphs" (fusion + matmul autotuning: minutes of compiling per shape)
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune-no-cudagraphs", "max-autotune")
# train_lm.py's --strategy: one or several of these, comma-separated
STRATEGIES = ("single", "ddp", "zero", "fsdp", "tp", "pp")
# train_elastic.py's --fault: what faults.py makes one rank do (none: nothing)
FAULTS = ("none", "stop", "skip_collective", "slow", "crash")


# train_lm.py's --dist_timeout_s: how long a rank waits in a collective before the job fails. The longest legitimate
# wait there is rank 0 working alone while the others sit in a barrier: the end-of-strategy reload check (bounded: see
# sharded_checkpoint.RELOAD_CHECK_BUDGET; for the 7b shape an estimated 2 minutes to build and load the plain model on
# one CPU thread, then at most 3 to score it) and the end of the run (a few greedy tokens, then the consolidated model
# saved: 26 GB in fp32 for 7b): an estimated 10 minutes in all for 7b. 30 minutes leaves three times that, and a hung
# collective still fails the job well inside lab 04's 2-hour MaxRuntime, with its logs. (``single`` in a multi-rank
# launch also has the others wait while rank 0 trains alone: keep its --max_steps within this.) train.py's ranks never
# wait on one another for long (rank 0 alone only saves the model at the end): 10 minutes, NCCL's own default.
LM_DIST_TIMEOUT_S = 30 * 60
DIST_TIMEOUT_S = 10 * 60


class Range:
    """An argparse ``type`` for a number that must lie in a range: a value outside it fails the parse with the range
    (the job's FailureReason), and :func:`describe` publishes it, so the notebook side refuses it before launch.
    A float with a range must also be finite: inf or nan never trains."""

    def __init__(self, kind, min=None, max=None, min_exclusive=False, max_exclusive=False):
        self.kind, self.min, self.max = kind, min, max
        self.min_exclusive, self.max_exclusive, self.finite = min_exclusive, max_exclusive, kind is float
        self.__name__ = kind.__name__  # argparse's "invalid float value: 'x'" names the type by it

    def __call__(self, text: str):
        value = self.kind(text)  # ValueError: argparse's own "invalid int value"
        if not self.allows(value):
            raise argparse.ArgumentTypeError(f"{text!r} is out of range: it must be {self.text}")
        return value

    def allows(self, value) -> bool:
        if self.finite and not math.isfinite(value):
            return False
        low = self.min is None or (value > self.min if self.min_exclusive else value >= self.min)
        return low and (self.max is None or (value < self.max if self.max_exclusive else value <= self.max))

    @property
    def text(self) -> str:
        """The range in words: "an int >= 1", "a finite float >= 0 and < 1"."""
        bounds = [f"{'>' if self.min_exclusive else '>='} {self.min:g}"] if self.min is not None else []
        bounds += [f"{'<' if self.max_exclusive else '<='} {self.max:g}"] if self.max is not None else []
        return f"{'a finite float' if self.finite else 'an int'} {' and '.join(bounds)}".strip()

    def published(self) -> dict:
        keys = ("min", "max", "min_exclusive", "max_exclusive", "finite", "text")
        return {k: getattr(self, k) for k in keys}


POSITIVE = Range(float, 0, min_exclusive=True)  # lr, epochs: zero trains nothing
AT_LEAST_1 = Range(int, 1)  # batch sizes, lengths, intervals (a modulo by zero), the keep count
NON_NEGATIVE = Range(int, 0)  # counts where 0 means "off" or "all"
NON_NEGATIVE_FLOAT = Range(float, 0)
SHARE = Range(float, 0, 1)  # a fraction of the schedule
DROP_PROBABILITY = Range(float, 0, 1, max_exclusive=True)  # 1 drops every activation


def str2bool(value: str) -> bool:
    """SageMaker passes every hyperparameter as a string: "False" must mean False."""
    if value.lower() in TRUE:
        return True
    if value.lower() in FALSE:
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {value!r}")


def train_parser(description: str | None = None) -> ArgumentParser:
    """train.py's options."""
    env = os.environ.get
    p = ArgumentParser(description=description)
    # the container contract: channels, model and output dirs
    p.add_argument("--train", default=env("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    p.add_argument("--validation", default=env("SM_CHANNEL_VALIDATION", "/opt/ml/input/data/validation"))
    p.add_argument(
        "--pretrained",
        default=env("SM_CHANNEL_PRETRAINED", ""),
        help="a save_pretrained() directory to start from instead of random weights",
    )
    p.add_argument(
        "--hub_checkpoint",
        default="",
        help="a Hugging Face Hub model id to fine-tune (e.g. distilbert-base-multilingual-cased): the container "
        "downloads it and its tokenizer, so SageMaker targets only; local jobs never download",
    )
    p.add_argument("--model_dir", default=env("SM_MODEL_DIR", "/opt/ml/model"))
    p.add_argument("--output_data_dir", default=env("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
    p.add_argument("--checkpoint_dir", default="/opt/ml/checkpoints")
    p.add_argument(
        "--checkpoint_every", type=NON_NEGATIVE, default=0, help="save every N steps and on SIGTERM (0: off)"
    )
    p.add_argument("--checkpoint_keep", type=AT_LEAST_1, default=2, help="keep the newest K checkpoints")
    p.add_argument(
        "--checkpoint_rng",
        type=str2bool,
        default=True,
        help="save each rank's random-number state and restore it on resume (false: a resumed run draws new "
        "dropout masks and is no longer bit-identical to an uninterrupted one)",
    )
    p.add_argument(
        "--resume_allow_changes",
        default="",
        help="comma list: settings allowed to differ from the "
        "checkpoint's (max_steps, epochs, lr...); any other change is refused",
    )
    # the model
    p.add_argument("--model_size", choices=sorted(CLASSIFIER_MODEL_SIZES), default="tiny")
    p.add_argument("--max_length", type=AT_LEAST_1, default=64)
    p.add_argument("--dropout", type=DROP_PROBABILITY, default=0.1)
    p.add_argument(
        "--bucket_by_length",
        type=str2bool,
        default=False,
        help="batch titles of similar length together, so batches carry little padding",
    )
    # the optimisation
    p.add_argument("--epochs", type=POSITIVE, default=1.0)
    p.add_argument("--max_steps", type=NON_NEGATIVE, default=0, help="stop after this many steps (0: run all epochs)")
    p.add_argument("--batch_size", type=AT_LEAST_1, default=64, help="GLOBAL batch: split evenly across all ranks")
    p.add_argument("--lr", type=POSITIVE, default=1e-3)
    p.add_argument("--weight_decay", type=NON_NEGATIVE_FLOAT, default=0.01)
    p.add_argument("--warmup_ratio", type=SHARE, default=0.06)
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16"], default="auto")
    # the single-GPU fast path (fastpath.py): one switch each, so a lab can turn them on one at a time
    p.add_argument("--fused_adamw", type=str2bool, default=False, help="AdamW's fused kernel: few launches per step")
    p.add_argument("--compile", type=str2bool, default=False, help="torch.compile the model: fused elementwise work")
    p.add_argument(
        "--compile_mode",
        choices=COMPILE_MODES,
        default="default",
        help="reduce-overhead: CUDA graphs too, for small launch-bound batches",
    )
    p.add_argument("--compile_backend", default="inductor", help="aot_eager: trace but generate no code (debugging)")
    p.add_argument("--attn_implementation", choices=["sdpa", "eager"], default="sdpa")
    p.add_argument(
        "--pad_to", type=NON_NEGATIVE, default=0, help="pad every batch to this width (0: to its longest title)"
    )
    p.add_argument(
        "--pad_multiple",
        type=AT_LEAST_1,
        default=1,
        help="round dynamic widths up to a multiple: 8 or 16 keeps --compile's shapes few",
    )
    p.add_argument("--seed", type=int, default=42)
    # debugging on a slice (the case study's first tip) and logging
    p.add_argument("--subset", type=NON_NEGATIVE, default=0, help="train on the first N rows only (0: all)")
    p.add_argument("--eval_subset", type=NON_NEGATIVE, default=0, help="validate on the first N rows only (0: all)")
    p.add_argument("--log_every", type=AT_LEAST_1, default=20)
    p.add_argument("--evals_per_epoch", type=AT_LEAST_1, default=1)
    # the data pipeline (lab 07): where tokenizing happens, and who feeds the trainer
    p.add_argument(
        "--tokenize",
        choices=["ahead", "on_the_fly"],
        default="ahead",
        help="ahead: every title once, before training; on_the_fly: per sample, in the loader",
    )
    p.add_argument(
        "--num_workers", type=NON_NEGATIVE, default=0, help="DataLoader worker processes (0: the trainer itself)"
    )
    p.add_argument("--pin_memory", type=str2bool, default=False, help="page-locked batches: faster copies to a GPU")
    p.add_argument("--persistent_workers", type=str2bool, default=False, help="keep workers alive across epochs")
    p.add_argument("--threads", type=NON_NEGATIVE, default=0, help="trainer's intra-op threads (0: OMP_NUM_THREADS)")
    p.add_argument(
        "--decode_ms",
        type=NON_NEGATIVE_FLOAT,
        default=0.0,
        help="CPU ms each training title's decoding costs, as an image's would (0: none); on_the_fly: per sample",
    )
    p.add_argument("--cpu_set", default="", help="the cores this job's processes may run on, e.g. 0,1 (empty: all)")
    p.add_argument(
        "--device_ms",
        type=NON_NEGATIVE_FLOAT,
        default=0.0,
        help="a stand-in accelerator on a CPU (lab 07): each step lasts at least this many ms, the rest a wait off "
        "the cores, as a GPU computes while its host waits (0: none)",
    )
    # profiling (profiling.py, lab 07): where a step's time goes
    p.add_argument(
        "--profile",
        type=str2bool,
        default=False,
        help="torch.profiler around a few steps: a Chrome/TensorBoard trace and a top-operators table",
    )
    p.add_argument(
        "--profile_dir",
        default="",
        help="where the trace and tables go (default: <output_data_dir>/profile; on SageMaker, a path "
        "under /opt/ml/output/tensorboard is uploaded as the job runs)",
    )
    p.add_argument(
        "--profile_schedule",
        default="2,2,5",
        help="wait,warmup,active steps: skip start-up, warm the profiler up, then record",
    )
    p.add_argument(
        "--step_breakdown",
        type=str2bool,
        default=False,
        help="split each step's time after the data wait: computing on a core, queued for a core (other work), "
        "blocked (waiting for the all-reduce and the other ranks); Linux only (lab 02)",
    )
    # the collectives library (labs 02 and 03)
    p.add_argument(
        "--backend",
        choices=["auto", "gloo", "nccl", "smddp"],
        default="auto",
        help="collectives: auto (nccl on GPUs, gloo on CPUs) or smddp (SageMaker's data-parallel "
        "library, falls back to auto where it is not installed)",
    )
    p.add_argument(
        "--dist_timeout_s",
        type=AT_LEAST_1,
        default=DIST_TIMEOUT_S,
        help="a rank that waits this long in a collective (another rank stalled) fails the job",
    )
    return p


def lm_parser(description: str | None = None) -> ArgumentParser:
    """train_lm.py's options (train_lm.parse_args then checks how they combine)."""
    env = os.environ.get
    p = ArgumentParser(description=description)
    p.add_argument("--train", default=env("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    p.add_argument("--validation", default=env("SM_CHANNEL_VALIDATION", "/opt/ml/input/data/validation"))
    p.add_argument("--model_dir", default=env("SM_MODEL_DIR", "/opt/ml/model"))
    p.add_argument("--output_data_dir", default=env("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
    p.add_argument("--strategy", default="single", help=f"one or several (comma-separated) of {', '.join(STRATEGIES)}")
    p.add_argument("--model_size", choices=sorted(LM_MODEL_SIZES), default="tiny")
    p.add_argument("--block_size", type=AT_LEAST_1, default=64, help="tokens per training sequence (titles are packed)")
    p.add_argument("--batch_size", type=AT_LEAST_1, default=16, help="GLOBAL batch in sequences")
    p.add_argument("--max_steps", type=AT_LEAST_1, default=20)
    p.add_argument("--lr", type=POSITIVE, default=3e-3)
    p.add_argument("--weight_decay", type=NON_NEGATIVE_FLOAT, default=0.01)
    p.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    p.add_argument(
        "--activation_checkpointing",
        type=str2bool,
        default=False,
        help="recompute each decoder layer in backward instead of keeping its activations",
    )
    p.add_argument("--subset", type=NON_NEGATIVE, default=0, help="read the first N titles only (0: all)")
    p.add_argument("--eval_blocks", type=AT_LEAST_1, default=32, help="validation sequences for the perplexity check")
    p.add_argument("--generate_tokens", type=AT_LEAST_1, default=8)
    p.add_argument("--log_every", type=AT_LEAST_1, default=5)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--microbatches", type=AT_LEAST_1, default=4, help="pp: micro-batches per global batch")
    p.add_argument("--pp_schedule", choices=["gpipe", "1f1b"], default="gpipe")
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    p.add_argument("--mp_parameters", default="", help="SMP v2 degrees as JSON (SageMaker passes them)")
    p.add_argument(
        "--dist_timeout_s",
        type=AT_LEAST_1,
        default=LM_DIST_TIMEOUT_S,
        help="a rank that waits this long in a collective (another rank stalled) fails the job",
    )
    return p


def elastic_parser(description: str | None = None) -> ArgumentParser:
    """train_elastic.py's options (lab 08): a small classifier whose gradient all-reduce is timed on its own, whose
    DCP checkpoint resumes on another world size, and one rank made to fail by the fault switch (faults.py)."""
    env = os.environ.get
    p = ArgumentParser(description=description)
    p.add_argument("--train", default=env("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train"))
    p.add_argument("--model_dir", default=env("SM_MODEL_DIR", "/opt/ml/model"))
    p.add_argument("--output_data_dir", default=env("SM_OUTPUT_DATA_DIR", "/opt/ml/output/data"))
    p.add_argument("--checkpoint_dir", default="/opt/ml/checkpoints")
    p.add_argument(
        "--checkpoint_every",
        type=NON_NEGATIVE,
        default=0,
        help="a DCP checkpoint every N steps, not at the last (0: off)",
    )
    p.add_argument("--global_batch", type=AT_LEAST_1, default=32, help="rows per step, whatever the world size")
    p.add_argument(
        "--micro_batch",
        type=AT_LEAST_1,
        default=8,
        help="rows per forward pass: each rank accumulates global_batch / (world x micro_batch) of them a step",
    )
    p.add_argument("--steps", type=AT_LEAST_1, default=24)
    p.add_argument("--lr", type=POSITIVE, default=1e-2)
    p.add_argument("--buckets", type=AT_LEAST_1, default=16384, help="hashed word buckets (the embedding's rows)")
    p.add_argument("--dim", type=AT_LEAST_1, default=64)
    p.add_argument("--hidden", type=AT_LEAST_1, default=256)
    p.add_argument("--seed", type=int, default=42)
    p.add_argument("--subset", type=NON_NEGATIVE, default=0, help="train on the first N rows only (0: all)")
    p.add_argument("--threads", type=NON_NEGATIVE, default=0, help="intra-op threads (0: OMP_NUM_THREADS)")
    p.add_argument("--backend", choices=["auto", "gloo", "nccl"], default="auto")
    p.add_argument(
        "--dist_timeout_s",
        type=AT_LEAST_1,
        default=DIST_TIMEOUT_S,
        help="a rank that waits this long in a collective (another rank stalled) fails the job",
    )
    # the fault switch (faults.py): one rank made to fail, for the drills; off by default
    p.add_argument("--fault", choices=FAULTS, default="none", help="make one rank fail: stop, skip_collective, ...")
    p.add_argument("--fault_rank", type=int, default=1, help="the rank the fault hits")
    p.add_argument("--fault_step", type=AT_LEAST_1, default=None, help="the step at which it hits (from 1)")
    p.add_argument("--fault_delay_s", type=NON_NEGATIVE_FLOAT, default=0.0, help="slow: extra compute seconds a step")
    return p


def read_channel_parser(description: str | None = None) -> argparse.ArgumentParser:
    """read_channel.py's options (lab 05's I/O-only job: plain argparse, like the rest of that script)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--channel", default="train", help="the channel to read (SM_CHANNEL_<NAME>)")
    p.add_argument("--access", choices=["sequential", "random"], default="sequential")
    p.add_argument(
        "--fraction", type=Range(float, 0, 1, min_exclusive=True), default=1.0, help="share of the files to read"
    )
    p.add_argument("--pattern", default="", help="only files whose name ends with this (e.g. .csv)")
    p.add_argument("--block_kb", type=AT_LEAST_1, default=1024)
    p.add_argument("--epochs", type=AT_LEAST_1, default=1, help="passes over the files, each opening every file again")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log_every", type=NON_NEGATIVE, default=0, help="a [read] line every N files (0: ten per run)")
    p.add_argument(
        "--compute_ms_per_mb",
        type=NON_NEGATIVE_FLOAT,
        default=0.0,
        help="ms of a training step's work per MB read (0: I/O only)",
    )
    p.add_argument(
        "--compute_on",
        choices=["accelerator", "cpu"],
        default="accelerator",
        help="accelerator: the loop waits, as for a GPU step, its CPU free; cpu: it spins, as for decoding",
    )
    return p


def parse_known(parser: argparse.ArgumentParser, argv=None) -> argparse.Namespace:
    """The options ``parser`` knows, with the rest in ``args.unknown``: SageMaker passes hyperparameters the script
    may not know (and the SDK adds its own), so the script keeps going past them."""
    args, unknown = parser.parse_known_args(argv)
    args.unknown = unknown
    return args


# entry script: (its parser, its --model_size table and what each number is, or None)
SCRIPTS = {
    "train.py": (train_parser, CLASSIFIER_MODEL_SIZES, ("dim", "layers", "heads", "ffn")),
    "train_lm.py": (lm_parser, LM_MODEL_SIZES, ("hidden", "layers", "heads", "ffn")),
    "read_channel.py": (read_channel_parser, None, None),
    "train_elastic.py": (elastic_parser, None, None),
}
_TYPES = {int: "int", float: "float", str2bool: "bool", str: "str", None: "str"}


def describe(parser: argparse.ArgumentParser) -> dict[str, dict]:
    """Each ``--option`` of ``parser``: its type (int, float, bool or str), choices, allowed range (None, or
    :meth:`Range.published`), default and help."""
    described = {}
    for action in parser._actions:
        names = [s[2:] for s in action.option_strings if s.startswith("--")]
        if not names or isinstance(action, argparse._HelpAction):
            continue
        ranged = isinstance(action.type, Range)
        entry = {
            "type": _TYPES.get(action.type.kind if ranged else action.type, "str"),
            "choices": [str(c) for c in action.choices] if action.choices is not None else None,
            "range": action.type.published() if ranged else None,
            "default": action.default,
            "help": action.help,
        }
        described.update(dict.fromkeys(names, entry))
    return described


def schema(scripts=None) -> dict:
    """What :func:`describe` says of each script's parser, with its model sizes, and the boolean spellings."""
    unknown = sorted(set(scripts or ()) - set(SCRIPTS))
    if unknown:
        raise SystemExit(f"options.py: no options on file for {', '.join(unknown)}; it has {', '.join(SCRIPTS)}")
    out = {}
    for name in scripts or SCRIPTS:
        parser, sizes, fields = SCRIPTS[name]
        out[name] = {"options": describe(parser()), "model_sizes": sizes, "model_size_fields": fields}
    return {"booleans": {"true": list(TRUE), "false": list(FALSE)}, "scripts": out}


if __name__ == "__main__":
    cli = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    cli.add_argument("--schema", action="store_true", help="print the scripts' options as JSON")
    cli.add_argument("scripts", nargs="*", help=f"some of {', '.join(SCRIPTS)} (default: all)")
    a = cli.parse_args()
    if not a.schema:
        cli.error("nothing to do: pass --schema")
    json.dump(schema(a.scripts), sys.stdout, indent=1, default=str)
    print()
