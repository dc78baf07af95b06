# Reference answers for lab 06's exercises (python -m course.run_labs --solutions fills them in).

# %% 06.1
checkpoint_rng = False  # leave each rank's random-number state out of its checkpoints
bit_identical = False  # dropout draws new masks after every restart: the resumed run drifts from the reference
