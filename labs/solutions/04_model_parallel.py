# Reference answers for lab 04's exercises (python -m course.run_labs --solutions fills them in).

# %% 04.1
my_strategy = "zero"  # shards only the optimizer state (half the training state): fits, for one broadcast a step
