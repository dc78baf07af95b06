"""Train a small Llama-style language model on product titles, sharded six ways: the model-parallel lab's script.

The same loop trains under each ``--strategy``; only the few lines that wrap the model and build the optimizer
change (``apply_<strategy>`` below). Several strategies can run one after another in one launch
(``--strategy single,ddp,zero,fsdp,tp,pp``), each from the same seed on the same global batches, so their losses and
per-rank bytes sit side by side::

    python train_lm.py --train ../../data/catalog/train --validation ../../data/catalog/validation
    torchrun --nproc_per_node 2 train_lm.py --strategy single,ddp,zero,fsdp,tp,pp ...

single  the plain model on one process (in a multi-rank launch rank 0 runs it alone, the others wait)
ddp     every rank holds everything; gradients are averaged (all-reduce)
zero    ZeroRedundancyOptimizer: DDP, with the optimizer state sharded across ranks (ZeRO stage 1)
fsdp    FSDP2 ``fully_shard``: parameters, gradients and optimizer state sharded (ZeRO stage 3); on SageMaker's SMP
        image (``torch.sagemaker`` importable) the same flag takes the SMP v2 path instead
tp      tensor parallel (``parallelize_module``): every rank holds a slice of each attention and MLP matrix and
        sees the whole batch
pp      pipeline parallel (``torch.distributed.pipelining``): rank r holds the r-th run of decoder layers (rank 0 also
        the embeddings, the last rank the final norm and LM head); the batch flows through in ``--microbatches``
        micro-batches on a GPipe or 1F1B schedule

Per strategy and rank the script reports parameter, gradient and optimizer-state bytes, the bytes autograd saved
for backward (activations), peak CUDA memory on GPUs, step time and loss, as ``[memory]``/``[train]`` metric lines
and in ``metrics.json``. It saves a sharded checkpoint (torch.distributed.checkpoint) per strategy and loads it back
into a plain single-process model for a perplexity check (bounded in cost: see ``plan_reload_check``) and a few
generated tokens.

It shares with train.py only what every entry script needs: its options and model sizes live in ``options.py``, the
rank, device and precision in ``ranks.py``, the failure reason and clean exit in ``container.py``.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
import os
import re
import shutil
import statistics
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist
import torch.nn.functional as F

from catalog_data import load_tokenizer, read_channel, read_labels
from container import run
from options import LM_MODEL_SIZES, STRATEGIES, lm_parser, parse_known
from ranks import Dist, Metrics, pick_precision, require_finite
from sampling import GlobalBatchPlan


def parse_args(argv=None):
    """The options, declared in options.py (the notebook side reads them there), then how they combine."""
    args = parse_known(lm_parser(description=__doc__.split("\n\n")[0]), argv)
    args.strategies = [s.strip() for s in args.strategy.split(",") if s.strip()]
    bad = [s for s in args.strategies if s not in STRATEGIES]
    if bad or not args.strategies:
        raise SystemExit(
            f"--strategy {args.strategy!r}: choose one or several (comma-separated) of {', '.join(STRATEGIES)}"
        )
    if "pp" in args.strategies and args.batch_size % args.microbatches:
        raise SystemExit(
            f"--strategy pp cuts the global batch of {args.batch_size} into --microbatches "
            f"{args.microbatches} equal micro-batches: pick a divisor of --batch_size"
        )
    if args.mp_parameters and args.strategies != ["fsdp"]:
        raise SystemExit(
            f"SMP v2 degrees (mp_parameters) shard the model through FSDP: use --strategy fsdp, not {args.strategy!r}"
        )
    return args


# ---------------------------------------------------------------------------------------------------- data
def packed_blocks(channel: str, labels: list[str], tokenizer, block_size: int, subset: int) -> torch.Tensor:
    """Titles tokenized as ``[CLS] title [SEP]``, concatenated and cut into (n, block_size + 1) rows: every
    sequence is full, so no padding, and the mean loss of N equal slices is the loss of the whole batch."""
    titles, _ = read_channel(channel, labels, subset)  # the categories are only checked: a language model has none
    ids = [t for row in tokenizer(titles)["input_ids"] for t in row]
    n = len(ids) // (block_size + 1)
    if n == 0:
        raise SystemExit(f"{channel}: {len(ids)} tokens make no sequence of {block_size + 1}: lower --block_size")
    return torch.tensor(ids[: n * (block_size + 1)], dtype=torch.long).view(n, block_size + 1)


def build_model(args, vocab_size: int):
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a progress bar per save is noise in a job log

    hidden, layers, heads, ffn = LM_MODEL_SIZES[args.model_size]
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=heads,
        intermediate_size=ffn,
        max_position_embeddings=args.block_size,
        tie_word_embeddings=False,
        attn_implementation="sdpa",
        use_cache=False,
    )
    return LlamaForCausalLM(config)


# ---------------------------------------------------------------------------------------------------- strategies
class Setup:
    """What a strategy hands the loop: the model to call, its optimizer, and which slice of the batch this rank
    trains on (data-parallel strategies split the global batch; tensor parallel ranks all see all of it)."""

    def __init__(self, model, optimizer, dp_rank: int = 0, dp_world: int = 1):
        self.model, self.optimizer, self.dp_rank, self.dp_world = model, optimizer, dp_rank, dp_world

    def train_step(self, x, y, autocast) -> torch.Tensor:
        """Forward and backward on this rank's batch; the loss."""
        loss = lm_loss(self.model, x, y, autocast)
        loss.backward()
        return loss

    def eval_loss(self, x, y, autocast) -> torch.Tensor:
        return lm_loss(self.model, x, y, autocast)


