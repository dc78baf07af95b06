# Reference answers for lab 08's exercises (python -m course.run_labs --solutions fills them in).

# %% 08.1
stuck_rank = 1  # rank 1's stack is in leave() (the end-of-training barrier); rank 0's is in the step's all-reduce
stuck_because = "skipped"  # its state is sleeping, not stopped, and it printed its stacks: it waits elsewhere

# %% 08.2
resume_processes = 1  # resumed as it was written: one rank, against that one-rank job's own continuation
predicted_gap = 0.0  # the same world size, micro-batches and threads: every sum in the same order, bit-identical
