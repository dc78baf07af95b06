"""FSDP2 (``fully_shard``): parameters, gradients and optimizer state sharded across ranks (ZeRO stage 3). On
SageMaker's SMP image (``torch.sagemaker`` importable) the same ``--strategy fsdp`` takes the SMP v2 path
(``smp.py``) instead."""

from __future__ import annotations

import torch

from ranks import Dist
from smp import apply_smp, sagemaker_model_parallel
from strategy import Setup, adamw


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
