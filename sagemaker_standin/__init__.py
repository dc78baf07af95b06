"""The stand-in for SageMaker: what plays the service's part when a lab runs with no account. A learner need not read
it; ``helpers/README.md`` says what to read instead.

It holds a container per host (:mod:`~helpers.local.containers`), channels in each input mode
(:mod:`~sagemaker_standin.channels`) from an S3-compatible store on loopback (:mod:`~sagemaker_standin.objectstore`)
and the offline account a dry run talks to (:mod:`~sagemaker_standin.offline_account`). It imports nothing of the learner's side
above :mod:`helpers.job_spec` and :mod:`helpers.contract`.
"""
