"""What each rank of train_lm.py holds, measured from the tensors themselves: parameter, gradient and optimizer-state
bytes (a sharded DTensor counts its local shard only) and the bytes autograd saves for backward (the activations)."""

from __future__ import annotations

import torch


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
