"""Lab 08's exercises: read a stall report; predict, then measure, the loss gap of a resume on one rank."""

from __future__ import annotations

from course.exercises import exercise, expect

STUCK_BECAUSE = ("stopped", "skipped")


@exercise("08.1", "Read a stall report", minutes=5)
def stuck_rank(stuck_rank, stuck_because, drill):
    """The rank that is not where the others are, and why: its process is stopped, or it waits elsewhere."""
    expect(drill is not None, "this exercise reads the drill's stall report: run the lab on a local target.")
    expect(isinstance(stuck_rank, int) and not isinstance(stuck_rank, bool), "stuck_rank is a rank number: 0, 1...")
    expect(stuck_because in STUCK_BECAUSE, f"stuck_because is one of {STUCK_BECAUSE}, not {stuck_because!r}.")
    (stuck,) = drill.stuck()
    waiting = [r.rank for r in drill.ranks if r.in_collective]
    expect(
        stuck_rank == stuck.rank,
        f"rank {stuck_rank} waits in the step's all-reduce, as every healthy rank does "
        f"({', '.join(map(str, waiting))}): look for the rank whose state or stack differs from the others'.",
    )
    actual = "stopped" if stuck.state == "stopped" else "skipped"
    expect(
        stuck_because == actual,
        (
            "its process is stopped (the report's state column): it cannot even print its stacks."
            if actual == "stopped"
            else f"its process runs (state {stuck.state!r}) and printed its stacks: read where it waits."
        ),
    )
    cause = (
        "It left the training loop without the step's all-reduce, as a rank whose data ran out a batch early would "
        "(the uneven-inputs hang): no process is stopped, only the stacks show who is elsewhere."
        if actual == "skipped"
        else "It cannot answer: only py-spy, from outside, reads its stack."
    )
    return (
        f"rank {stuck.rank} is {actual}: it waits in {stuck.frame or 'no collective'}, while the others wait in the "
        f"step's all-reduce, and the two never match. {cause}"
    )


@exercise("08.2", "Predict, then measure, a resume's loss gap", minutes=6)
def resume_gap(resume_processes, predicted_gap, measured_gap):
    """One rank resuming a one-rank checkpoint: the same world size, the same order of every sum."""
    expect(
        resume_processes == 1,
        f"resume_processes is {resume_processes!r}: the task resumes the one-rank checkpoint on one rank.",
    )
    expect(
        isinstance(predicted_gap, (int, float)) and predicted_gap >= 0,
        "predicted_gap is a number >= 0: the largest |loss difference| you expect at any step.",
    )
    expect(measured_gap is not None, "the resume did not run: run the lab on a local target, then this cell again.")
    if measured_gap == 0:
        expect(
            predicted_gap == 0,
            f"the run measured exactly {measured_gap!r}: at the same world size (and thread count) every sum is done "
            "in the same order, so the resume is bit-identical, as lab 06 shows. Only a change of world size "
            "reorders the arithmetic.",
        )
    else:
        expect(
            measured_gap / 10 <= predicted_gap <= measured_gap * 10,
            f"the run measured {measured_gap:.2e}; you predicted {predicted_gap:.2e}, more than ten times off.",
        )
    return (
        f"measured {measured_gap!r}: the same ranks, micro-batches and threads as the uninterrupted run, so the "
        "same arithmetic in the same order. The two-rank resume differed only because its sums ran in another order."
    )
