# Reference answers for lab 02's exercises (python -m course.run_labs --solutions fills them in).

# %% 02.1
batch_size_4 = batch_size  # the global batch decides each update: 4 ranks of batch_size // 4 rows take the same rows
lr_4 = hyperparameters["lr"]  # the same update from the same rows: nothing to rescale
