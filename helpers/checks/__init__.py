"""Every check of a job, before anything is launched or written: small named rules, each a function of the job and
where it runs (:class:`~helpers.checks.findings.Where`).

A rule yields what it finds: ``fail`` (what is wrong and what to do, as one of the ``JobCheckError`` kinds) or
``note`` (advice the dry run prints); the pieces are :mod:`helpers.checks.findings`. The rules every job meets are
:mod:`helpers.checks.common_rules`, with their table ``COMMON``; what one kind of target needs besides (this machine,
the SDK's Docker local mode, an instance type) is :mod:`helpers.checks.target_rules`, with its table ``ONLY``. The
local runner runs ``run_rules(job, Where.local(...))``, preflight ``run_rules(job, Where.sagemaker(...))``: a rule
added to ``COMMON`` applies to both. Choosing the image for a region is a step of its own, after these
(``helpers.aws.images.choose_image``).
"""

from __future__ import annotations

from collections.abc import Iterable

from helpers.checks.common_rules import COMMON
from helpers.checks.findings import Rule, Where, each_finding
from helpers.checks.target_rules import ONLY
from helpers.job import Job


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
