# Reference answers for lab 01's exercises (python -m course.run_labs --solutions fills them in).

# %% 01.1
pretrained_channel = "pretrained"  # train.py's --pretrained defaults to SM_CHANNEL_PRETRAINED (options.py)
beats_baseline = True  # it starts from weights that already beat the baseline; a few small steps keep them there
