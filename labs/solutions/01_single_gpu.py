# Reference answers for lab 01's exercises (python -m course.run_labs --solutions fills them in).

# %% 01.1
pretrained_dir = "/opt/ml/input/data/pretrained"  # every channel gets /opt/ml/input/data/<channel name>
pretrained_env = "SM_CHANNEL_PRETRAINED"  # SM_CHANNEL_ and the channel's name in capitals
model_dir = "/opt/ml/model"  # SM_MODEL_DIR: uploaded as model.tar.gz when the job ends
