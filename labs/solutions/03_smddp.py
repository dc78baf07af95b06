# Reference answers for lab 03's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 03.1
world_size_p5 = 2 * 8  # two instances, one process per GPU: 8 H100s each
first_rank_on_algo_2 = 8  # node rank 1 x 8 processes per node + LOCAL_RANK 0
efa_types = {"ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g5.48xlarge"}  # FI_PROVIDER=efa; not p5en or g6e: no driver

# %% 03.2
smddp_types = {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}  # not P5, not G5, not the plain P3
