"""The order in which training rows are seen: one global plan of batches per epoch, shared by every rank.

Every rank builds the same plan from ``(seed, epoch)`` and takes its own contiguous slice of each global batch, so
step ``i`` trains on the same rows whether one process or N run it (loss parity), and a restarted job resumes from
``(epoch, batch)`` alone (no hidden iterator state). Optionally the plan groups rows of similar length, so a batch
pads to little more than its own longest title.
"""

from __future__ import annotations

import torch


class GlobalBatchPlan(torch.utils.data.Sampler):
    """A batch sampler: yields this rank's indices for each global batch of the epoch, from ``start_batch`` on.

    ``lengths`` turns on length bucketing: rows are shuffled, cut into pools of ``pool_batches`` global batches,
    sorted by length inside a pool and batched, and the batches are shuffled again (so no epoch runs short-to-long).
    """

    def __init__(
        self,
        size: int,
        global_batch: int,
        world: int = 1,
        rank: int = 0,
        seed: int = 0,
        lengths: list[int] | None = None,
        pool_batches: int = 64,
    ):
        if global_batch % world:
            raise ValueError(f"global batch {global_batch} must divide by the {world} ranks")
        self.size, self.global_batch, self.world, self.rank, self.seed = size, global_batch, world, rank, seed
        self.lengths, self.pool_batches = lengths, pool_batches
        self.per_rank = global_batch // world
        self.epoch, self.start_batch = 0, 0

    def __len__(self) -> int:
        """Global batches per epoch (the last partial one is dropped: every step has the same batch size)."""
        return self.size // self.global_batch

    def set_epoch(self, epoch: int, start_batch: int = 0) -> None:
        self.epoch, self.start_batch = epoch, start_batch

    def state_dict(self) -> dict:
        return {
            "epoch": self.epoch,
            "start_batch": self.start_batch,
            "seed": self.seed,
            "size": self.size,
            "global_batch": self.global_batch,
            "bucketed": self.lengths is not None,
        }

    def global_batches(self) -> list[list[int]]:
        """This epoch's plan: every global batch, in order."""
        g = torch.Generator().manual_seed(self.seed * 100_003 + self.epoch)
        order = torch.randperm(self.size, generator=g).tolist()
        n, b = len(self), self.global_batch
        if self.lengths is None:
            return [order[i * b : (i + 1) * b] for i in range(n)]
        pool = b * self.pool_batches
        batches = []
        for start in range(0, n * b, pool):
            chunk = sorted(order[start : min(start + pool, n * b)], key=self.lengths.__getitem__)
            batches += [chunk[i : i + b] for i in range(0, len(chunk), b)]
        shuffle = torch.randperm(len(batches), generator=g).tolist()
        return [batches[i] for i in shuffle]

    def __iter__(self):
        lo, hi = self.rank * self.per_rank, (self.rank + 1) * self.per_rank
        for batch in self.global_batches()[self.start_batch :]:
            yield batch[lo:hi]
