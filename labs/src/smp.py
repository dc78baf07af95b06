"""SageMaker model parallelism (SMP v2), train_lm.py's ``--strategy fsdp`` on SageMaker's SMP image: SMP's tensor
parallelism on top of PyTorch FSDP, with the sharding groups sized by the degrees SageMaker passes in
``mp_parameters``. Everywhere else (``torch.sagemaker`` missing) ``fsdp.py`` runs plain FSDP2."""

from __future__ import annotations

import functools
import json

import torch

from ranks import Dist
from strategy import Setup, adamw


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


def sagemaker_model_parallel():
    """``torch.sagemaker`` (SMP v2) where SageMaker's SMP image provides it; None everywhere else."""
    try:
        import torch.sagemaker as tsm
    except ImportError:
        return None
    return tsm
