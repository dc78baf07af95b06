"""This machine as a SageMaker training cluster: the container contract and its stand-in, the runner, the
loopback object store and input modes, the system monitor and the interruption drill. Never imports
``helpers.aws``."""
