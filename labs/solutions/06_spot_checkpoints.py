# Reference answers for lab 06's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 06.1
interval_min = (2 * 45 * 6 * 3600) ** 0.5 / 60  # sqrt(2 x 45 s x 21,600 s) = 1,394 s: about 23 minutes