def adamw(params, args):
    return torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)


def apply_single(model, d: Dist, args) -> Setup:
    return Setup(model, adamw(model.parameters(), args))


def apply_ddp(model, d: Dist, args) -> Setup:
    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[d.local_rank] if d.device.type == "cuda" else None
    )
    return Setup(model, adamw(model.parameters(), args), d.rank, d.world)


def apply_zero(model, d: Dist, args) -> Setup:
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=[d.local_rank] if d.device.type == "cuda" else None
    )
    # each rank keeps (and updates) the AdamW moments of 1/world of the parameters, then broadcasts its slice
    optimizer = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.AdamW, lr=args.lr, weight_decay=args.weight_decay
    )
    return Setup(model, optimizer, d.rank, d.world)


def apply_fsdp(model, d: Dist, args) -> Setup:
    tsm = sagemaker_model_parallel()
    if tsm is not None:
        return apply_smp(tsm, model, d, args)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    # bf16 compute and all-gathers, fp32 gradient reduction and master weights (the sharded parameters stay fp32)
    mp = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if args.precision == "bf16"
        else MixedPrecisionPolicy()
    )
    for layer in model.model.layers:  # one all-gather per decoder layer, freed again after use
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)  # the rest: embeddings, final norm, LM head
    return Setup(model, adamw(model.parameters(), args), d.rank, d.world)


def apply_tp(model, d: Dist, args) -> Setup:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    heads = model.config.num_attention_heads
    if heads % d.world or model.config.intermediate_size % d.world:
        raise SystemExit(
            f"--strategy tp splits {heads} heads and {model.config.intermediate_size} MLP columns "
            f"across {d.world} ranks: both must divide evenly; pick another --model_size or rank count"
        )
    mesh = init_device_mesh(d.device.type, (d.world,))
    # Megatron-style: split q/k/v and the MLP's up/gate by output columns, o_proj and down by input rows, so each
    # sub-block (attention, MLP) needs one all-reduce forward (its output) and one backward (its input's gradient):
    # two and two per decoder layer; heads split evenly across ranks
    plan = {
        "self_attn.q_proj": ColwiseParallel(),
        "self_attn.k_proj": ColwiseParallel(),
        "self_attn.v_proj": ColwiseParallel(),
        "self_attn.o_proj": RowwiseParallel(),
        "mlp.gate_proj": ColwiseParallel(),
        "mlp.up_proj": ColwiseParallel(),
        "mlp.down_proj": RowwiseParallel(),
    }
    for layer in model.model.layers:
        parallelize_module(layer, mesh, plan)
    return Setup(model, adamw(model.parameters(), args))


def apply_pp(model, d: Dist, args) -> Setup:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    stage = DecoderSlice(model, d.rank, d.world)
    schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[args.pp_schedule]
    # the schedule splits the batch into equal micro-batches and averages their mean losses' gradients
    # (scale_grads): with equal sizes that is the gradient of the whole batch's mean loss
    pipe = schedule(PipelineStage(stage, d.rank, d.world, d.device), args.microbatches, loss_fn=token_loss)
    return Pipeline(stage, adamw(stage.parameters(), args), pipe, d)


