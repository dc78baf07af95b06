"""Lab 04's exercise: the cheapest strategy that fits a memory budget, trained and measured."""

from __future__ import annotations

from course.exercises import exercise, expect

CHOICES = ("ddp", "zero", "fsdp", "tp", "pp")
MB = 1e6


def training_state_mb(rank: dict) -> float:
    """What a rank holds for training besides activations: parameters, gradients and optimizer state, in MB."""
    return (rank["param_bytes"] + rank["grad_bytes"] + rank["optimizer_bytes"]) / MB


COSTS = {  # what each strategy adds to DDP's one gradient all-reduce a step, in the lab's words
    "ddp": "nothing: every rank holds everything",
    "zero": "one broadcast of the updated weights a step",
    "fsdp": "an all-gather of every layer's parameters in forward and again in backward, and a reduce-scatter",
    "tp": "two all-reduces in forward and two in backward in every decoder layer",
    "pp": "activations passed between stages, and ranks idle in the pipeline's bubble",
}


@exercise("04.1", "The cheapest strategy that fits a memory budget", minutes=5)
def fit_the_budget(my_strategy, measured, budget_mb):
    """The learner picks a strategy for a per-rank budget; the strategy's own run says whether it fits."""
    expect(my_strategy in CHOICES, f"pick one of {', '.join(repr(s) for s in CHOICES)}.")
    expect(
        measured is not None and budget_mb is not None,
        "there is no run to read: the exercise trains your choice on this machine (target = 'local'), after the "
        "lab's own run of every strategy.",
    )
    expect(
        measured["strategy"] == my_strategy,
        f"the run below your answer trained {measured['strategy']!r}: run the cell under your answer again.",
    )
    held = max(training_state_mb(rank) for rank in measured["ranks"])
    expect(
        held <= budget_mb,
        f"{my_strategy} held {held:.2f} MB on its fullest rank, over the {budget_mb:.2f} MB budget: it does not "
        "fit. Which strategies split the optimizer state, or everything, across the ranks (the chart above)?",
    )
    expect(
        my_strategy == "zero",
        f"{my_strategy} fits ({held:.2f} of {budget_mb:.2f} MB), but it pays for that with {COSTS[my_strategy]}. "
        "One strategy fits with less: it keeps DDP's step and shards only the largest part, the optimizer state.",
    )
    return (
        f"ZeRO-1: {held:.2f} MB of the {budget_mb:.2f} MB budget on its fullest rank, for {COSTS['zero']}. FSDP and "
        "PP would fit with room to spare and pay every step for it; reach for them when ZeRO-1 no longer fits."
    )
