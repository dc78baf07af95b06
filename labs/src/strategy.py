"""What every ``--strategy`` of train_lm.py hands its training loop (:class:`Setup`), and the plain one, ``single``.

Each other strategy is one ``apply_<strategy>(model, d, args) -> Setup`` in the file named for its technique:
``ddp.py`` (DDP and ZeRO-1), ``fsdp.py`` (FSDP2, and SMP v2 through ``smp.py`` on SageMaker's SMP image),
``tensor_parallel.py`` and ``pipeline_parallel.py``. The loop itself does not change.
"""

from __future__ import annotations

import torch

from llama import lm_loss
from ranks import Dist


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

    @torch.no_grad()
    def evaluate(self, blocks: torch.Tensor, device, autocast) -> float:
        """Mean loss on a fixed set of sequences; every rank runs the same ones (sharded models need all ranks in
        each forward)."""
        self.model.eval()
        batch = blocks.to(device)
        loss = self.eval_loss(batch[:, :-1], batch[:, 1:], autocast).item()
        self.model.train()
        return loss


def adamw(params, args):
    return torch.optim.AdamW(params, lr=args.lr, weight_decay=args.weight_decay)


def apply_single(model, d: Dist, args) -> Setup:
    return Setup(model, adamw(model.parameters(), args))
