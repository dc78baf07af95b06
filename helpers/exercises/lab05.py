"""Lab 05's exercise: the input mode for a dataset."""

from __future__ import annotations

from helpers.exercises import exercise, expect

MODES = ("File", "FastFile", "FSx")
REASONS = {
    "a": (
        "File",
        "a few GB copy in moments, and every epoch then reads local disk: File's up-front copy costs almost nothing",
    ),
    "b": (
        "FastFile",
        "copying 2 TB would hold the first step for hours, and one job reading large shards in order is what "
        "streaming does well",
    ),
    "c": (
        "FSx",
        "20 jobs would each copy (File) or stream (FastFile) the same 300 GB again; a file system loaded from S3 "
        "once serves them all",
    ),
}


@exercise("05.1", "Pick the input mode", minutes=4)
def input_mode(mode_a, mode_b, mode_c):
    """The input mode for three datasets (a: 4 GB, one job; b: 2 TB read once in order; c: 300 GB, 20 jobs)."""
    for key, answer in (("a", mode_a), ("b", mode_b), ("c", mode_c)):
        expect(answer in MODES, f"mode_{key}: one of {', '.join(MODES)}, not {answer!r}.")
        want, why = REASONS[key]
        expect(answer == want, f"mode_{key}: {answer} is not the best fit here. Think about it this way: {why}.")
    return "File for small data, FastFile for one large sequential pass, FSx when many jobs read the same data."
