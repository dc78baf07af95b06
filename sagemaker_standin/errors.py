"""What the stand-in refuses, or cannot do, as a service would: every error it raises derives from
:class:`StandInError` and its message names the fix. It knows nothing of the helpers; where one of its errors reaches
a learner through a job's launch, the helpers' runner passes it on as one of theirs (a channel that cannot be
presented is a ``ChannelError``)."""


class StandInError(Exception):
    """The stand-in for SageMaker refused, or could not do, what was asked; the message says what to do."""
