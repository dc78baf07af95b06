# Reference answers for lab 03's exercises (python -m course.run_labs --solutions fills them in).

# %% 03.1
world_size_p5 = 2 * 8  # two instances, one process per GPU: 8 H100s each
first_rank_on_algo_2 = 8  # node rank 1 x 8 processes per node + LOCAL_RANK 0
efa_types = {"ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge"}  # FI_PROVIDER=efa; not p5en or g6e: no driver

# %% 03.2
my_distribution = "torchrun"  # SMDDP does not run on P5: the core path's launcher
my_backend = "nccl"  # what runs there ("auto" picks it on GPUs); "smddp" would only fall back with a warning
