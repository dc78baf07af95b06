"""Data parallel: every rank holds the whole model and trains on its slice of the global batch.

``ddp``: DistributedDataParallel (the wrap train.py uses too, from ranks.py) averages the gradients in backward.
``zero``: the same, with the optimizer state sharded across ranks (ZeRO stage 1).
"""

from __future__ import annotations

import torch

from ranks import Dist
from strategy import Setup, adamw


def apply_ddp(model, d: Dist, args) -> Setup:
    model = d.ddp(model)  # gradients averaged across ranks (all-reduce) during backward
    return Setup(model, adamw(model.parameters(), args), d.rank, d.world)


def apply_zero(model, d: Dist, args) -> Setup:
    from torch.distributed.optim import ZeroRedundancyOptimizer

    model = d.ddp(model)
    # each rank keeps (and updates) the AdamW moments of 1/world of the parameters, then broadcasts its slice
    optimizer = ZeroRedundancyOptimizer(
        model.parameters(), optimizer_class=torch.optim.AdamW, lr=args.lr, weight_decay=args.weight_decay
    )
    return Setup(model, optimizer, d.rank, d.world)
