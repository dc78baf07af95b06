# Reference answers for lab 04's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 04.1
optimizer_gib_ddp = memory.KNOWN["llama-1b"].params * 8 / 2**30  # every rank holds both moments of every parameter
optimizer_gib_zero1 = optimizer_gib_ddp / 8  # ZeRO-1: each of the 8 ranks holds its slice
