# Reference answers for lab 05's exercises (python -m course.run_labs --solutions fills them in).

# %% 05.1
mode_a = "File"  # small: the copy is over in moments, then every epoch reads local disk
mode_b = "FastFile"  # copying 2 TB would hold the first step for hours; it streams while the job trains
mode_c = "FSx"  # loaded from S3 once, then every job of the search reads it warm

# %% 05.2
copy_min_100mb = S3.seconds(300e9, requests=3000) / connections / 60  # 3,000 files of 100 MB, `connections` at a time
files_for_an_hour = (3600 * connections - S3.seconds(300e9, requests=0)) / (S3.first_byte_ms / 1e3)  # the rest: waits
