"""Jobs on this machine: the local runner a lab's ``run_job`` reaches (:mod:`helpers.local.runner`), and the labs'
drills built on it (the interruption drill, lab 08's failures and restarts, the system monitor). What stands in for
SageMaker itself lives in :mod:`sagemaker_standin`. Never imports ``helpers.aws``."""
