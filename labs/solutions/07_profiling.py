# Reference answers for lab 07's exercises (python -m course.run_labs --solutions fills them in).

# %% 07.1
my_num_workers = cores_per_process  # a worker decoding on every core...
my_threads = 1  # ...and the trainer's one thread beside them: its step is mostly the device's
my_persistent_workers = True  # workers forked once, not again at every epoch's start
