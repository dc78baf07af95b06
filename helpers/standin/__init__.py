"""The stand-in for SageMaker: what plays the service's part when a lab runs with no account. A learner need not read
it; ``helpers/README.md`` says what to read instead.

It holds a container per host (:mod:`~helpers.standin.local_job`), channels in each input mode
(:mod:`~helpers.standin.channel_delivery`) from an S3-compatible store on loopback (:mod:`~helpers.standin.objectstore`)
and the offline account a dry run talks to (:mod:`~helpers.standin.offline`). It imports nothing of the learner's side
above :mod:`helpers.job_spec` and :mod:`helpers.contract`.
"""
