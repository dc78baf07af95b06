# Reference answers for lab 01's exercises (python -m helpers.run_labs --solutions fills them in).

# %% 01.1
precision_g5 = "bf16"  # the A10G (Ampere) has bf16: fp32's range, so no loss scaling
precision_p3 = "fp16"  # the V100 (Volta) has no bf16: fp16 with a GradScaler
