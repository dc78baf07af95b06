"""Lab 07's exercise: feed the trainer while still tokenizing on the fly, and beat the starved run, measured."""

from __future__ import annotations

from helpers.exercises import exercise, expect

TARGET_SPEEDUP = 1.1  # samples/s of the learner's pipeline over the starved one's: the mean over pairs run in turn


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


@exercise("07.1", "Feed the trainer while tokenizing on the fly", minutes=6)
def tokenize_on_the_fly_and_keep_up(my_num_workers, my_persistent_workers, my_threads, cores, starved, yours):
    """The learner keeps ``tokenize = "on_the_fly"`` and picks the loader's workers, whether they persist, and the
    trainer's threads; the pairs just run (``starved`` and ``yours``: each side's ``runs``, the metrics of one run per
    pair, and its ``hyperparameters``) must show the learner's runs, on average over the pairs, at least
    :data:`TARGET_SPEEDUP` times the starved one's samples per second."""
    whole = all(isinstance(v, int) and not isinstance(v, bool) for v in (my_num_workers, my_threads))
    expect(whole and my_num_workers >= 0 and my_threads >= 1, "my_num_workers: 0 or more; my_threads: 1 or more.")
    expect(isinstance(my_persistent_workers, bool), "my_persistent_workers: True or False.")
    expect(
        yours is not None,
        "the pair runs on this machine only: set target = 'local' in the parameters cell and run the cells again.",
    )
    ran = yours["hyperparameters"]
    expect(
        (ran.get("num_workers"), ran.get("threads"), ran.get("tokenize")) == (my_num_workers, my_threads, "on_the_fly"),
        "the pair below ran other settings than your answer: run the cell with your answer first, then the pair.",
    )
    pairs = list(zip(starved["runs"], yours["runs"]))
    expect(pairs, "no pair ran: run the cell with the pair again.")
    ratios = [y["samples_per_sec"] / s["samples_per_sec"] for s, y in pairs]
    ratio = sum(ratios) / len(ratios)  # one pair can catch a neighbour's burst on one side: the pairs' mean
    fast = sum(y["samples_per_sec"] for _, y in pairs) / len(pairs)
    slow = sum(s["samples_per_sec"] for s, _ in pairs) / len(pairs)
    each = ", ".join(f"{r:.2f}x" for r in ratios)
    wanted = my_num_workers + my_threads
    expect(
        ratio >= TARGET_SPEEDUP,
        f"your pipeline ran at {ratio:.2f}x the starved one's samples/s on average ({fast:.0f} against {slow:.0f}; "
        f"pairs: {each}); the target is {TARGET_SPEEDUP}x. "
        + (
            f"Your {my_num_workers} workers and {my_threads} trainer threads want {wanted} cores, and the job has "
            f"{cores}: on a CPU, who computes the model while the workers tokenize?"
            if wanted > cores
            else "Look at the starved run's process chart: what did its workers cost at the start of every epoch, "
            "and is there work for them here that the trainer could not do between its steps? (A machine busy with "
            "other work moves single runs: the pairs' spread above says how much.)"
        ),
    )
    waits = [sum(r["data_wait_frac"] for r in side["runs"]) / len(side["runs"]) for side in (yours, starved)]
    persist = " that persist" if my_persistent_workers and my_num_workers else ""
    return (
        f"{ratio:.2f}x the starved run's samples/s on average ({fast:.0f} against {slow:.0f}; pairs: {each}), still "
        f"tokenizing every title on the fly: {_count(my_num_workers, 'worker')}{persist} and "
        f"{_count(my_threads, 'trainer thread')} on {_count(cores, 'core')}. Your runs waited for data "
        f"{waits[0]:.1%} of each step, the starved ones {waits[1]:.1%}"
        + (
            ": more, and still faster. On a CPU the starved workers did not make the trainer wait; they took its "
            "cores, which is where the time went."
            if waits[0] > waits[1]
            else ": less, and faster."
        )
        + " Fewer workers and threads than cores, and no workers forked again every epoch, is most of the fix; "
        "tokenizing ahead (the fixed run) then removes the tokenizing itself."
    )
