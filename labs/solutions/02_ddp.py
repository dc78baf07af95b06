# Reference answers for lab 02's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 02.1
global_batch_4 = 4 * (batch_size // processes)  # each rank keeps its rows: the global batch grows 4/processes times
learning_rate_4 = hyperparameters["lr"] * global_batch_4 / batch_size  # the linear rule (square root also passes)
