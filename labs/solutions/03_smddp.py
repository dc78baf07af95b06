# Reference answers for lab 03's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 03.1
smddp_types = {"ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge"}  # not P5, not G5, not the plain P3
