"""Lab 04's exercise: the optimizer state each rank holds, with DDP and with ZeRO-1."""

from __future__ import annotations

import math

from helpers.exercises import exercise, expect
from helpers.planning.memory import GIB

ADAM_BYTES = 8  # two fp32 moments per parameter


@exercise("04.1", "Optimizer state per GPU: DDP vs ZeRO-1", minutes=4)
def optimizer_state_per_gpu(optimizer_gib_ddp, optimizer_gib_zero1, params, gpus):
    """Adam's two fp32 moments for ``params`` parameters on ``gpus`` ranks: GiB per rank with DDP and ZeRO-1."""
    whole = params * ADAM_BYTES / GIB
    for name, value in (("optimizer_gib_ddp", optimizer_gib_ddp), ("optimizer_gib_zero1", optimizer_gib_zero1)):
        expect(isinstance(value, (int, float)) and value > 0, f"{name} is a positive number of GiB.")
    expect(
        not math.isclose(optimizer_gib_ddp, whole / gpus, rel_tol=0.03),
        f"with DDP every rank holds the whole optimizer state: nothing is divided by the {gpus} ranks.",
    )
    expect(
        math.isclose(optimizer_gib_ddp, whole, rel_tol=0.03),
        f"{params / 1e9:.2f} billion parameters × {ADAM_BYTES} bytes (two fp32 moments), in GiB (2**30 bytes); "
        f"you wrote {optimizer_gib_ddp:g}.",
    )
    expect(
        not math.isclose(optimizer_gib_zero1, whole, rel_tol=0.03),
        "ZeRO-1 is exactly the step that stops every rank keeping all of the optimizer state.",
    )
    expect(
        math.isclose(optimizer_gib_zero1, whole / gpus, rel_tol=0.03),
        f"ZeRO-1 gives each of the {gpus} ranks its own slice of the moments; you wrote {optimizer_gib_zero1:g}.",
    )
    return (
        f"{whole:.1f} GiB on every GPU with DDP, {whole / gpus:.2f} GiB with ZeRO-1: the same model, {gpus}× less "
        "optimizer memory per GPU, for one extra broadcast of the updated weights a step."
    )
