"""train_lm.py's sharded checkpoints (torch.distributed.checkpoint, DCP): every rank writes its own shards, with the
plain model's names whatever the strategy; rank 0 then loads them into a plain single-process model, as inference on
one device would (DCP reshards on load), and checks it scores what the sharded model scored, on as many validation
tokens as a bounded check allows (:func:`plan_reload_check`)."""

from __future__ import annotations

import inspect
import json
import math
import os
import shutil
from contextlib import nullcontext
from dataclasses import dataclass

import torch
import torch.distributed as dist

from llama import build_model
from pipeline_parallel import DecoderSlice
from ranks import Dist, Metrics
from strategy import Setup

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


def plan_reload_check(params: int, rows: int, tokens: int, budget: float | None = None) -> ReloadCheck:
    """The reload check for a model of ``params`` parameters and ``rows`` validation sequences of ``tokens``
    predictions each: all of them where ``params x rows x tokens`` fits ``budget`` (RELOAD_CHECK_BUDGET unless
    given), else as many as fit (whole sequences first, then the first tokens of one sequence; a causal model's loss
    on a prefix is well defined)."""
    budget = RELOAD_CHECK_BUDGET if budget is None else budget
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
    reloaded_loss = Setup(reloaded, None).evaluate(check.cut(val_blocks), "cpu", nullcontext())
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
