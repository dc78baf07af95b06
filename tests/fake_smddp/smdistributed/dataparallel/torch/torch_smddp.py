"""A stand-in for ``smdistributed.dataparallel.torch.torch_smddp``, for tests only.

The real module ships only in SageMaker's SMDDP images and, on import, registers ``"smddp"`` as a
``torch.distributed`` backend. This one registers the same name backed by gloo, so a CPU test can check that the
training script really initialises the ``smddp`` backend when the library is importable (and not its fallback).
"""

import torch.distributed as dist
from torch.distributed import ProcessGroupGloo


def _create(store, rank, size, timeout):
    return ProcessGroupGloo(store, rank, size, timeout)


dist.Backend.register_backend("smddp", _create, devices=["cpu"])
