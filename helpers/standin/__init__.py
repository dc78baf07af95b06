"""The stand-in for SageMaker: what plays the service's part when a lab runs with no account. A learner need not read
it; ``helpers/README.md`` says what to read instead.

- a container per host (:mod:`~helpers.standin.local_job`, :mod:`~helpers.standin.container_init`), with SageMaker's
  clock, signals and process tree;
- a channel in each input mode (:mod:`~helpers.standin.channel_delivery`, :mod:`~helpers.standin.fastfile`), read
  from a real S3-compatible store on loopback (:mod:`~helpers.standin.objectstore`) that answers at S3's pace
  (:mod:`~helpers.standin.s3_profile`);
- the AWS account a dry run talks to (:mod:`~helpers.standin.offline`): the SDK's real requests, checked by
  botocore's service model and recorded instead of sent.

The learner's side (the runner, the request builder) imports from here; nothing here imports the learner's side
above :mod:`helpers.job` and :mod:`helpers.contract`.
"""
