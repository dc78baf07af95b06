"""Lab 02's exercise: the global batch and learning rate for 4 ranks."""

from __future__ import annotations

import math

from helpers.exercises import exercise, expect


@exercise("02.1", "Global batch and learning rate for 4 ranks", minutes=4)
def batch_and_lr_for_4(global_batch_4, learning_rate_4, per_rank_batch, base_batch, base_lr):
    """Keep each rank's batch, go to 4 ranks: the global batch, and the learning rate scaled with it."""
    whole = isinstance(global_batch_4, (int, float)) and not isinstance(global_batch_4, bool)
    expect(
        whole and float(global_batch_4).is_integer() and global_batch_4 > 0,
        "the global batch is a whole number of rows per step.",
    )
    global_batch_4 = int(global_batch_4)  # 128.0 is 128 rows
    expect(
        global_batch_4 != per_rank_batch,
        f"{per_rank_batch} is one rank's share. The global batch counts every rank's rows in one optimizer step.",
    )
    expect(
        global_batch_4 == 4 * per_rank_batch,
        f"4 ranks of {per_rank_batch} rows each make one step of 4 × {per_rank_batch} rows; "
        f"you wrote {global_batch_4}.",
    )
    linear = base_lr * global_batch_4 / base_batch  # the linear scaling rule (SGD; Goyal et al.)
    root = base_lr * math.sqrt(global_batch_4 / base_batch)  # square-root scaling (Adam; this lab's real job)
    expect(isinstance(learning_rate_4, (int, float)) and learning_rate_4 > 0, "the learning rate is a positive number.")
    expect(
        not math.isclose(learning_rate_4, base_lr, rel_tol=0.02),
        f"{base_lr:g} was tuned for a global batch of {base_batch}. With {global_batch_4} rows a step there are "
        f"{global_batch_4 / base_batch:g}× fewer steps per epoch: scale the learning rate with the batch (the rules "
        f"under 'Global batch and learning rate').",
    )
    rule = next(
        (
            name
            for name, lr in (("linear", linear), ("square-root", root))
            if math.isclose(learning_rate_4, lr, rel_tol=0.02)
        ),
        None,
    )
    expect(
        rule,
        f"scale {base_lr:g} by the batch's growth, {global_batch_4}/{base_batch} (the linear rule, for SGD), or by its "
        f"square root (for Adam, as this lab's real job does); you wrote {learning_rate_4:g}.",
    )
    return (
        f"{global_batch_4} rows a step at lr {learning_rate_4:g} ({rule} scaling): the same rows per rank, and the "
        "learning rate grown with the batch. Keep the warm-up: large batches need it most."
    )
