# Reference answers for lab 05's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 05.1
mode_a = "File"  # small: the copy is over in moments, then every epoch reads local disk
mode_b = "FastFile"  # copying 2 TB would hold the first step for hours; one sequential pass streams well
mode_c = "FSx"  # loaded from S3 once, then every job of the search reads it warm
