"""Lab 06's exercise: resume without the random-number state, and read what the drill measured."""

from __future__ import annotations

from course.exercises import exercise, expect


@exercise("06.1", "Resume without the random-number state", minutes=5)
def resume_without_rng(checkpoint_rng, bit_identical, your_drill):
    """The learner turns ``--checkpoint_rng`` off, predicts, and the drill they ran says whether they were right."""
    expect(
        isinstance(checkpoint_rng, bool) and isinstance(bit_identical, bool),
        "both answers are True or False: checkpoint_rng is the job's switch, bit_identical your prediction.",
    )
    expect(
        checkpoint_rng is False,
        "checkpoint_rng = True is what the drill above already ran (and it came out bit-identical): set it to "
        "False, so each rank's checkpoint leaves its random-number state out.",
    )
    expect(
        your_drill is not None,
        "the drill runs on this machine only: set target = 'local' in the parameters cell and run the cells again.",
    )
    expect(
        your_drill.job.hyperparameters.get("checkpoint_rng") is False,
        "the drill below your answer ran with the random-number state on: run the cell with your answer first, "
        "then the drill cell.",
    )
    expect(
        your_drill.interruptions,
        "no interruption landed in your drill, so it compared nothing: run the drill cell again.",
    )
    c = your_drill.comparison
    expect(
        not c.identical,
        "your drill came out bit-identical even without the random-number state: that happens only if nothing "
        "random runs after a restart. Keep the job's dropout at 0.1 (the lab's) and run it again.",
    )
    expect(
        bit_identical is False,
        f"your drill measured a difference: {c.tensors - c.identical_tensors} of {c.tensors} weight tensors differ "
        f"from the reference, by up to {c.max_abs_diff:.2g}. What draws random numbers while the job trains, and "
        "where does each launch's random-number generator start?",
    )
    return (
        f"different: {c.tensors - c.identical_tensors} of {c.tensors} weight tensors moved, by up to "
        f"{c.max_abs_diff:.2g}. Every launch seeds its generator afresh, so after each restart dropout draws the "
        "masks of the job's first steps again instead of the ones the reference drew at that step. The data order "
        "and the optimizer state were restored; the random numbers were not. That is why every rank saves its "
        "RNG state: without it a resumed run is a different run, close but not the same."
    )
