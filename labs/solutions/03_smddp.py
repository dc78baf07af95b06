# Reference answers for lab 03's exercises (python -m course.run_labs --solutions fills them in).

# %% 03.1
my_processes_per_host = 2  # two processes on each node, as an instance with two GPUs runs
world_size = 2 * 2  # each node's torchrun starts its own two; the world counts both nodes
first_rank_on_algo_2 = 2  # node rank 1 x 2 processes per node + LOCAL_RANK 0
efa_types = {"ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge"}  # FI_PROVIDER=efa; not p5en or g6e: no driver

# %% 03.2
my_distribution = "torchrun"  # SMDDP does not run on P5: the core path's launcher
my_backend = "nccl"  # what runs there ("auto" picks it on GPUs); "smddp" would only fall back with a warning