class DecoderSlice(torch.nn.Module):
    """Stage ``index`` of ``stages``: its share of the decoder layers; the first stage also embeds the tokens, the last
    also applies the final norm and LM head. The others' modules are dropped, so their memory is never held."""

    def __init__(self, lm, index: int, stages: int):
        super().__init__()
        per_stage = len(lm.model.layers) // stages
        self.first_layer, self.is_first, self.is_last = index * per_stage, index == 0, index == stages - 1
        lm.model.layers = lm.model.layers[self.first_layer : self.first_layer + per_stage]
        if not self.is_first:
            lm.model.embed_tokens = None
        if not self.is_last:
            lm.model.norm, lm.lm_head = torch.nn.Identity(), torch.nn.Identity()
        self.lm = lm

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inputs = {"input_ids": x} if self.is_first else {"inputs_embeds": x}
        return self.lm.lm_head(self.lm.model(**inputs).last_hidden_state)  # logits on the last stage

    def checkpoint_state(self) -> dict:
        """The plain model's names: this stage's layer i is layer ``first_layer + i`` of the whole model."""
        shift = lambda m: f"layers.{int(m[1]) + self.first_layer}."  # noqa: E731
        return {re.sub(r"layers\.(\d+)\.", shift, k): v for k, v in self.lm.state_dict().items()}


class Pipeline(Setup):
    """apply_pp's Setup: every rank sees the whole batch (rank 0 its tokens, the last rank its targets); the last
    stage's loss is broadcast, so every rank reports the loss of the whole batch."""

    def __init__(self, stage: DecoderSlice, optimizer, schedule, d: Dist):
        super().__init__(stage, optimizer)
        self.schedule, self.d, self.last = schedule, d, d.world - 1

    def train_step(self, x, y, autocast) -> torch.Tensor:
        losses = []
        with autocast:
            self.schedule.step(*[x] if self.model.is_first else [], target=y, losses=losses)
        loss = torch.stack(losses).mean().detach() if self.model.is_last else torch.zeros((), device=x.device)
        dist.broadcast(loss, src=self.last)
        return loss

    def eval_loss(self, x, y, autocast) -> torch.Tensor:
        """The whole batch at once, stage by stage over point-to-point sends (the schedule's buffers are sized for
        training micro-batches)."""
        h = x
        if not self.model.is_first:
            h = torch.empty(*x.shape, self.model.lm.config.hidden_size, device=x.device)
            dist.recv(h, src=self.d.rank - 1)
        with autocast:
            h = self.model(h).float()
        loss = token_loss(h, y) if self.model.is_last else torch.zeros((), device=x.device)
        if not self.model.is_last:
            dist.send(h.contiguous(), dst=self.d.rank + 1)
        dist.broadcast(loss, src=self.last)
        return loss


APPLY = {
    "single": apply_single,
    "ddp": apply_ddp,
    "zero": apply_zero,
    "fsdp": apply_fsdp,
    "tp": apply_tp,
    "pp": apply_pp,
}


def sagemaker_model_parallel():
    """``torch.sagemaker`` (SMP v2) where SageMaker's SMP image provides it; None everywhere else."""
    try:
        import torch.sagemaker as tsm
    except ImportError:
        return None
    return tsm


