"""Memory planner: the bytes per GPU to train a Llama-style decoder under each strategy, and what fits.

For AdamW with fp32 master weights (as ``labs/src/train_lm.py`` trains): weights, gradients and optimizer state (each
sharded or not by DDP, ZeRO-1, FSDP or tensor parallel), FSDP's gathered layers, DDP's buckets, activations counted
tensor by tensor, and a fixed reserve. Exact for fp32 on the CPU runs (``tests/test_memory_planner.py``); allocators
fragment, so treat "fits" within 10% of the limit as "smoke-test it first".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import hyperparameters
from helpers.errors import WorkshopError
from helpers.job_spec import SOURCE_DIR
from helpers.planning import instances

GIB = 1024**3
STRATEGIES = ("ddp", "zero", "fsdp", "tp")
RESERVE_GIB = 3.0  # CUDA context (~0.5-1 GiB), NCCL buffers, allocator slack: a rule of thumb, not a measurement


class PlanError(WorkshopError, ValueError):
    """A plan that cannot exist (a degree that does not divide, an unknown strategy); the message says why."""


@dataclass(frozen=True)
class ModelShape:
    """The shape of a Llama-style decoder: enough to count its parameters and activations."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    tied: bool = False  # input embedding shared with the LM head

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.head_dim

    def layer_matrices(self) -> int:
        """Parameters of one block's attention and MLP matrices: the part tensor parallel splits."""
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_dim  # q, o + k, v
        return attention + 3 * self.hidden * self.ffn  # gate, up, down

    def layer_params(self) -> int:
        return self.layer_matrices() + 2 * self.hidden  # + two RMSNorm weights

    def whole_params(self) -> int:
        """Embeddings, final norm and LM head: kept whole by tensor parallel (as in train_lm.py)."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    @property
    def params(self) -> int:
        return self.layers * self.layer_params() + self.whole_params()

    @classmethod
    def from_config(cls, config, name: str = "") -> ModelShape:
        """From a transformers config, its dict, or a ``config.json`` path (``save_pretrained`` writes one)."""
        if isinstance(config, (str, Path)):
            config = json.loads(Path(config).read_text(encoding="utf-8"))
        get: Callable[..., Any] = config.get if isinstance(config, dict) else lambda k, d=None: getattr(config, k, d)
        missing = [
            k
            for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "vocab_size")
            if get(k) is None
        ]
        if missing:
            raise PlanError(f"config lacks {', '.join(missing)}: the planner needs a Llama-style decoder config")
        heads = get("num_attention_heads")
        return cls(
            name or get("_name_or_path") or get("model_type") or "model",
            get("hidden_size"),
            get("num_hidden_layers"),
            heads,
            get("num_key_value_heads") or heads,
            get("intermediate_size"),
            get("vocab_size"),
            bool(get("tie_word_embeddings", False)),
        )


# public shapes (from the models' published configs)
KNOWN = {
    "llama-1b": ModelShape("Llama-3.2-1B", 2048, 16, 32, 8, 8192, 128256, tied=True),
    "llama-7b": ModelShape("Llama-2-7B", 4096, 32, 32, 32, 11008, 32000),
    "llama-13b": ModelShape("Llama-2-13B", 5120, 40, 40, 40, 13824, 32000),
}


def train_lm_shape(model_size: str, vocab: int) -> ModelShape:
    """The model ``labs/src/train_lm.py --model_size`` builds: (hidden, layers, heads, ffn) from the script's own
    table (``LM_MODEL_SIZES`` in ``options.py``, which publishes it: :func:`helpers.hyperparameters.model_sizes`), as
    many KV heads as heads, untied embeddings, and ``vocab`` tokens (:func:`catalog_vocab`)."""
    sizes = hyperparameters.model_sizes(SOURCE_DIR / "train_lm.py")
    if not sizes:
        raise PlanError(f"{SOURCE_DIR}: options.py publishes no --model_size table for train_lm.py")
    if model_size not in sizes:
        raise PlanError(f"train_lm.py has no --model_size {model_size!r}: it has {', '.join(sizes)}")
    hidden, layers, heads, ffn = sizes[model_size]
    return ModelShape(f"train_lm {model_size}", hidden, layers, heads, heads, ffn, vocab, tied=False)


def catalog_vocab(catalog: str | Path) -> int:
    """Tokens in a catalogue's tokenizer (``<catalog>/train/tokenizer.json``): train_lm.py's vocabulary."""
    from tokenizers import Tokenizer

    path = Path(catalog) / "train" / "tokenizer.json"
    if not path.is_file():
        raise PlanError(f"{path}: missing; build the catalogue first (catalog_generator.catalog)")
    return Tokenizer.from_file(str(path)).get_vocab_size(with_added_tokens=True)


def model_shape(model) -> ModelShape:
    """A :class:`ModelShape`, a name from :data:`KNOWN`, a config (object, dict or config.json path)."""
    if isinstance(model, ModelShape):
        return model
    if isinstance(model, str) and model in KNOWN:
        return KNOWN[model]
    if isinstance(model, str) and not Path(model).is_file():
        raise PlanError(f"unknown model {model!r}: use one of {', '.join(KNOWN)}, a config.json path or a config")
    return ModelShape.from_config(model)


# ---------------------------------------------------------------------------------------------------- activations
def _bytes(precision: str) -> int:
    if precision not in ("fp32", "bf16"):
        raise PlanError(f"precision {precision!r}: the planner knows 'fp32' and 'bf16' (mixed, fp32 master weights)")
    return 4 if precision == "fp32" else 2


def layer_activations(m: ModelShape, tokens: int, precision: str, tp: int = 1) -> int:
    """Bytes one decoder block saves for backward: per block half, the input, its fp32-normalised copy and the
    norm's output plus the fp32 1/rms (kept whole under TP); q, k, v, attention output and its per-head
    log-sum-exp, and the MLP's gate, SiLU, up and product (split across TP ranks)."""
    wide, fp32 = _bytes(precision), 4
    whole = 2 * ((2 * wide + fp32) * m.hidden + fp32)
    split = (2 * m.hidden + 2 * m.kv_dim) * wide + m.heads * fp32 + 4 * m.ffn * wide
    return tokens * (whole + split // tp)


def head_activations(m: ModelShape, tokens: int, precision: str) -> int:
    """Final norm, fp32 log-probabilities over the vocabulary for the loss, and the int64 inputs and targets."""
    wide, fp32 = _bytes(precision), 4
    return tokens * ((2 * wide + fp32) * m.hidden + fp32 + fp32 * m.vocab + 16)


def activation_bytes(
    m: ModelShape, tokens: int, precision: str = "bf16", checkpointing: bool = False, tp: int = 1
) -> tuple[int, int]:
    """(saved at the end of forward, extra transient during backward) for ``tokens`` tokens on one rank."""
    layer = layer_activations(m, tokens, precision, tp)
    if checkpointing:  # each block keeps its input only; backward rebuilds one block's activations at a time
        return m.layers * tokens * m.hidden * _bytes(precision) + head_activations(m, tokens, precision), layer
    return m.layers * layer + head_activations(m, tokens, precision), 0


# ---------------------------------------------------------------------------------------------------- estimates
@dataclass
class MemoryEstimate:
    """Per-GPU bytes of one configuration, by component."""

    model: ModelShape
    strategy: str
    world: int
    tp: int
    shard: int  # ranks that share one copy of the weights/grads/optimizer state (FSDP), 1 otherwise
    precision: str
    micro_batch: int
    seq: int
    checkpointing: bool
    params: int = 0
    grads: int = 0
    optimizer: int = 0
    activations: int = 0
    working: int = 0  # FSDP all-gather buffers, DDP buckets, transient recompute
    reserve: int = 0
    gpu_bytes: int | None = None  # the GPU's memory, when an instance was given

    @property
    def total(self) -> int:
        return self.params + self.grads + self.optimizer + self.activations + self.working + self.reserve

    @property
    def fits(self) -> bool | None:
        return None if self.gpu_bytes is None else self.total <= self.gpu_bytes

    @property
    def label(self) -> str:
        parts = [self.strategy if self.tp == 1 or self.strategy == "tp" else f"{self.strategy}+tp{self.tp}"]
        if self.strategy == "fsdp" and self.shard != self.world // self.tp:
            parts.append(f"hybrid{self.shard}")
        return "+".join(parts + (["ckpt"] if self.checkpointing else []))

    def smp(self) -> dict:
        """The SMP v2 degrees (``Job.smp``) that run this configuration on SageMaker."""
        if self.strategy != "fsdp":
            raise PlanError(f"{self.label}: SMP v2 runs FSDP (optionally with tensor parallel); choose an fsdp plan")
        return {"hybrid_shard_degree": self.shard, "tensor_parallel_degree": self.tp}

    def as_row(self) -> dict:
        row = {
            "model": self.model.name,
            "plan": self.label,
            "gpus": self.world,
            "micro_batch": self.micro_batch,
            "seq": self.seq,
            "precision": self.precision,
        }
        row.update(
            {
                k: round(getattr(self, k) / GIB, 2)
                for k in ("params", "grads", "optimizer", "activations", "working", "total")
            }
        )
        row = {
            k if k in ("model", "plan", "gpus", "micro_batch", "seq", "precision") else f"{k}_gib": v
            for k, v in row.items()
        }
        if self.gpu_bytes is not None:
            row["gpu_gib"] = round(self.gpu_bytes / GIB, 1)
            row["fits"] = "yes" if self.fits else "no"
        return row


def estimate(
    model,
    strategy: str,
    world: int = 1,
    micro_batch: int = 1,
    seq: int = 2048,
    precision: str = "bf16",
    checkpointing: bool = False,
    tp: int = 1,
    shard: int | None = None,
    instance_type: str | None = None,
    reserve_gib: float | None = None,
) -> MemoryEstimate:
    """Per-GPU bytes for ``model`` under ``strategy`` on ``world`` GPUs.

    ``micro_batch`` sequences of ``seq`` tokens per data-parallel rank and step. ``tp``: tensor-parallel degree
    (``strategy="tp"`` uses all ``world`` ranks for it; ``"fsdp"`` combines it with sharding, as SMP v2 does).
    ``shard``: FSDP's sharding group (hybrid sharding; default all data-parallel ranks). ``instance_type`` adds the
    GPU's memory and the reserve (default :data:`RESERVE_GIB`; 0 without an instance: a CPU run has none).
    """
    m = model_shape(model)
    if strategy not in STRATEGIES:
        raise PlanError(f"strategy {strategy!r}: choose one of {', '.join(STRATEGIES)}")
    if world < 1 or micro_batch < 1 or seq < 1:
        raise PlanError("world, micro_batch and seq must be at least 1")
    tp = world if strategy == "tp" else tp
    if strategy in ("ddp", "zero") and tp != 1:
        raise PlanError(f"{strategy} replicates the model: combine tensor parallel with 'fsdp' instead")
    if world % tp:
        raise PlanError(f"tensor-parallel degree {tp} must divide the {world} GPUs")
    if m.heads % tp or m.kv_heads % tp or m.ffn % tp:
        raise PlanError(
            f"tensor-parallel degree {tp} must divide {m.name}'s {m.heads} heads, {m.kv_heads} KV heads "
            f"and {m.ffn} MLP columns"
        )
    dp = world // tp
    shard = (shard or dp) if strategy == "fsdp" else 1
    if dp % shard:
        raise PlanError(f"sharding group {shard} must divide the {dp} data-parallel ranks")
    held = m.layers * (m.layer_matrices() // tp + 2 * m.hidden) + m.whole_params()  # this TP rank's parameters
    e = MemoryEstimate(m, strategy, world, tp, shard, precision, micro_batch, seq, checkpointing)
    e.params, e.grads = 4 * held // shard, 4 * held // shard
    e.optimizer = 8 * held // (shard if strategy == "fsdp" else dp if strategy == "zero" else 1)
    e.activations, recompute = activation_bytes(m, micro_batch * seq, precision, checkpointing, tp)
    unit = max(m.layer_params(), m.whole_params()) // tp  # the largest FSDP unit (a block, or the root)
    if strategy == "fsdp" and shard > 1:  # two gathered units in the compute dtype, one unsharded fp32 gradient
        e.working = 2 * unit * _bytes(precision) + 4 * unit
    elif strategy in ("ddp", "zero"):  # DDP's gradient buckets
        e.working = 4 * held if dp > 1 else 0
    e.working += recompute
    if instance_type:
        spec = instances.lookup(instance_type)
        if not spec.gpu:
            raise PlanError(f"{instance_type} has no GPUs: the planner sizes GPU memory")
        e.gpu_bytes = spec.gpu.memory_gib * GIB
        e.reserve = int((RESERVE_GIB if reserve_gib is None else reserve_gib) * GIB)
    elif reserve_gib:
        e.reserve = int(reserve_gib * GIB)
    return e


# ---------------------------------------------------------------------------------------------------- what fits
def candidates(gpus_per_instance: int, world: int) -> list[dict]:
    """Configurations from simplest to most involved: the first that fits is the one to run."""
    plans: list[dict[str, Any]] = [dict(strategy="ddp"), dict(strategy="zero")]
    if world > gpus_per_instance:  # shard inside each instance first: NVLink, not the network, carries gathers
        plans.append(dict(strategy="fsdp", shard=gpus_per_instance))
    plans += [dict(strategy="fsdp"), dict(strategy="fsdp", checkpointing=True)]
    plans += [dict(strategy="fsdp", tp=t, checkpointing=True) for t in (2, 4, 8) if t <= gpus_per_instance]
    return plans


@dataclass
class Recommendation:
    model: ModelShape
    instance_type: str
    instance_count: int
    chosen: MemoryEstimate | None
    tried: list[MemoryEstimate] = field(default_factory=list)

    def as_row(self) -> dict:
        c = self.chosen
        return {
            "model": self.model.name,
            "params_b": round(self.model.params / 1e9, 2),
            "instances": f"{self.instance_count} x {self.instance_type}",
            "plan": c.label if c else "does not fit",
            "per_gpu_gib": round(c.total / GIB, 1) if c else None,
            "gpu_gib": round(c.gpu_bytes / GIB) if c and c.gpu_bytes is not None else None,
            "smp": json.dumps(c.smp()) if c and c.strategy == "fsdp" else "",
        }


def recommend(
    model, instance_type: str, instance_count: int = 1, micro_batch: int = 1, seq: int = 2048, precision: str = "bf16"
) -> Recommendation:
    """The simplest configuration that fits ``model`` on ``instance_count`` x ``instance_type``."""
    m, spec = model_shape(model), instances.lookup(instance_type)
    if not spec.gpus:
        raise PlanError(f"{instance_type} has no GPUs: pick a GPU instance type such as ml.p4d.24xlarge")
    world = spec.gpus * instance_count
    tried = []
    for plan in candidates(spec.gpus, world):
        try:
            e = estimate(
                m,
                world=world,
                micro_batch=micro_batch,
                seq=seq,
                precision=precision,
                instance_type=instance_type,
                **plan,
            )
        except PlanError:
            continue  # e.g. a TP degree that does not divide the heads
        tried.append(e)
        if e.fits:
            return Recommendation(m, instance_type, instance_count, e, tried)
    return Recommendation(m, instance_type, instance_count, None, tried)


# ---------------------------------------------------------------------------------------------------- vs measured
COMPONENTS = {
    "params": "param_bytes",
    "grads": "grad_bytes",
    "optimizer": "optimizer_bytes",
    "activations": "activation_bytes",
}


def compare(run: dict | str | Path, config) -> list[dict]:
    """Predicted vs measured bytes per strategy and component for a ``train_lm.py`` run.

    ``run``: its ``metrics.json`` (dict or path); ``config``: the trained model's config (its ``config.json``).
    """
    metrics: dict = run if isinstance(run, dict) else json.loads(Path(run).read_text(encoding="utf-8"))
    hp = metrics["hyperparameters"]
    m = model_shape(config)
    rows = []
    for result in metrics["strategies"]:
        strategy, ranks = result["strategy"], result["ranks"]
        if strategy == "pp":  # the planner does not model pipeline stages (whose micro-batches are in flight)
            continue
        world = 1 if strategy == "single" else len(ranks)
        per_rank = hp["batch_size"] // (world if strategy in ("ddp", "zero", "fsdp") else 1)
        e = estimate(
            m,
            "ddp" if strategy == "single" else strategy,
            world=world,
            micro_batch=per_rank,
            seq=hp["block_size"],
            precision=hp["precision"],
            checkpointing=hp["activation_checkpointing"],
        )
        measured = ranks[0]
        for component, key in COMPONENTS.items():
            predicted = getattr(e, component)
            rows.append(
                {
                    "strategy": strategy,
                    "component": component,
                    "predicted": predicted,
                    "measured": measured[key],
                    "ratio": measured[key] / predicted if predicted else float("nan"),
                }
            )
    return rows
