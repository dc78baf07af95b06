"""The one base of every error the helpers raise on purpose, and the errors more than one concern raises.

Each error is also the built-in kind it always was (a ``ValueError`` for bad input, a ``RuntimeError`` for a run that
went wrong...), so ``except ValueError`` keeps working; ``except WorkshopError`` catches them all in a notebook.
"""

from __future__ import annotations


class WorkshopError(Exception):
    """Something the workshop's helpers refused or could not do, with a message that says what to do."""


class TargetError(WorkshopError, ValueError):
    """An unknown or unusable target; the message says what to choose instead."""


class JobCheckError(WorkshopError, ValueError):
    """The job cannot run as described (a rule of :mod:`helpers.checks` refused it): found before anything is
    launched or written, with a message that names the fix."""


class UnknownOption(WorkshopError, TypeError):
    """A keyword a job's runner does not take (the local runner's, or SageMaker's ``LaunchOptions``): refused, naming
    the options there are, as a typo would otherwise change nothing."""
