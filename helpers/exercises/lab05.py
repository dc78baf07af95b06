"""Lab 05's exercises: the input mode for a data set; the case study's hour of copying, by the S3 profile."""

from __future__ import annotations

from helpers.exercises import exercise, expect
from helpers.input_mode import MODES
from helpers.standin.channel_delivery import FILE_MODE_CONNECTIONS
from helpers.standin.s3_profile import AWS_S3

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


@exercise("05.2", "The case study's hour, by the profile", minutes=6)
def case_study_hour(copy_min_100mb, files_for_an_hour):
    """File mode's copy of 300 GB in 100 MB files, in minutes; and how many equal files make that copy an hour."""
    streams, s3 = FILE_MODE_CONNECTIONS, AWS_S3
    one_connection = s3.seconds(300e9, requests=3000)
    want_min = one_connection / streams / 60
    expect(isinstance(copy_min_100mb, int | float), f"copy_min_100mb: a number of minutes, not {copy_min_100mb!r}.")
    expect(
        abs(copy_min_100mb - one_connection / 60) > 0.02 * want_min,
        f"copy_min_100mb: that is one connection's time. File mode copies `connections` ({streams}) objects at a "
        "time, each on its own connection: divide by it.",
    )
    expect(
        abs(copy_min_100mb - want_min * 60) > 0.02 * want_min * 60,
        "copy_min_100mb: that looks like seconds; the answer is in minutes.",
    )
    expect(
        abs(copy_min_100mb - want_min) <= 0.02 * want_min,
        f"copy_min_100mb: not yet; you wrote {copy_min_100mb:g}. One connection needs S3.seconds(300e9, "
        f"requests=3000) (3,000 files of 100 MB: a first-byte wait each, plus the bytes at "
        f"{s3.connection_mb_per_s:g} MB/s); File mode has `connections` ({streams}) of them; then seconds to minutes.",
    )
    per_request = s3.first_byte_ms / 1e3
    want_files = (3600 * streams - s3.seconds(300e9, requests=0)) / per_request
    expect(isinstance(files_for_an_hour, int | float), f"files_for_an_hour: a count, not {files_for_an_hour!r}.")
    expect(
        files_for_an_hour > 1000,
        f"files_for_an_hour: {files_for_an_hour:g} is too few; is it a file size? The answer is a number of files.",
    )
    one_stream = (3600 - s3.seconds(300e9, requests=0)) / per_request
    expect(
        abs(files_for_an_hour - one_stream) > 0.05 * one_stream,
        f"files_for_an_hour: that is for one connection. File mode's {streams} connections each work the hour, "
        f"so the hour holds {streams} x 3600 connection-seconds for bytes and waits.",
    )
    expect(
        abs(files_for_an_hour - want_files) <= 0.05 * want_files,
        f"files_for_an_hour: not yet; you wrote {files_for_an_hour:,.0f}. Of the hour's seconds on all connections "
        f"(3600 x connections), the bytes take S3.seconds(300e9, requests=0); the rest is first-byte waits of "
        f"{s3.first_byte_ms:g} ms, one per file.",
    )
    return (
        f"{want_min:.0f} minutes with 100 MB files; about {want_files:,.0f} files (some "
        f"{300e9 / want_files / 1e6:.1f} MB each) make it the case study's hour: with many small files the "
        f"first-byte waits cost as much as the bytes. Shard them, as the small-file table above shows."
    )
