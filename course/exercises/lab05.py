"""Lab 05's exercises: the input mode for a data set, from the lab's own run and a job in each mode chosen; the case
study's hour of copying, by the S3 profile."""

from __future__ import annotations

from course.exercises import exercise, expect
from helpers.input_mode import MODES
from sagemaker_standin.s3_inputs import FILE_MODE_CONNECTIONS
from sagemaker_standin.s3_profile import AWS_S3

WANTED = {"a": "File", "b": "FastFile", "c": "FSx"}


def _job(side: dict) -> str:
    """One job of the check's, as its feedback quotes it: mode, seconds, MB from the store."""
    return f"{side['mode']} {side['total_s']:.1f} s, {side['mb']:.0f} MB from the store"


def _why_not(key: str, answer: str, run: dict, yours: dict) -> str:
    """Why ``answer`` does not fit data set ``key``, in this run's own figures (``run``: the lab's ``this_run``) and
    the job the check ran in that mode (``yours[key]``)."""
    n, epochs, mine = run["sequence"], run["small_epochs"], _job(yours[key])
    seq = {m: f"{run[f'{m.lower()}_sequence_s']:.1f} s" for m in MODES}
    mb = {m: f"{run[f'{m.lower()}_sequence_mb']:.0f} MB" for m in MODES}
    reasons = {
        ("a", "FastFile"): f"your job read the shards for {epochs} epochs: {mine}. FastFile fetches a file again "
        f"every time it is opened; File's job above copied once and read local disk every epoch: "
        f"{run['small_data_epochs_file_s']:.1f} s, {run['small_data_epochs_file_mb']:.0f} MB.",
        ("a", "FSx"): f"your job, FSx's first on a new file system: {mine}. One job gains nothing from a file system "
        f"that outlives it, and FSx bills at least 1.2 TiB a month besides; File's job above took "
        f"{run['small_data_epochs_file_s']:.1f} s.",
        ("b", "File"): f"your job read every shard once with {run['step_ms_per_mb']:g} ms of work per MB: {mine}. "
        f"File copies everything before the first step; over the sequence above File's {n} jobs took {seq['File']} "
        f"and FastFile's {seq['FastFile']}. At 2 TB File's copy is hours (exercise 05.2).",
        ("b", "FSx"): f"your job, FSx's first: {mine}. FSx imports the data from S3 before its first job reads it; "
        f"for one pass it is a copy with a monthly bill.",
        ("c", "File"): f"your job, the sequence's next in File mode: {mine}. Every job copies the data again: File's "
        f"{n} jobs above fetched {mb['File']} from the store, FSx's {mb['FSx']}.",
        ("c", "FastFile"): f"your job, the sequence's next in FastFile mode: {mine}. Every job streams the data "
        f"again: FastFile's {n} jobs above fetched {mb['FastFile']}, FSx's {mb['FSx']}. A file system loaded from "
        "S3 once serves all 20.",
    }
    return reasons[(key, answer)]


@exercise("05.1", "Pick the input mode, from this run", minutes=6)
def input_mode(mode_a, mode_b, mode_c, run, yours):
    """The input mode for three datasets (a: 4 GB of shards, one job, several epochs; b: 2 TB read once in order by a
    job that trains as it reads; c: 300 GB, 20 jobs). ``run`` is the lab's ``this_run`` (its measured cases);
    ``yours`` the job the check cell ran for each answer in its mode (``mode``, ``total_s``, ``mb``)."""
    answers = {"a": mode_a, "b": mode_b, "c": mode_c}
    for key, answer in answers.items():
        expect(answer in MODES, f"mode_{key}: one of {', '.join(MODES)}, not {answer!r}.")
    expect(run is not None, "no run to read: set target = 'local' in the parameters cell and run the lab again.")
    expect(yours is not None, "your jobs did not run: run the check cell again after the lab's cells above it.")
    wrong = [(key, answer) for key, answer in answers.items() if answer != WANTED[key]]
    for key, answer in wrong[:1]:  # one at a time, in the run's own figures
        expect(False, f"mode_{key}: not {answer}. {_why_not(key, answer, run, yours)}")
    return (
        f"a: File, for small data read many times (your job: {_job(yours['a'])} for {run['small_epochs']} epochs; "
        f"FastFile's above {run['small_data_epochs_fastfile_s']:.1f} s). b: FastFile, for one long pass while the "
        f"job works (your job: {_job(yours['b'])}). c: FSx, when many jobs read the same data (your job, the "
        f"sequence's next: {_job(yours['c'])})."
    )


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
