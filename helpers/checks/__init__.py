"""Every check of a job, before anything is launched or written: small named rules, each a function of the job and
where it runs (:class:`~helpers.checks.findings.Where`).

A rule yields ``fail`` (a ``JobCheckError`` saying what to do) or ``note`` (advice the dry run prints), from
:mod:`helpers.checks.findings`. ``COMMON`` (:mod:`helpers.checks.common_rules`) binds every job, local or on
SageMaker; ``ONLY`` (:mod:`helpers.checks.target_rules`) one kind of target. ``run_rules(job, where)`` runs them.
"""

from __future__ import annotations

from collections.abc import Iterable

from helpers.checks.common_rules import COMMON
from helpers.checks.findings import Rule, Where, each_finding
from helpers.checks.target_rules import ONLY
from helpers.job_spec import Job


def run_rules(job: Job, where: Where, rules: Iterable[Rule] | None = None) -> list[str]:
    """Raise the first refusal of ``rules`` (by default, those of the target's kind: :func:`rules_for`) with its own
    error kind and a message naming the fix; else return the notes."""
    notes = []
    for found in each_finding(job, where, rules_for(where.target.kind) if rules is None else rules):
        if found.error is not None:
            raise found.error(found.message)
        notes.append(found.message)
    return notes


def rules_for(kind: str) -> tuple[Rule, ...]:
    """The rules a job meets on a target of ``kind`` (``Target.kind``): ``COMMON``, then that kind's own."""
    return (*COMMON, *ONLY[kind])
