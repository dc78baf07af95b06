# Reference answers for lab 04's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 04.1
optimizer_gib_ddp = memory.KNOWN["llama-1b"].params * 8 / 2**30  # every rank holds both moments of every parameter
optimizer_gib_zero1 = optimizer_gib_ddp / real.gpus  # ZeRO-1: each rank, one per GPU of real_target, holds its slice