def smp_sharding(degrees: dict, world: int) -> str:
    """FSDP's sharding strategy for SMP v2 degrees on ``world`` ranks: FULL_SHARD when one group spans every
    data-parallel rank (``hybrid_shard_degree`` 0, SMP's default, or all of them), NO_SHARD for groups of one,
    HYBRID_SHARD (shard inside groups of that size, replicate across them) in between. (SMP itself switches any
    degree of 2 or more to HYBRID_SHARD with groups of that size: with one group, that is full sharding.)"""
    tp = int(degrees.get("tensor_parallel_degree") or 1)
    shard = int(degrees.get("hybrid_shard_degree") or 0)
    if tp < 1 or world % tp or shard < 0 or (shard and (world // tp) % shard):
        raise SystemExit(
            f"SMP degrees {degrees} on {world} ranks: tensor_parallel_degree must divide the ranks and "
            f"hybrid_shard_degree the {world // max(tp, 1)} data-parallel ranks (0: all of them)"
        )
    return "FULL_SHARD" if shard in (0, world // tp) else "NO_SHARD" if shard == 1 else "HYBRID_SHARD"


def apply_smp(tsm, model, d: Dist, args) -> Setup:
    """The SMP v2 path (SageMaker's SMP image only): ``tsm.init()`` reads the degrees SageMaker passes in
    ``mp_parameters``; ``tsm.transform`` swaps in SMP's tensor-parallel layers; PyTorch FSDP then shards over the
    data-parallel ranks. HYBRID_SHARD shards inside groups and replicates across them; PyTorch takes the groups from
    a 2-D device mesh of any shape, and SMP sets their size to ``hybrid_shard_degree``. Ranks of one tensor-parallel
    group (consecutive ranks) read the same batch."""
    from torch.distributed.fsdp import FullyShardedDataParallel, MixedPrecision, ShardingStrategy
    from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy
    from transformers.models.llama.modeling_llama import LlamaDecoderLayer

    degrees = json.loads(args.mp_parameters or "{}")
    sharding = smp_sharding(degrees, d.world)  # a degree that cannot run fails here, before SMP sets up its groups
    tsm.init()
    tp = int(degrees.get("tensor_parallel_degree") or 1)
    if tp > 1:
        model = tsm.transform(model)
    bf16 = args.precision == "bf16"
    model = FullyShardedDataParallel(
        model,
        auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={LlamaDecoderLayer}),
        sharding_strategy=getattr(ShardingStrategy, sharding),
        mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32) if bf16 else None,
        device_id=d.device,
        use_orig_params=True,
    )
    return Setup(model, adamw(model.parameters(), args), d.rank // tp, d.world // tp)


# ---------------------------------------------------------------------------------------------------- measuring
def local_bytes(tensors) -> int:
    """Bytes this rank holds for these tensors: a sharded (DTensor) parameter counts its local shard only."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        t = t.to_local() if hasattr(t, "to_local") else t
        total += t.numel() * t.element_size()
    return total


def optimizer_state_bytes(optimizer) -> int:
    state = getattr(optimizer, "optim", optimizer).state  # ZeroRedundancyOptimizer keeps its shard's in .optim
    return local_bytes(v for s in state.values() for v in s.values() if torch.is_tensor(v))


class SavedForBackward:
    """Counts the bytes autograd keeps for backward during a forward pass (the activations), each storage once.
    Weights saved for backward (a parameter, its transposed view, FSDP's all-gathered copy) are not activations."""

    def __init__(self):
        self.seen, self.bytes = set(), 0

    def pack(self, t):
        base = t._base if t._base is not None else t
        local = t.to_local() if hasattr(t, "to_local") else t
        key = local.untyped_storage().data_ptr()
        if not (base.is_leaf and base.requires_grad) and key not in self.seen:
            self.seen.add(key)
            self.bytes += local.untyped_storage().nbytes()
        return t

    def hooks(self):
        return torch.autograd.graph.saved_tensors_hooks(self.pack, lambda t: t)


# ---------------------------------------------------------------------------------------------------- the loop
def lm_loss(model, x: torch.Tensor, y: torch.Tensor, autocast) -> torch.Tensor:
    with autocast:
        logits = model(input_ids=x).logits
    return token_loss(logits, y)


def token_loss(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every token of the batch."""
    return F.cross_entropy(logits.float().flatten(0, 1), y.flatten())


def train_one(strategy: str, d: Dist, args, blocks, val_blocks, vocab: int, metrics: Metrics) -> dict:
    """Build the model from the seed, wrap it the strategy's way, train ``max_steps``, measure, checkpoint."""
    torch.manual_seed(args.seed)  # the same initial weights for every strategy and rank
    model = build_model(args, vocab).to(d.device)
    params = sum(p.numel() for p in model.parameters())  # the whole model's, before a strategy shards or drops any
    if args.activation_checkpointing:
        model.activation_checkpointing_enable({"use_reentrant": False})
    model.train()
    raw = model
    setup = APPLY[strategy](model, d, args)
    model, optimizer = setup.model, setup.optimizer
    amp = {"bf16": torch.bfloat16}.get(args.precision) if strategy != "fsdp" else None  # FSDP2: its policy casts
    autocast = torch.autocast(d.device.type, dtype=amp) if amp else nullcontext()
    plan = GlobalBatchPlan(len(blocks), args.batch_size, setup.dp_world, setup.dp_rank, seed=args.seed)
    if len(plan) == 0:
        raise SystemExit(f"{len(blocks)} sequences make no global batch of {args.batch_size}: lower --batch_size")
    saved = SavedForBackward()
    if d.device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(d.device)
    step, epoch, step_times, losses, grad_bytes = 0, 0, [], [], 0
    while step < args.max_steps:
        plan.set_epoch(epoch)
        for rows in plan:
            batch = blocks[rows].to(d.device)
            t0 = time.perf_counter()
            # measure activations once, on the first step (pp: every micro-batch's, as GPipe holds them all;
            # 1F1B frees each one's early and its storage is reused, so fewer are counted)
            with saved.hooks() if step == 0 else nullcontext():
                loss = setup.train_step(batch[:, :-1], batch[:, 1:], autocast)
            grad_bytes = grad_bytes or local_bytes(p.grad for p in model.parameters())
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            if d.device.type == "cuda":
                torch.cuda.synchronize()
            step_times.append(time.perf_counter() - t0)
            step += 1
            # each data-parallel rank's loss covers an equal share of the global batch: their mean is its loss
            loss_now = loss.detach().float().clone()
            if strategy != "single":
                loss_now = d.all_reduce(loss_now) / d.world
            losses.append(loss_now.item())
            if step % args.log_every == 0 or step == args.max_steps:
                metrics.log(
                    "train",
                    strategy=strategy,
                    step=step,
                    train_loss=losses[-1],
                    step_ms=1000 * statistics.median(step_times[1:] or step_times),
                )
            # on the CPU every step already (and the same on every rank that trains): checked every step
            require_finite(f"train_loss ({strategy})", losses[-1], step, args.lr, args.precision)
            if step >= args.max_steps:
                break
        epoch += 1

    mine = {
        "rank": d.rank,
        "param_bytes": local_bytes(model.parameters()),
        "grad_bytes": grad_bytes,
        "optimizer_bytes": optimizer_state_bytes(optimizer),
        "activation_bytes": saved.bytes,
        "step_ms": 1000 * statistics.median(step_times[1:] or step_times),
    }
    if d.device.type == "cuda":
        mine["peak_cuda_bytes"] = torch.cuda.max_memory_allocated(d.device)
    val_loss = evaluate(setup, val_blocks, d.device, autocast)
    require_finite(f"val_loss ({strategy})", val_loss, step, args.lr, args.precision)  # before any checkpoint is saved
    # the same plan on every rank (it depends on the shapes only): where the reload check scores fewer tokens than
    # the validation set, all ranks score the sharded model on those tokens too, now, so rank 0 has its reference
    check = plan_reload_check(params, *val_blocks[:, 1:].shape, budget=RELOAD_CHECK_BUDGET)
    check_loss = val_loss if check.full else evaluate(setup, check.cut(val_blocks), d.device, autocast)
    ranks = gather(mine, d, strategy)
    for row in ranks:
        metrics.log("memory", strategy=strategy, **row)
    out = {
        "strategy": strategy,
        "losses": losses,
        "ranks": ranks,
        "val_loss": val_loss,
        "params": sum(p.numel() for p in raw.parameters()) if strategy not in ("tp", "pp") else None,
    }
    out.update(save_and_reload(strategy, model, d, args, val_blocks, check, check_loss, metrics))
    return out


@torch.no_grad()
def evaluate(setup: Setup, val_blocks: torch.Tensor, device, autocast) -> float:
    """Mean loss on a fixed set of validation sequences; every rank runs the same ones (sharded models need all
    ranks in each forward)."""
    setup.model.eval()
    batch = val_blocks.to(device)
    loss = setup.eval_loss(batch[:, :-1], batch[:, 1:], autocast).item()
    setup.model.train()
    return loss


def gather(row: dict, d: Dist, strategy: str) -> list[dict]:
    if strategy == "single" or not d.enabled:
        return [row]
    rows = [None] * d.world
    dist.all_gather_object(rows, row)
    return rows


# ---------------------------------------------------------------------------------------------------- checkpoints
# Rank 0 scores the reloaded model on its CPU, with one thread (torchrun sets OMP_NUM_THREADS=1), while the other
# ranks wait for it, so that work must stay well inside --dist_timeout_s. Its cost is parameters x tokens: a
# forward pass is about 2 FLOPs per parameter per token, and one CPU thread does about 45 GFLOP/s on the 1b shape
# (measured on an AMD EPYC core). The whole validation set of the 7b SMP job (32 x 2,048 tokens) would take hours; this
# budget is about 3 minutes, and still checks the lab's runs in full (tiny: 16-32 x 64 tokens; 1b: 32 x 64 tokens).
RELOAD_CHECK_BUDGET = 4e12  # parameters x tokens
CPU_FLOPS_ONE_THREAD = 45e9


@dataclass(frozen=True)
class ReloadCheck:
    """Which validation tokens the reloaded model is scored on: the first ``rows`` sequences, the first ``tokens``
    predictions of each. ``full``: the whole validation set, so the reloaded loss is the validation loss."""

    rows: int
    tokens: int
    full: bool
    reason: str
    seconds: float  # the estimated time of scoring them on one CPU thread

    def cut(self, val_blocks: torch.Tensor) -> torch.Tensor:
        return val_blocks[: self.rows, : self.tokens + 1]  # inputs and targets: one token more than predicted


def plan_reload_check(params: int, rows: int, tokens: int, budget: float = RELOAD_CHECK_BUDGET) -> ReloadCheck:
    """The reload check for a model of ``params`` parameters and ``rows`` validation sequences of ``tokens``
    predictions each: all of them where ``params x rows x tokens`` fits ``budget``, else as many as fit (whole
    sequences first, then the first tokens of one sequence; a causal model's loss on a prefix is well defined)."""
    seconds = lambda n: 2 * params * n / CPU_FLOPS_ONE_THREAD  # noqa: E731
    if params * rows * tokens <= budget:
        return ReloadCheck(rows, tokens, True, "within budget", seconds(rows * tokens))
    fit = max(1, int(budget // params))  # at least one token: even a 1-token loss compares every weight's effect
    kept_rows, kept_tokens = (min(rows, fit // tokens), tokens) if fit >= tokens else (1, fit)
    size = f"{params / 1e9:.2f}B" if params >= 1e9 else f"{params / 1e6:.2f}M"
    reason = (
        f"{size} parameters x {rows * tokens} tokens would take about {duration(seconds(rows * tokens))} on one "
        f"CPU thread while the other ranks wait; scoring {kept_rows} x {kept_tokens} tokens (about "
        f"{duration(seconds(kept_rows * kept_tokens))}, budget {budget:.0e} parameters x tokens) against the "
        f"sharded model's loss on the same tokens"
    )
    return ReloadCheck(kept_rows, kept_tokens, False, reason, seconds(kept_rows * kept_tokens))


def duration(seconds: float) -> str:
    return (
        f"{seconds / 3600:.1f} h"
        if seconds >= 3600
        else f"{seconds / 60:.1f} min"
        if seconds >= 60
        else f"{seconds:.2g} s"
    )


def state_dict_of(model) -> dict:
    """The model's state dict with the plain model's names, as this rank's shards (DTensors where sharded; a
    pipeline stage's own layers)."""
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    return model.checkpoint_state() if isinstance(model, DecoderSlice) else get_model_state_dict(model)


def save_and_reload(
    strategy: str, model, d: Dist, args, val_blocks, check: ReloadCheck, check_loss: float, metrics: Metrics
) -> dict:
    """Every rank writes its own shards (torch.distributed.checkpoint); rank 0 then loads them into a plain model
    in this process, as inference on one device would, and checks it scores what the sharded model scored
    (``check_loss``) on the tokens ``check`` picks: the whole validation set for small models."""
    path = os.path.join(args.model_dir, "sharded", strategy)
    alone = strategy == "single" or not d.enabled
    if d.master:
        shutil.rmtree(path, ignore_errors=True)
    if not alone:
        dist.barrier()
    if d.master or not alone:
        save_dcp(state_dict_of(model), path, alone)
    if not alone:
        dist.barrier()
    hosts = len(json.loads(os.environ.get("SM_HOSTS", "[0]")))
    if not d.master or (hosts > 1 and not alone):
        if d.master:  # each host wrote its ranks' shards to its own model directory: none holds them all
            d.print(f"[checkpoint] strategy={strategy} reload skipped: the shards are spread over {hosts} hosts")
        return {}
    if not check.full:
        d.print(f"[checkpoint] strategy={strategy} reload check bounded: {check.reason}")
    reloaded = load_sharded(path, args)
    reloaded_loss = evaluate(Setup(reloaded, None), check.cut(val_blocks), "cpu", nullcontext())
    files = sorted(f for f in os.listdir(path) if f.endswith(".distcp"))
    out = {
        "checkpoint": path,
        "checkpoint_files": files,
        "model": reloaded,
        "reload_check": {
            "rows": check.rows,
            "tokens": check.tokens,
            "full": check.full,
            "reason": check.reason,
            "loss": check_loss,
            "reloaded_loss": reloaded_loss,
        },
    }
    if check.full:  # the whole validation set: the reloaded model's validation loss and perplexity
        metrics.log(
            "checkpoint",
            strategy=strategy,
            files=len(files),
            val_loss=check_loss,
            reloaded_val_loss=reloaded_loss,
            perplexity=math.exp(reloaded_loss),
        )
        return {**out, "reloaded_val_loss": reloaded_loss}
    metrics.log(
        "checkpoint",
        strategy=strategy,
        files=len(files),
        check_tokens=check.rows * check.tokens,
        loss=check_loss,
        reloaded_loss=reloaded_loss,
    )
    return out


def save_dcp(state: dict, path: str, alone: bool) -> None:
    """``dcp.save``; ``alone``: by this process only, with no collective, although a process group exists. torch
    2.6 added ``no_dist`` to ``dcp.save``; before it (the SMP image runs 2.5) only ``save_state_dict`` takes it."""
    import torch.distributed.checkpoint as dcp

    if "no_dist" in inspect.signature(dcp.save).parameters:
        dcp.save(state, checkpoint_id=path, no_dist=alone)
    elif alone:
        dcp.save_state_dict(state, storage_writer=dcp.FileSystemWriter(path), no_dist=True)
    else:
        dcp.save(state, checkpoint_id=path)


def load_dcp(state: dict, path: str) -> None:
    """``dcp.load`` into ``state`` in this process only (see :func:`save_dcp` for the older torch)."""
    import torch.distributed.checkpoint as dcp

    if "no_dist" in inspect.signature(dcp.load).parameters:
        dcp.load(state, checkpoint_id=path, no_dist=True)
    else:
        dcp.load_state_dict(state, storage_reader=dcp.FileSystemReader(path), no_dist=True)


def load_sharded(path: str, args, device: str = "cpu"):
    """A plain single-process model with the weights of a sharded checkpoint, whatever wrote it (any strategy,
    any number of ranks): DCP reshards on load."""

    torch.manual_seed(args.seed)
    model = build_model(args, vocab_size_of(path)).to(device)
    state = model.state_dict()
    load_dcp(state, path)
    model.load_state_dict(state)
    return model.eval()


def vocab_size_of(path: str) -> int:
    import torch.distributed.checkpoint as dcp

    meta = dcp.FileSystemReader(path).read_metadata()
    return meta.state_dict_metadata["model.embed_tokens.weight"].size[0]


# ---------------------------------------------------------------------------------------------------- main
def main(args) -> None:
    # rank 0 alone writes and reads checkpoints without the process group on purpose: no warning for that
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    d = Dist(args.backend, timeout=timedelta(seconds=args.dist_timeout_s))  # options.LM_DIST_TIMEOUT_S: why 30 min
    args.precision = pick_precision(args.precision, d.device, without_bf16="fp32")  # no loss scaler here
    if args.batch_size % d.world:
        raise SystemExit(f"--batch_size {args.batch_size} is the global batch; it must divide by the {d.world} ranks")
    hidden, layers, heads, ffn = LM_MODEL_SIZES[args.model_size]
    if "pp" in args.strategies and (d.world < 2 or layers % d.world):
        raise SystemExit(
            f"--strategy pp puts an equal share of the {layers} decoder layers on each of {d.world} "
            f"rank(s): launch 2 or more ranks that divide {layers}, or pick another --model_size"
        )
    tokenizer = load_tokenizer(os.path.join(args.train, "tokenizer.json"))
    labels = read_labels(args.train)  # the train channel's, for both channels (as train.py)
    blocks = packed_blocks(args.train, labels, tokenizer, args.block_size, args.subset)
    val_blocks = packed_blocks(args.validation, labels, tokenizer, args.block_size, 0)[: args.eval_blocks]
    metrics = Metrics(d)
    d.print(
        f"[setup] device={d.device.type} world_size={d.world} precision={args.precision} "
        f"model_size={args.model_size} hidden={hidden} layers={layers} heads={heads} ffn={ffn} "
        f"vocab={len(tokenizer)} block_size={args.block_size} global_batch={args.batch_size} "
        f"sequences={len(blocks)} steps={args.max_steps} strategies={','.join(args.strategies)} "
        f"activation_checkpointing={args.activation_checkpointing} smp={sagemaker_model_parallel() is not None}"
        + (f" collective_timeout_s={args.dist_timeout_s}" if d.enabled else "")
    )
    if args.unknown:
        d.print(f"[setup] ignoring unknown arguments: {' '.join(args.unknown)}")
    from transformers import LlamaForCausalLM  # noqa: F401 - import on every rank now, not while others wait

    start, results = time.perf_counter(), []
    for strategy in args.strategies:
        if strategy == "single" and d.enabled:  # one process trains alone; the others wait for it
            results += [train_one(strategy, d, args, blocks, val_blocks, len(tokenizer), metrics)] if d.master else []
            dist.barrier()
            continue
        results.append(train_one(strategy, d, args, blocks, val_blocks, len(tokenizer), metrics))
    if d.master:
        finish(args, tokenizer, val_blocks, results, metrics, time.perf_counter() - start)
    d.exit(0)


def sample_and_save(args, tokenizer, val_blocks, model, strategy: str) -> dict:
    """A few greedy tokens from the reloaded model, then that model saved for inference."""
    starts = (val_blocks[0] == tokenizer.cls_token_id).nonzero()  # a title's first tokens, from its [CLS]
    first = int(starts[0]) if len(starts) and int(starts[0]) + 3 <= val_blocks.shape[1] else 0
    prompt = val_blocks[:1, first : first + 3]
    with torch.no_grad():  # greedy, until the end of a title ([SEP]) or generate_tokens
        out = model.generate(
            prompt,
            max_new_tokens=args.generate_tokens,
            do_sample=False,
            eos_token_id=tokenizer.sep_token_id,
            pad_token_id=tokenizer.pad_token_id,
        )
    sample = {"prompt": tokenizer.decode(prompt[0]), "generated": tokenizer.decode(out[0, prompt.shape[1] :])}
    print(f"[sample] strategy={strategy} {sample['prompt']!r} -> {sample['generated']!r}", flush=True)
    os.makedirs(args.model_dir, exist_ok=True)
    model.save_pretrained(args.model_dir)  # the consolidated model, next to the sharded checkpoints
    shutil.copy(os.path.join(args.train, "tokenizer.json"), args.model_dir)
    return sample


def finish(args, tokenizer, val_blocks, results: list[dict], metrics: Metrics, seconds: float) -> None:
    """Rank 0: a few tokens from the last reloaded model, that model saved for inference, and metrics.json."""
    model = results[-1].pop("model", None)  # None where the shards were spread over several hosts
    sample = sample_and_save(args, tokenizer, val_blocks, model, results[-1]["strategy"]) if model is not None else {}
    for r in results:
        r.pop("model", None)
    metrics.log(
        "final",
        strategies=",".join(r["strategy"] for r in results),
        train_loss=results[-1]["losses"][-1],
        val_loss=results[-1]["val_loss"],
        seconds=seconds,
    )
    os.makedirs(args.output_data_dir, exist_ok=True)
    hyperparameters = {k: v for k, v in vars(args).items() if k != "unknown"}
    with open(os.path.join(args.output_data_dir, "metrics.json"), "w", encoding="utf-8") as f:
        json.dump(
            {"strategies": results, "sample": sample, "history": metrics.history, "hyperparameters": hyperparameters},
            f,
            indent=1,
        )


if __name__ == "__main__":
    run(main, parse_args)
