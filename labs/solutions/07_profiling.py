# Reference answers for lab 07's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 07.1
my_tokenize = "ahead"  # once, before training: not again for every title in every epoch
my_num_workers = 2  # enough to have the next batch ready; the other vCPUs stay with the training process
