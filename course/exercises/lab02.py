"""Lab 02's exercise: a four-rank job that trains like the single process, run and compared step by step."""

from __future__ import annotations

from course.exercises import exercise, expect

PARITY = 1e-3  # the largest train-loss gap that still reads "the same training" at smoke size (the lab's own claim)


def _gap(a: list[float], b: list[float]) -> float:
    return max(abs(x - y) for x, y in zip(a, b))


@exercise("02.1", "Four ranks that train like one process", minutes=6)
def four_ranks_like_one(batch_size_4, lr_4, base_batch, base_lr, single, yours):
    """The learner sets the four-rank job's ``batch_size`` (the script's global batch) and learning rate so that it
    trains like the single process above; ``single`` and ``yours`` are the two runs as the check reads them: their
    ``steps``, their train-loss ``curve`` (one value per logged step), and for ``yours`` its ``status``."""
    whole = isinstance(batch_size_4, int) and not isinstance(batch_size_4, bool)
    expect(whole and batch_size_4 > 0, "batch_size_4: a whole number of rows per step.")
    expect(isinstance(lr_4, (int, float)) and lr_4 > 0, "lr_4: a positive number.")
    expect(
        yours is not None,
        "the four-rank job runs on this machine only: set target = 'local' in the parameters cell and run the cells "
        "again.",
    )
    expect(
        yours["status"] == "Completed",
        f"your job did not complete ({yours['status']}): {yours.get('reason', '')}. Its log above says why; "
        "batch_size is the global batch, so it must split evenly across the 4 ranks.",
    )
    expect(
        yours["steps"] == single["steps"],
        f"your job took {yours['steps']} optimizer steps, the single process {single['steps']}: with batch_size "
        f"{batch_size_4} each step takes {batch_size_4} rows, all ranks together, where the single process took "
        f"{base_batch}. Training like it means taking the same rows per step.",
    )
    gap = _gap(single["curve"], yours["curve"])
    expect(
        gap < PARITY,
        f"the same rows per step, but the losses part: the largest gap is {gap:.3g} (parity reads below {PARITY:g}). "
        f"The single process stepped at lr {base_lr:g}; is the update of a step of {batch_size_4} rows any larger "
        "when four ranks compute it?",
    )
    return (
        f"batch_size {batch_size_4} and lr {lr_4:g}: {yours['steps']} steps and a largest loss gap of {gap:.2g}, the "
        f"single process's training on four ranks of {batch_size_4 // 4} rows each. The global batch decides the "
        "update, not the number of ranks: the ranks average their gradients into the mean a single process "
        "computes, so neither the batch nor the learning rate changes. Scaling the learning rate is for when the "
        "global batch grows."
    )
