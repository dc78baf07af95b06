"""This machine as a SageMaker training cluster: the container's stand-in (its contract is :mod:`helpers.contract`),
the runner, the loopback object store and input modes, the system monitor and the interruption drill. Never imports
``helpers.aws``."""
