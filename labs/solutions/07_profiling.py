# Reference answers for lab 07's exercises (python -m course.run_labs --solutions fills them in).

# %% 07.1
my_num_workers = 2 if t.gpus else 0  # on a CPU every worker takes a core from the trainer, which can tokenize itself
my_persistent_workers = bool(my_num_workers)  # workers forked once, not again at every epoch's start
my_threads = max(1, cores_per_process - my_num_workers)  # workers and threads together: the cores, no more
