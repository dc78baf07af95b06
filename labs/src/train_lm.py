"""Train a small Llama-style language model on product titles, sharded six ways: the model-parallel lab's script.

The same loop trains under each ``--strategy``; only the few lines that wrap the model and build the optimizer
change: one ``apply_<strategy>`` each, in the file named for its technique (``APPLY`` below). Several strategies can
run one after another in one launch (``--strategy single,ddp,zero,fsdp,tp,pp``), each from the same seed on the same
global batches, so their losses and per-rank bytes sit side by side::

    python train_lm.py --train ../../data/catalog/train --validation ../../data/catalog/validation
    torchrun --nproc_per_node 2 train_lm.py --strategy single,ddp,zero,fsdp,tp,pp ...

single  the plain model on one process (in a multi-rank launch rank 0 runs it alone, the others wait): strategy.py
ddp     every rank holds everything; gradients are averaged (all-reduce): ddp.py
zero    ZeroRedundancyOptimizer: DDP, with the optimizer state sharded across ranks (ZeRO stage 1): ddp.py
fsdp    FSDP2 ``fully_shard``: parameters, gradients and optimizer state sharded (ZeRO stage 3): fsdp.py; on
        SageMaker's SMP image (``torch.sagemaker`` importable) the same flag takes the SMP v2 path instead: smp.py
tp      tensor parallel (``parallelize_module``): every rank holds a slice of each attention and MLP matrix and
        sees the whole batch: tensor_parallel.py
pp      pipeline parallel (``torch.distributed.pipelining``): rank r holds the r-th run of decoder layers (rank 0 also
        the embeddings, the last rank the final norm and LM head); the batch flows through in ``--microbatches``
        micro-batches on a GPipe or 1F1B schedule: pipeline_parallel.py

Per strategy and rank the script reports parameter, gradient and optimizer-state bytes, the bytes autograd saved
for backward (activations), peak CUDA memory on GPUs, step time and loss, as ``[memory]``/``[train]`` metric lines
and in ``metrics.json`` (measure.py). It saves a sharded checkpoint (torch.distributed.checkpoint) per strategy and
loads it back into a plain single-process model for a perplexity check (sharded_checkpoint.py), and generates a few
tokens with it (generate.py). The model and its loss are llama.py's.

Read it top-down: ``main`` is the whole run, ``train_one`` one strategy's. It shares with train.py only what every
entry script needs: its options and model sizes live in ``options.py``, the rank, device, DDP wrap, precision and
metrics in ``ranks.py``, the failure reason and clean exit in ``container.py``.
"""

from __future__ import annotations

import os
import statistics
import time
import warnings
from contextlib import nullcontext
from datetime import timedelta

import torch
import torch.distributed as dist

from catalog_data import load_tokenizer, read_channel, read_labels
from container import run
from ddp import apply_ddp, apply_zero
from fsdp import apply_fsdp
from generate import sample_and_save
from llama import build_model
from measure import SavedForBackward, local_bytes, optimizer_state_bytes
from options import LM_MODEL_SIZES, STRATEGIES, lm_parser, parse_known
from pipeline_parallel import apply_pp
from ranks import Dist, Metrics, pick_precision, require_finite
from sampling import GlobalBatchPlan
from sharded_checkpoint import plan_reload_check, save_and_reload
from smp import sagemaker_model_parallel
from strategy import apply_single
from tensor_parallel import apply_tp

APPLY = {  # --strategy: the function that wraps the model and builds its optimizer
    "single": apply_single,
    "ddp": apply_ddp,
    "zero": apply_zero,
    "fsdp": apply_fsdp,
    "tp": apply_tp,
    "pp": apply_pp,
}


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


def main(args) -> None:
    # rank 0 alone writes and reads checkpoints without the process group on purpose: no warning for that
    warnings.filterwarnings("ignore", message="torch.distributed is disabled")
    d = Dist(args.backend, timeout=timedelta(seconds=args.dist_timeout_s))  # options.LM_DIST_TIMEOUT_S: why 30 min
    args.precision = pick_precision(args.precision, d.device, without_bf16="fp32")  # no loss scaler here
    d.per_rank(args.batch_size)  # --batch_size is the global batch: the ranks must share it evenly
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


# ---------------------------------------------------------------------------------------------------- one strategy
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
    val_loss = setup.evaluate(val_blocks, d.device, autocast)
    require_finite(f"val_loss ({strategy})", val_loss, step, args.lr, args.precision)  # before any checkpoint is saved
    # the same plan on every rank (it depends on the shapes only): where the reload check scores fewer tokens than
    # the validation set, all ranks score the sharded model on those tokens too, now, so rank 0 has its reference
    check = plan_reload_check(params, *val_blocks[:, 1:].shape)
    check_loss = val_loss if check.full else setup.evaluate(check.cut(val_blocks), d.device, autocast)
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


def gather(row: dict, d: Dist, strategy: str) -> list[dict]:
    if strategy == "single" or not d.enabled:
        return [row]
    rows = [None] * d.world
    dist.all_gather_object(rows, row)
    return rows


# ---------------------------------------------------------------------------------------------------- the end
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
    metrics.write(args, strategies=results, sample=sample)


if __name__ == "__main__":
    run(main, parse_args)
