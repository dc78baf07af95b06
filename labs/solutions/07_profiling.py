# Reference answers for lab 07's exercises (python -m course.run_labs --solutions fills them in).

# %% 07.1
my_threads = 1  # one core computes the model...
my_num_workers = cores_per_process - my_threads  # ...and every other core decodes (none on one core: the trainer does)
my_persistent_workers = bool(my_num_workers)  # workers forked once, not again at every epoch's start
